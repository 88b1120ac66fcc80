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


def label_of(items) -> tuple[bool, str]:
    """The label a caller applies to its session for what it read: untrusted
    if any item is tagged memory-tainted, and the highest class among them."""
    untrusted, klass = False, "public"
    for item in items:
        untrusted = untrusted or item.tag == "memory-tainted"
        klass = higher_class(klass, item.klass)
    return untrusted, klass
