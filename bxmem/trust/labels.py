"""Trust classes, tool-result labels and the read path's tags, apart from trust/rules.py so the read path
can rank and tag without importing the rules.
"""

from bxmem.trust.sanitize import find_secret

CLASS_RANK = {"public": 0, "private": 1, "secret": 2}

# Tags, as recall and ask report them.
IDENTITY, MEMORY, TAINTED = "identity", "memory", "memory-tainted"


def higher_class(a: str, b: str) -> str:
    """The more restrictive of two classes; an unknown class counts as secret."""
    if a not in CLASS_RANK or b not in CLASS_RANK:
        return "secret"
    return a if CLASS_RANK[a] >= CLASS_RANK[b] else b


def tool_result_label(label: object) -> tuple[bool, str] | None:
    """(untrusted, class) of one tool result, from the label loopd logged with it,
    or None when it cannot be read:

    | the result's label                                    | untrusted | class    |
    | an object with `untrusted` true or false and a `class` | as given  | as given |
    | of public, private or secret (other fields ignored)    |           |          |
    | anything else: missing, not an object, `untrusted`    | unreadable: the line  |
    | not a boolean, `class` missing or not one of the three | taints its session    |

    An unreadable label makes its line unreadable, which counts as untrusted
    and secret from that line on (UNREADABLE_LINE, rules.log_labels)."""
    if not isinstance(label, dict):
        return None
    untrusted, trust_class = label.get("untrusted"), label.get("class")
    if not isinstance(untrusted, bool) or not isinstance(trust_class, str) or trust_class not in CLASS_RANK:
        return None
    return untrusted, trust_class


# What a line of a session log that bxmem cannot read counts as, from that line
# on: the worst label there is (nothing reaches a trusted workspace unless
# both labels say clean; a secret session reaches none).
UNREADABLE_LINE = (True, "secret")


def label_of(items) -> tuple[bool, str]:
    """The label a caller applies to its session for what it read: untrusted
    if any item is tagged memory-tainted (or anything but a clean tag), and the
    highest class among them."""
    untrusted, trust_class = False, "public"
    for item in items:
        untrusted = untrusted or item.tag not in (IDENTITY, MEMORY)
        trust_class = higher_class(trust_class, item.trust_class)
    return untrusted, trust_class


def stored_label(tag: object, trust_class: object) -> tuple[str, str]:
    """A hit's (tag, class) as the local index holds them, read fail-closed: a tag or a
    class bxmem never writes (the file changed in place: SQLite keeps no checksum of a
    row) makes the hit memory-tainted and secret."""
    if tag in (IDENTITY, MEMORY, TAINTED) and trust_class in CLASS_RANK:
        return tag, trust_class
    return TAINTED, "secret"


# --- what the read path tags ------------------------------------------------------------


def turn_labels(decided: dict) -> tuple[str, str]:
    """(tag, class) of a decided turn in the local index: exact, as decide saw them.

    | the decided turn                      | tag            | class              |
    | untrusted by brokerd or the log       | memory-tainted | as recorded        |
    | clean                                 | memory         | as recorded        |
    | holds a known-prefix secret           | (as above)     | secret             |
    | no class recorded                     | (as above)     | private            |
    """
    untrusted = bool(decided.get("untrusted_by"))
    trust_class = decided.get("class") or "private"
    if decided.get("secret_rule"):
        trust_class = "secret"  # a known-prefix secret in the text makes a hit secret
    return (TAINTED if untrusted else MEMORY), trust_class


def note_tag(trust: object) -> str:
    """A journalled note's tag in the local index: memory if trusted; untrusted,
    flagged or anything else is memory-tainted."""
    return MEMORY if trust == "trusted" else TAINTED


def entry_class(text: str) -> str:
    """A memory entry is private, unless it holds a known-prefix secret: then it
    is recalled as secret, as a turn holding one is (turn_labels)."""
    return "secret" if find_secret(text) else "private"


def read_tag(trust: str | None) -> str:
    """Another agent's trusted workspace, searched or asked: memory if the owner
    labelled it trusted, else memory-tainted (its class is the configured one)."""
    return MEMORY if trust == "trusted" else TAINTED


# This agent's own workspaces, as ask_memory tags their answers; the fleet's
# notes, as recall tags them.
OWN_LABELS = {"trusted": (MEMORY, "private"), "untrusted": (TAINTED, "private"), "fleet": (TAINTED, "private")}
FLEET_LABEL = OWN_LABELS["fleet"]
