"""The demo: a sample Boxmaker home, a stand-in brokerd, and a walk through the jobs."""
