"""Trust classes and their order (shared by the rules and the read path).

Kept apart from rules.py so the read path can rank labels without importing
anything else.
"""

CLASS_RANK = {"public": 0, "private": 1, "secret": 2}


def higher_class(a: str, b: str) -> str:
    """The more restrictive of two classes; an unknown class counts as secret."""
    if a not in CLASS_RANK or b not in CLASS_RANK:
        return "secret"
    return a if CLASS_RANK[a] >= CLASS_RANK[b] else b
