"""What an in-doubt lookup may take for this agent's own message. Journal ids are per host and session
names can be shared, so in the fleet another agent's message can carry our `bxmem_item` in the same session:
a match must also have our peer, name no other agent and hold the text we would send.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def text_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def qualified(metadata: dict, content: str, agent: str) -> dict:
    return {**metadata, "bxmem_agent": agent, "bxmem_sha256": text_hash(content)}


def is_ours(found: dict, expected: dict, agent: str) -> bool:
    """Whether `found` (a message Honcho listed) is the message `expected` (one
    bxmem builds to send, with `qualified` metadata) that this agent wrote."""
    raw = found.get("metadata")
    meta: dict = raw if isinstance(raw, dict) else {}
    want = expected["metadata"]
    content = found.get("content")
    return (
        meta.get("bxmem_item") == want["bxmem_item"]
        and meta.get("part") == want["part"]
        and type(meta.get("part")) is int
        and found.get("peer_id") == expected["peer_id"]
        and meta.get("bxmem_agent", agent) == agent  # absent: written before agent-qualified ids
        and isinstance(content, str)
        and text_hash(content) == want["bxmem_sha256"]
        and meta.get("bxmem_sha256", want["bxmem_sha256"]) == want["bxmem_sha256"]
    )


def present_parts(found: Iterable[dict], messages: list[dict], agent: str) -> dict[int, str]:
    """{part: message id} of the parts of `messages` that `found` already holds as ours."""
    by_part = {m["metadata"]["part"]: m for m in messages}
    present: dict[int, str] = {}
    for message in found:
        part = (message.get("metadata") or {}).get("part") if isinstance(message.get("metadata"), dict) else None
        if type(part) is int and part in by_part and is_ours(message, by_part[part], agent):
            present.setdefault(part, message.get("id", ""))
    return present
