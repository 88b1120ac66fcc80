"""bxmem's evaluation corpus: what the agent gets back from recall and ask.

Not part of the shipped package. `./dev eval` runs it (eval/run.py).
"""
