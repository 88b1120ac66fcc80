"""A turn's decision as Honcho messages: the same item gives the same messages every time, because a lookup
finds the missing parts by their `part` metadata.
"""

from __future__ import annotations

from pathlib import Path

from bxmem.commands.send.lookup import qualified
from bxmem.commands.send.plan import LocalFailure
from bxmem.formats.timestamps import parse_time
from bxmem.honcho.api import MAX_BATCH, MAX_MESSAGE_CHARS
from bxmem.log import log
from bxmem.sources.loopd import SpanChanged, SpanReader
from bxmem.trust.rules import peer_problem, send_veto
from bxmem.trust.sanitize import chunks, neutralise

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable


def build(item: dict, speaker_text: str, reply: str, agent: str, owner: str | None) -> list[dict]:
    """The messages of a turn (its whole decision, `item`) whose texts are read back;
    LocalFailure if it may not or cannot be sent."""
    veto = send_veto(speaker_text, reply)
    if veto:
        raise LocalFailure(veto)
    # send holds such a turn before it gets here (write_policy.hold_pending): this is the last line.
    problem = peer_problem(item["peer"], agent, owner) if isinstance(item.get("peer"), str) else "no speaker peer"
    if problem:
        raise LocalFailure(f"its speaker's peer may not be written under this agent and owner ({problem})")
    parts: list[tuple[str, str, str]] = []
    for role, peer, text in (("speaker", item["peer"], speaker_text), ("agent", agent, reply)):
        parts += [(role, peer, piece) for piece in chunks(neutralise(text), MAX_MESSAGE_CHARS)]
    if len(parts) > MAX_BATCH:
        raise LocalFailure(f"is {len(parts)} messages long, over the {MAX_BATCH} one request can carry")
    messages = []
    for index, (role, peer, content) in enumerate(parts):
        message = {
            "peer_id": peer,
            "content": content,
            "metadata": qualified(
                {
                    "bxmem_item": item["item"],
                    "part": index,
                    "parts": len(parts),
                    "role": role,
                    "bx_session": item["session"],
                    "turn": item["turn"],
                },
                content,
                agent,
            ),
        }
        if valid_time(item.get("at")):
            message["created_at"] = item["at"]
        messages.append(message)
    return messages


def valid_time(value: object) -> bool:
    return parse_time(value) is not None


class Messages:
    """Items' whole decisions and messages, read back for the run and kept until
    the group that needs them is sent (`forget`)."""

    def __init__(
        self, decision_of: Callable[[str], dict], logs: Path, agent: str, owner: str | None, secret: bytes | None = None
    ) -> None:
        self.decision_of, self.logs, self.agent, self.owner = decision_of, logs, agent, owner
        self._spans = SpanReader(secret)  # `secret`: entry.key, which checks each span holds the line decided
        self._messages: dict[str, list[dict]] = {}
        self._events: dict[str, dict] = {}

    def full(self, item: dict) -> dict:
        """The item's whole decision, read back from the ledger by its offset (checked:
        store/outbox.py's `decision`), going to the workspace the outbox names (the
        owner may have re-routed it since)."""
        if "log" in item or "actions" in item:
            return item
        if item["item"] not in self._events:
            decision = self.decision_of(item["item"])
            self._events[item["item"]] = (
                decision if decision.get("ws") == item["ws"] else {**decision, "ws": item["ws"]}
            )
        return self._events[item["item"]]

    def of(self, item: dict) -> list[dict]:
        key = item["item"]
        if key in self._messages:
            return self._messages[key]
        item = self.full(item)
        try:
            texts, reply = self._spans.turn_texts(self.logs, item)
        except SpanChanged as exc:
            raise LocalFailure(f"not sent: {exc}") from None
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise LocalFailure(f"cannot read the turn back from {self.logs / item['log']}: {why}") from None
        if reply is None:
            raise LocalFailure("the decision names no reply")
        self._messages[key] = build(item, "\n".join(texts), reply, self.agent, self.owner)
        return self._messages[key]

    def forget(self, key: str) -> None:
        self._messages.pop(key, None)
        self._events.pop(key, None)

    def close(self) -> None:
        if self._spans.unkeyed:
            log.info(
                f"{self._spans.unkeyed} turn(s) read back without their line hashes (decided before them, or with "
                "another entry.key): checked by type, turn and speaker only"
            )
        self._spans.close()
