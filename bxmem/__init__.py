"""bxmem: memory sync for a Boxmaker agent host.

Kept empty on purpose: `bxmem send` and friends start from a timer every few
seconds, and anything imported here is paid on every idle run.
"""

__version__ = "0.1.0"
