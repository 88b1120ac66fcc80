"""Trust classes, their order, and the labels the read path gives what it finds.

Kept apart from rules.py so the read path (recall, ask, the index) can rank
and tag without importing anything else. Each function is pure and holds one
table of the seed (000): section 4's classes, section 5's tool-result labels,
section 8's recall tags, section 9's ask tags.
"""

CLASS_RANK = {"public": 0, "private": 1, "secret": 2}

# Tags, as recall and ask report them (seed section 8).
IDENTITY, MEMORY, TAINTED = "identity", "memory", "memory-tainted"


def higher_class(a: str, b: str) -> str:
    """The more restrictive of two classes; an unknown class counts as secret."""
    if a not in CLASS_RANK or b not in CLASS_RANK:
        return "secret"
    return a if CLASS_RANK[a] >= CLASS_RANK[b] else b


def tool_result_label(label: object) -> tuple[bool, str]:
    """(untrusted, class) of one tool result, from the label loopd logged with it:

    | the result's label                  | untrusted            | class                  |
    | not an object (missing, unreadable) | yes                  | secret                 |
    | an object                           | unless it says false | its class, else public |
    | an object whose class is no string  | (as above)           | secret                 |

    The worst case for what cannot be read: the session it taints goes nowhere.
    A string class is passed on as given; higher_class counts an unknown one as secret."""
    if not isinstance(label, dict):
        return True, "secret"
    klass = label.get("class", "public")
    return label.get("untrusted") is not False, klass if isinstance(klass, str) else "secret"


def label_of(items) -> tuple[bool, str]:
    """The label a caller applies to its session for what it read: untrusted
    if any item is tagged memory-tainted, and the highest class among them."""
    untrusted, klass = False, "public"
    for item in items:
        untrusted = untrusted or item.tag == TAINTED
        klass = higher_class(klass, item.klass)
    return untrusted, klass


# --- what the read path tags (seed sections 8 and 9) ----------------------------------


def turn_labels(decided: dict) -> tuple[str, str]:
    """(tag, class) of a decided turn in the local index: exact, as decide saw them.

    | the decided turn                      | tag            | class              |
    | untrusted by brokerd or the log       | memory-tainted | as recorded        |
    | clean                                 | memory         | as recorded        |
    | holds a known-prefix secret           | (as above)     | secret             |
    | no class recorded                     | (as above)     | private            |
    """
    untrusted = bool(decided.get("untrusted_by"))
    klass = decided.get("class") or "private"
    if decided.get("secret_rule"):
        klass = "secret"  # a known-prefix secret in the text makes a hit secret
    return (TAINTED if untrusted else MEMORY), klass


def note_tag(trust: object) -> str:
    """A journalled note's tag in the local index: memory if trusted; untrusted,
    flagged or anything else is memory-tainted."""
    return MEMORY if trust == "trusted" else TAINTED


def entry_class(text: str) -> str:
    """A memory entry is private, unless it holds a known-prefix secret: then it
    is recalled as secret, as a turn holding one is (turn_labels)."""
    # Imported only when an entry is indexed: not on recall's path.
    from .sanitize import find_secret

    return "secret" if find_secret(text) else "private"


def read_tag(trust: str | None) -> str:
    """Another agent's trusted workspace, searched or asked: memory if the owner
    labelled it trusted, else memory-tainted (its class is the configured one)."""
    return MEMORY if trust == "trusted" else TAINTED


# This agent's own workspaces, as ask_memory tags their answers; the fleet's
# notes, as recall tags them (seed 9 and 8).
OWN_LABELS = {"trusted": (MEMORY, "private"), "untrusted": (TAINTED, "private"), "fleet": (TAINTED, "private")}
FLEET_LABEL = OWN_LABELS["fleet"]
