"""One memory write's actions, in order, with only what runner.Sender hands in."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bxmem.commands.send.lookup import present_parts, qualified
from bxmem.commands.send.plan import LocalFailure, Tally, next_session, session_gone_reason
from bxmem.honcho.answers import is_honcho_id
from bxmem.honcho.api import MAX_MESSAGE_CHARS, BadAnswer, BadId, KeyRefused, Missing, Refused, Unavailable
from bxmem.log import log
from bxmem.sources.journal import LineChanged
from bxmem.sources.journal import read_field as read_journal_field
from bxmem.sources.loopd import session_id_problem
from bxmem.store import ledger_events
from bxmem.store.local_key import load as load_key
from bxmem.trust.sanitize import chunks, neutralise

if TYPE_CHECKING:
    from bxmem.config.loader import Config, HonchoSettings
    from bxmem.honcho.client import WorkspaceClient
    from bxmem.store.ledger_events import Attempt
    from bxmem.store.outbox import Outbox


class EditActions:
    """Carries out one edit's actions in order (`send`), looking first for what an
    in-doubt attempt may already have done."""

    def __init__(
        self,
        config: Config,
        box: Outbox,
        report: Tally,
        *,
        record: Callable[..., None],  # Sender.record: ledger lines, folded into the outbox
        client: Callable[[str], WorkspaceClient],
        attempt: Callable[..., Attempt],  # an attempt line timed by the run's clock
        fail: Callable[..., None],  # Sender.fail: failed lines, counted and logged
        succeeded: Callable[[], None],  # Honcho answered: an outage is over
    ) -> None:
        assert config.honcho is not None
        self.config = config
        self.honcho: HonchoSettings = config.honcho
        self.box = box
        self.report = report
        self.record = record
        self.client = client
        self._attempt = attempt
        self._fail = fail
        self._succeeded = succeeded
        self._secret = load_key(config.paths.state, create=False)  # checks each span holds the line decided

    def send(self, item: dict) -> None:
        key = item["item"]
        in_doubt = key in self.box.attempts
        if key in self.box.undone and not in_doubt:
            self.record([ledger_events.cancelled(key, item["ws"], self.box.undone[key])])
            log.info(f"{key} was undone before it was sent: it is not sent at all")
            return
        if not in_doubt:
            self.record([self._attempt(items=[key], ws=item["ws"], role=item["role"], session=item["session"])])
        self.report.requests += 1
        results: list[dict] = []
        try:
            for index, action in enumerate(item["actions"]):
                results.append(self._do(item, index, action, in_doubt))
        except Unavailable as exc:
            if exc.unsent and not results and not in_doubt:
                self.record([ledger_events.unsent([key], item["ws"], exc.kind)])
            raise
        except LocalFailure as exc:
            self._fail([item], None, str(exc), results, in_doubt=in_doubt)
            return
        except BadAnswer as exc:
            # An unusable answer to a create may have come with the conclusion or note stored.
            self._fail([item], None, f"{exc.operation}: {exc.kind}", results, in_doubt=in_doubt or exc.maybe_stored)
            return
        except Refused as exc:
            if isinstance(exc, KeyRefused):
                if not results and not in_doubt:  # refused before anything was written: nothing to look up
                    self.record([ledger_events.unsent([key], item["ws"], f"key refused (HTTP {exc.status})")])
                raise
            why = f"{exc.operation}: {exc.kind}" if isinstance(exc, BadId) else f"{exc.operation} refused"
            self._fail([item], exc.status, why, results, in_doubt=in_doubt)
            return
        self.record([ledger_events.sent_edit(key, item["ws"], item["role"], results)])
        self._succeeded()
        self.report.sent += 1

    def _journal_text(self, spec: dict | None, edit_id: str | None = None) -> str:
        """The text a spec names, once its span is checked (journal.read_field);
        `edit_id`: the edit whose own line it is, when the action is its own."""
        if not spec:
            raise LocalFailure("the edit names no text")
        try:
            return neutralise(read_journal_field(self.config.paths.journal, spec, self._secret, edit_id))
        except LineChanged as exc:
            raise LocalFailure(f"not sent: {exc}") from None
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            why = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else exc
            raise LocalFailure(f"cannot read the entry back from the journal: {why}") from None

    def _session_for_writes(self, ws: str, bx_session: str | None) -> str:
        """The latest Honcho session of the Boxmaker session in `ws`, created (holding only
        the agent's peer) if there is none yet: conclusions create nothing by themselves."""
        if not bx_session or not session_id_ok(bx_session):
            raise LocalFailure("the edit's session is not a valid Honcho session id")
        known = self.box.workspace(ws)["sessions"].get(bx_session)
        if known and known.get("gone") and not known.get("renew"):
            raise LocalFailure(session_gone_reason(known["name"]))
        if known and not known.get("gone"):
            return known["name"]
        # the next one, when Honcho lost the last and the owner resends; never a name used before
        name, n = next_session(bx_session, known["n"] + 1 if known else 1, self.box.hsessions.get(ws, {}))
        self.client(ws).create_session(
            name, {self.honcho.agent: False}, metadata={"bx_session": bx_session, "source": "bxmem"}
        )
        self.record([ledger_events.created_session(ws, name, bx_session, n, [self.honcho.agent])])
        return name

    def _do(self, item: dict, index: int, action: dict, in_doubt: bool) -> dict:
        do, ws = action["do"], item["ws"]
        client = self.client(ws)
        result: dict = {"i": index, "do": do}
        if do in ("conclude", "reconclude"):
            if do == "reconclude":
                original = self.box.conclusions.get(action["of"])
                if not original or original.get("deleted_by") != action.get("undoes"):
                    return {**result, "skipped": "the edit being undone deleted nothing"}
                hsession = original["hsession"]  # written again with the session of the one it replaces
            else:
                hsession = self._session_for_writes(ws, item["session"])
            text = self._journal_text(action.get("text"), item["edit"] if do == "conclude" else None)
            peer = self.honcho.owner if action.get("about") == "owner" else self.honcho.agent
            if in_doubt:
                done = self.box.conclusions.get(f"{item['item']}#{index}")
                if done and done.get("ws") == ws and is_honcho_id(done.get("id")):
                    # Written by an earlier try that then failed further on: recorded, so not written again.
                    return {**result, "id": done["id"], "hsession": done.get("hsession") or hsession, "settled": True}
                known = {c["id"] for c in self.box.conclusions.values() if isinstance(c.get("id"), str)}
                filters = {"observer_id": peer, "observed_id": peer, "session_id": hsession}
                # Each listed as answers.listed_conclusion checked it (a Honcho id, text):
                # an answer that is not usable stops the lookup, so nothing is written twice.
                for found in client.list_conclusions(filters):
                    mine = found["observer_id"] == peer and found["observed_id"] == peer
                    if mine and found["content"] == text and found["id"] not in known:
                        return {**result, "id": found["id"], "hsession": hsession, "settled": True}
            conclusion = {"content": text, "observer_id": peer, "observed_id": peer, "session_id": hsession}
            return {**result, "id": client.create_conclusions([conclusion])[0], "hsession": hsession}
        if do == "unconclude":
            target = self.box.conclusions.get(action["of"])
            if not target or target.get("deleted_by"):
                return {**result, "of": action["of"], "skipped": "no live conclusion was written for it"}
            # The id is the ledger's, written from an older answer: the client checks it is a
            # Honcho id before it goes in the path (BadId: the edit fails, nothing is sent).
            there = self.client(target["ws"]).delete_conclusion(target["id"])
            return {**result, "of": action["of"], "deleted": target["id"], "was_there": there}
        if do in ("fleet-message", "retract"):
            if do == "retract":
                original = self.box.fleet.get(action["of"])
                if not original:
                    return {**result, "skipped": "the note never reached the fleet"}
                hsession, text = original["hsession"], "retracted: " + self._journal_text(action.get("text"))
            else:
                hsession = self._session_for_writes(ws, item["session"])
                text = self._journal_text(action.get("text"), item["edit"])
            pieces = chunks(text, MAX_MESSAGE_CHARS)
            agent = self.honcho.agent
            messages = [
                {
                    "peer_id": agent,
                    "content": piece,
                    "metadata": qualified(
                        {
                            "bxmem_item": item["item"],
                            "part": n,
                            "parts": len(pieces),
                            "role": do,
                            "bx_session": item["session"],
                        },
                        piece,
                        agent,
                    ),
                }
                for n, piece in enumerate(pieces)
            ]
            return {
                **result,
                "hsession": hsession,
                "ids": self._ensure_messages(ws, hsession, item["item"], messages, in_doubt),
            }
        if do in ("card", "retract-card"):
            return self._card(item, index, action, in_doubt)
        raise LocalFailure(f"unknown action {do!r}")

    def _card(self, item: dict, index: int, action: dict, in_doubt: bool) -> dict:
        """An artifact card, or its retraction: a message from the agent's peer (never
        the owner's), its text the projection decided at record time, read back checked."""
        from bxmem.commands.send.cards import card_text, retraction_text  # deferred: command

        do, ws, result = action["do"], item["ws"], {"i": index, "do": action["do"]}
        if do == "retract-card":
            original = self.box.fleet.get(action["of"])
            if not original:
                return {**result, "skipped": "the card never reached Honcho"}
            hsession, text = original["hsession"], retraction_text(item)
        else:
            hsession, text = self._session_for_writes(ws, item["session"]), card_text(self.config, item, action)
        agent = self.honcho.agent
        meta = {
            "bxmem_item": item["item"],
            "part": 0,
            "parts": 1,
            "role": do,
            "bx_session": item["session"],
            "experiment": item["experiment"],
            "artifact": item["artifact"],
        }
        messages = [{"peer_id": agent, "content": text, "metadata": qualified(meta, text, agent)}]
        return {
            **result,
            "hsession": hsession,
            "ids": self._ensure_messages(ws, hsession, item["item"], messages, in_doubt),
        }

    def _ensure_messages(self, ws: str, hsession: str, key: str, messages: list[dict], in_doubt: bool) -> list[str]:
        present: dict[int, str] = {}
        if in_doubt:
            # The fleet is shared: another agent's note can carry the same journal id in the
            # same session. Only this agent's peer is asked for, and only ours is taken.
            agent = self.honcho.agent
            filters = {"metadata": {"bxmem_item": key}, "peer_id": agent}
            try:
                present = present_parts(self.client(ws).list_messages(hsession, filters), messages, agent)
            except Missing:
                pass
        missing = [m for m in messages if m["metadata"]["part"] not in present]
        if missing:
            return merge_ids(present, missing, self.client(ws).add_messages(hsession, missing))
        return [present[m["metadata"]["part"]] for m in messages]


def merge_ids(present: dict[int, str], sent_now: list[dict], new_ids: list[str]) -> list[str]:
    merged = dict(present)
    for message, message_id in zip(sent_now, new_ids, strict=True):  # one id per message (add_messages checks)
        merged[message["metadata"]["part"]] = message_id
    return [merged[k] for k in sorted(merged)]


def session_id_ok(value: str) -> bool:
    return session_id_problem(value) is None
