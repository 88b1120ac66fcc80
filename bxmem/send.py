"""`bxmem send`: one batch of the outbox to Honcho, oldest first, then exit.

At-least-once delivery with duplicate defence (seed 002 section 12.2):

* an item leaves the outbox only through a `sent` or `failed` line;
* before any POST that creates messages, an `attempt` line names the items
  and the Honcho session, so a crash or a lost answer leaves a trace;
* an item with an attempt and no `sent` is in doubt: once Honcho can no
  longer be working on that request (retry.py), its messages are looked up
  by their `bxmem_item` metadata and only the missing parts sent, while the
  later items of its session wait behind it.

A request Honcho stores later than that, after the lookup, is sent twice:
the window is narrow, not closed, and `bxmem audit` reports such a duplicate.

Every change of state is a ledger line folded back into the outbox, so the
checkpoint and the ledger cannot disagree.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .config import Config, key_fingerprint, read_key
from .honcho import (
    MAX_BATCH,
    MAX_MESSAGE_CHARS,
    KeyRefused,
    Missing,
    Refused,
    Unavailable,
    WorkspaceClient,
    configuration_applied,
    configuration_for,
)
from .lanes import Call, Lane
from .ledger import Ledger, event, now_iso
from .log import log, runbook
from .outbox import KIND, SESSION, WS, Outbox, light
from .retry import Hold, iso, next_backoff
from .sanitize import chunks, find_secret, neutralise
from .send_report import SendReport
from .send_edits import EditSender, LocalFailure, merge_ids
from .sources.loopd import SpanReader
from .jobrun import run_locked

# No new request starts after this long, so one run ends within
# RUN_BUDGET_S + connect + read timeouts (the unit's TimeoutStartSec is above that).
RUN_BUDGET_S = 120.0


@dataclass
class Group:
    ws: str
    session: str  # the Boxmaker session
    hsession: str  # the Honcho session
    n: int
    peers: list[str]
    new_session: bool
    items: list[dict]
    messages: dict[str, list[dict]]
    # Its peers and session being created on the workspace's second connection
    # while the group before it is posted. Those creates are idempotent and
    # recorded only once done, so one abandoned leaves a session Honcho holds
    # and the ledger does not, which the next run creates again, harmlessly.
    ahead: "Call | None" = None


@dataclass
class Unit:
    """One piece of a run's work: an edit or an in-doubt item (group None), or a group."""

    ws: str
    item: dict
    group: Group | None


def _open_session(client: WorkspaceClient, calls: list[tuple]) -> None:
    for call, *args in calls:
        getattr(client, call)(*args)


class Sender(EditSender):
    def __init__(self, config: Config, box: Outbox, ledger: Ledger, clock=None, rng: random.Random | None = None) -> None:
        assert config.honcho is not None
        self.config = config
        self.honcho = config.honcho
        self.box = box
        self.ledger = ledger
        self.clock = clock or (lambda: time.time())  # looked up per call, so a frozen clock applies
        self.rng = rng or random.Random()  # the backoff's jitter
        self._hold = Hold(box.attempts, 0.0)
        self.clients: dict[str, WorkspaceClient] = {}
        self.second_clients: dict[str, WorkspaceClient] = {}  # open sessions ahead (Group.ahead)
        self._poster, self._opener = Lane(), Lane()
        self._background: list[Call] = []
        self._held: list[dict] = []  # ledger lines that may wait for the next append
        self._spans = SpanReader()
        self.report = SendReport()
        self._messages: dict[str, list[dict]] = {}
        self._events: dict[str, dict] = {}

    # --- plumbing -------------------------------------------------------------------

    def record(self, events: list[dict], *, durable: bool = True) -> None:
        """Append to the ledger, then fold the ledger's new lines into the outbox.

        `durable=False` holds the lines back until the next append (at the latest
        the end of the run), so a group costs one fsync, not three. Only lines
        whose loss is harmless are held: `sent` (its attempt line is on disk, so
        a crash costs a lookup in Honcho, never a duplicate) and `created` (the
        attempt that follows at once writes it; lost, the next run creates the
        same thing again, which Honcho answers with the existing one)."""
        if not durable:
            self._held.extend(events)
            return
        self.ledger.append(self._held + events)
        self._held = []
        self.box.catch_up(self.ledger)

    def _attempt(self, **fields: object) -> dict:
        """An attempt line, timed by the run's clock: its in-doubt wait counts from it."""
        return event("attempt", ts=iso(self.clock()), **fields)

    def flush(self) -> None:
        if self._held:
            self.record([])

    def client(self, ws: str) -> WorkspaceClient:
        if ws not in self.clients:
            self.clients[ws] = self._new_client(ws)
        return self.clients[ws]

    def _second_client(self, ws: str) -> WorkspaceClient:
        if ws not in self.second_clients:
            self.second_clients[ws] = self._new_client(ws)
        return self.second_clients[ws]

    def _new_client(self, ws: str) -> WorkspaceClient:
        workspace = self.config.workspace_by_name(ws)
        key = read_key(workspace) if workspace else None
        return WorkspaceClient(self.honcho.url, ws, key)

    def close(self) -> None:
        # A call still in flight when a run stops is abandoned, not waited for
        # (its thread is a daemon): its lane closes its client once it is done.
        busy = {id(call.client) for call in self._background if call.busy}
        for lane, clients in ((self._poster, self.clients), (self._opener, self.second_clients)):
            lane.close(then_close=[c for c in clients.values() if id(c) in busy])
            for client in clients.values():
                if id(client) not in busy:
                    client.close()
        self._spans.close()
        self.ledger.close()

    # --- the run --------------------------------------------------------------------

    def run(self) -> SendReport:
        now = self.clock()
        self._resume_refreshed_keys()
        backoff = self.box.backoff
        if backoff and now < backoff["until"]:
            self.report.waiting_until = backoff["until"]
            return self.report
        self._hold = Hold(self.box.attempts, now)
        try:
            self._drain(self._sendable())
        finally:
            # Let the run's view of the outbox go before the checkpoint is saved:
            # marshal tracks every object referenced twice, and the queue would
            # make each pending item's key one (10 MiB at 100,000 items).
            self._queue, self._by_session, self._done = [], {}, set()
            self.flush()
        self.report.pending = len(self.box.pending)
        self.report.held, self.report.settle_at = len(self._hold.items), self._hold.until
        return self.report

    def _drain(self, sendable: list[str]) -> None:
        # A group pulls the later turns of its own Honcho session from the whole
        # outbox: decide interleaves sessions, so a window of `batch` items
        # would hold one turn of each and cost a request per turn. Items are
        # kept as their keys and made into dicts only when planned: a large
        # outbox would otherwise cost a dict per pending item.
        self._queue, self._next = sendable, 0
        self._by_session: dict[tuple[str, str], list[str]] = {}
        for key in sendable:
            record = self.box.pending[key]
            if record[KIND] != "edit":
                self._by_session.setdefault((record[WS], record[SESSION]), []).append(key)
        self._done: set[str] = set()
        self._handled = 0
        started = time.monotonic()
        upcoming: Unit | None = None
        while True:
            if time.monotonic() - started > RUN_BUDGET_S:
                log.info(f"run budget of {RUN_BUDGET_S:g} s spent; the rest waits for the next run")
                return
            unit, upcoming = upcoming or self._next_unit(), None
            if unit is None:
                return
            if unit.ws in self.box.stopped:
                continue
            try:
                self._ensure_workspace(unit.ws)
                if unit.group is None:
                    self._send_edit(unit.item) if unit.item.get("kind") == "edit" else self._settle(unit.item)
                    continue
                self._open(unit.group)
                # While this group's messages are posted, plan the next group and
                # open its session on the second connection.
                planned: list[Unit | None] = []
                try:
                    self._send_group(unit.group, meanwhile=lambda: planned.append(self._plan_ahead(unit.group)))
                finally:
                    upcoming = planned[0] if planned else None
            except KeyRefused as exc:
                self._stop_workspace(unit.ws, exc)
            except Unavailable as exc:
                self._outage(exc)
                return
            except Refused as exc:
                # A group's refusals that reach here (its peers, its session) hold for
                # every item in it; posting refusals were sorted out item by item.
                self._fail(unit.group.items if unit.group else [unit.item], exc.status, f"{exc.operation} refused")

    def _next_unit(self) -> Unit | None:
        """The next piece of work in outbox order: an edit, an in-doubt turn to settle,
        or a group of turns for one Honcho session; None when the batch is full or done."""
        while self._next < len(self._queue):
            room = self.config.send.batch - self._handled
            if room <= 0:
                return None
            key = self._queue[self._next]
            self._next += 1
            item = None if key in self._done else self._pending(key)
            if item is None or item["ws"] in self.box.stopped or self._hold.waits(item):
                continue
            if item.get("kind") == "edit" or item["item"] in self.box.attempts:
                self._done.add(item["item"])
                self._handled += 1
                return Unit(item["ws"], self._full(item), None)
            group = self._plan(item, self._by_session[(item["ws"], item["session"])], self._done, room)
            if group is None:
                self._handled += 1
                continue
            self._done.update(i["item"] for i in group.items)
            self._handled += len(group.items)
            return Unit(item["ws"], item, group)
        return None

    def _peek(self) -> dict | None:
        for at in range(self._next, len(self._queue)):
            key = self._queue[at]
            item = None if key in self._done else self._pending(key)
            if item is not None and item["ws"] not in self.box.stopped and not self._hold.waits(item):
                return item
        return None

    def _pending(self, key: str) -> dict | None:
        """The item as a small dict, or None once it has left the outbox."""
        record = self.box.pending.get(key)
        return None if record is None else light(key, record)

    def _plan_ahead(self, current: Group) -> Unit | None:
        """The next unit, planned while `current` is being posted (its attempt and
        created lines are written by then), with its new session being opened on
        the workspace's second connection. Only a group of another Boxmaker
        session, in a workspace already set up, is planned early: an edit may
        create sessions, and the next group of the same session depends on what
        `current` leaves behind."""
        following = self._peek()
        if (
            following is None
            or following.get("kind") == "edit"
            or following["item"] in self.box.attempts
            or (following["ws"], following["session"]) == (current.ws, current.session)
            or not self.box.workspace(following["ws"])["configured"]
        ):
            return None
        unit = self._next_unit()  # `following` itself, unless it fails locally: then whatever comes next
        group = unit.group if unit is not None else None
        if (
            group is not None
            and group.new_session
            and self.box.workspace(group.ws)["configured"]  # nothing is created before its configuration
            and (group.ws, group.session) != (current.ws, current.session)
        ):
            missing = self._missing_peers(group)
            client = self._second_client(group.ws)
            group.ahead = self._opener.submit(client, _open_session, client, self._opening(group, missing))
            self._background.append(group.ahead)
        return unit

    def _sendable(self) -> list[str]:
        """Pending items in outbox order, but those of a stopped workspace or of
        one no longer configured (they wait; bxmem sync shows them)."""
        usable = {ws.name for ws in self.config.workspaces()} - set(self.box.stopped)
        return [key for key, record in self.box.pending.items() if record[WS] in usable]

    def _full(self, item: dict) -> dict:
        """The item's whole decision, read back from the ledger by its offset."""
        if "log" in item or "actions" in item:
            return item
        if item["item"] not in self._events:
            self._events[item["item"]] = self.ledger.event_at(item["offset"])
        return self._events[item["item"]]

    def _succeeded(self) -> None:
        if self.box.backoff:
            log.info(f"Honcho at {self.honcho.url} answers again (unreachable since {self.box.backoff['since']})")
            self.box.backoff = None

    def _outage(self, exc: Unavailable) -> None:
        now = self.clock()
        self.report.outage = str(exc)
        first = self.box.backoff is None
        self.box.backoff = next_backoff(self.box.backoff, now, now_iso(), self.rng)
        wait = self.box.backoff["until"] - now
        if first:
            log.warning(
                f"Honcho unreachable at {self.honcho.url}: {exc}; {len(self.box.pending)} item(s) wait, "
                f"retrying in {wait:.0f} s, then less and less often" + runbook("honcho-unreachable")
            )
        else:
            log.debug(f"Honcho still unreachable: {exc}; next try in {wait:.0f} s")
        for client in self.clients.values():
            client.close()

    def _stop_workspace(self, ws: str, exc: KeyRefused) -> None:
        workspace = self.config.workspace_by_name(ws)
        secret = workspace.secret if workspace else "?"
        fingerprint = key_fingerprint(workspace.key_file) if workspace else None
        self.record([event("key_refused", ws=ws, status=exc.status, secret=secret, key=fingerprint)])
        self.report.stopped.append(ws)
        log.error(
            f"Honcho refused the key for workspace {ws} (HTTP {exc.status}); sends to {ws} stop until "
            f"secrets.{secret} changes, the other workspaces go on" + runbook("honcho-key-refused")
        )

    def _resume_refreshed_keys(self) -> None:
        for ws, refusal in list(self.box.stopped.items()):
            workspace = self.config.workspace_by_name(ws)
            current = key_fingerprint(workspace.key_file) if workspace else None
            if workspace is not None and current != refusal.get("key"):
                self.record([event("key_resumed", ws=ws, why="key file changed")])
                log.info(f"the key for workspace {ws} changed; resuming its sends")

    def _fail(self, items: list[dict], status: int | None, reason: str, results: list[dict] | None = None) -> None:
        extra = {"results": results} if results else {}
        self.record([event("failed", item=i["item"], ws=i["ws"], status=status, reason=reason, **extra) for i in items])
        self.report.failed += len(items)
        for i in items:
            code = f"HTTP {status}" if status else "refused here"
            log.warning(
                f"{i['item']} not sent to {i['ws']}: {code}, {reason}; marked failed" + runbook("honcho-send-refused")
            )

    # --- workspace, peers, sessions ------------------------------------------------------

    def _ensure_workspace(self, ws: str) -> None:
        state = self.box.workspace(ws)
        if state["configured"]:
            return
        workspace = self.config.workspace_by_name(ws)
        wanted = configuration_for(workspace.role)
        client = self.client(ws)
        stored = client.read_configuration(if_exists=client.set_configuration(wanted))
        if not configuration_applied(wanted, stored):
            raise Refused(ws, "set workspace configuration", "the configuration read back differs")
        events = [event("created", ws=ws, what="workspace", configuration=wanted)]
        for peer, observed in ((self.honcho.agent, False), (self.honcho.owner, True)):
            client.create_peer(peer, observed)
            events.append(event("created", ws=ws, what="peer", id=peer, observe_me=observed))
        self.record(events)
        self._succeeded()

    # --- turns --------------------------------------------------------------------

    def _messages_for(self, item: dict) -> list[dict]:
        """The item's messages, built the same way every time (duplicate defence relies on it)."""
        key = item["item"]
        if key in self._messages:
            return self._messages[key]
        item = self._full(item)
        log_path = self.config.paths.logs / item["log"]
        try:
            texts = [self._spans.text(log_path, span) for span in item["user"]]
            reply = self._spans.text(log_path, item["reply"])
        except (OSError, ValueError) as exc:
            raise LocalFailure(f"cannot read the turn back from {log_path}: {exc}") from None
        speaker_text = "\n".join(texts)
        rule = find_secret(speaker_text) or find_secret(reply)
        if rule:
            raise LocalFailure(f"holds a secret ({rule})")
        parts: list[tuple[str, str, str]] = []
        for role, peer, text in (("speaker", item["peer"], speaker_text), ("agent", self.honcho.agent, reply)):
            parts += [(role, peer, piece) for piece in chunks(neutralise(text), MAX_MESSAGE_CHARS)]
        if len(parts) > MAX_BATCH:
            raise LocalFailure(f"is {len(parts)} messages long, over the {MAX_BATCH} one request can carry")
        messages = []
        for index, (role, peer, content) in enumerate(parts):
            message = {
                "peer_id": peer,
                "content": content,
                "metadata": {
                    "bxmem_item": key,
                    "part": index,
                    "parts": len(parts),
                    "role": role,
                    "bx_session": item["session"],
                    "turn": item["turn"],
                },
            }
            if _valid_time(item.get("at")):
                message["created_at"] = item["at"]
            messages.append(message)
        self._messages[key] = messages
        return messages

    def _target(self, item: dict) -> tuple[str, int, list[str], bool]:
        """The Honcho session for the item: the current one, or the next (`-2`, `-3`, ...)
        when its speaker is not yet in the current one, holding every peer so far."""
        known = self.box.workspace(item["ws"])["sessions"].get(item["session"])
        if known and item["peer"] in known["peers"]:
            return known["name"], known["n"], known["peers"], False
        if known and known["peers"] == [self.honcho.agent]:
            # Made for a memory write before anyone spoke: no speaker's view is fixed
            # in it yet, so the first speaker joins it rather than starting the next.
            return known["name"], known["n"], sorted({self.honcho.agent, item["peer"]}), True
        n = known["n"] + 1 if known else 1
        name = item["session"] if n == 1 else f"{item['session']}-{n}"
        peers = sorted(set(known["peers"] if known else [self.honcho.agent]) | {item["peer"]})
        return name, n, peers, True

    def _plan(self, first: dict, session_keys: list[str], done: set[str], room: int) -> Group | None:
        try:
            messages = {first["item"]: self._messages_for(first)}
        except LocalFailure as exc:
            self._fail([first], None, str(exc))
            return None
        name, n, peers, new = self._target(first)
        group = Group(first["ws"], first["session"], name, n, peers, new, [first], messages)
        count = len(messages[first["item"]])
        for key in session_keys:
            if len(group.items) >= room:
                break
            other = None if key == first["item"] or key in done else self._pending(key)
            if other is None:
                continue
            # Keep the session's order: stop at the first item that cannot join.
            if other["item"] in self.box.attempts or other["peer"] not in peers:
                break
            try:
                more = self._messages_for(other)
            except LocalFailure as exc:
                self._fail([other], None, str(exc))
                done.add(other["item"])
                continue
            if count + len(more) > MAX_BATCH:
                break
            group.items.append(other)
            group.messages[other["item"]] = more
            count += len(more)
        return group

    def _missing_peers(self, group: Group) -> list[str]:
        known = self.box.workspace(group.ws)["peers"]
        return [peer for peer in group.peers if peer not in known]

    def _opening(self, group: Group, missing: list[str]) -> list[tuple]:
        """The requests that set up a group's new session: its unknown peers, then the session."""
        calls: list[tuple] = [("create_peer", peer, peer != self.honcho.agent) for peer in missing]
        calls.append((
            "create_session",
            group.hsession,
            {peer: peer != self.honcho.agent for peer in group.peers},
            {"bx_session": group.session, "source": "bxmem"},
        ))
        return calls

    def _open(self, group: Group) -> None:
        """Set up the group's new Honcho session (done ahead, or now) and record it."""
        if not group.new_session:
            return
        missing = self._missing_peers(group)
        if group.ahead is not None:
            group.ahead.wait()  # raises what the second connection met
        else:
            _open_session(self.client(group.ws), self._opening(group, missing))
        events = [event("created", ws=group.ws, what="peer", id=peer, observe_me=peer != self.honcho.agent) for peer in missing]
        events.append(event("created", ws=group.ws, what="session", id=group.hsession, session=group.session, n=group.n, peers=group.peers))
        self.record(events, durable=False)  # written with the attempt that follows

    def _send_group(self, group: Group, meanwhile=None) -> None:
        try:
            self._post(group.ws, group.hsession, group.items, group.messages, meanwhile=meanwhile)
        except Refused as exc:
            if len(group.items) == 1 or isinstance(exc, KeyRefused):
                raise
            # A 4xx stores nothing: send the items one by one to find the one refused.
            for item in group.items:
                try:
                    self._post(group.ws, group.hsession, [item], {item["item"]: group.messages[item["item"]]})
                except KeyRefused:
                    raise
                except Refused as one:
                    self._fail([item], one.status, f"{one.operation} refused")
        finally:
            for item in group.items:  # built for this group only: let them go
                self._messages.pop(item["item"], None)
                self._events.pop(item["item"], None)

    def _post(self, ws: str, hsession: str, items: list[dict], messages: dict[str, list[dict]],
              known_ids: dict | None = None, meanwhile=None) -> None:
        """Record the attempt, POST the messages, record `sent` with Honcho's ids.
        `meanwhile` runs on this thread while the POST is in flight."""
        flat = [m for i in items for m in messages[i["item"]]]
        keys = [i["item"] for i in items]
        self.record([self._attempt(items=keys, ws=ws, session=items[0]["session"], hsession=hsession,
                                   parts={i["item"]: len(messages[i["item"]]) for i in items})])
        self.report.requests += 1
        client = self.client(ws)
        try:
            if meanwhile is None:
                ids = client.add_messages(hsession, flat)
            else:
                call = self._poster.submit(client, client.add_messages, hsession, flat)
                self._background.append(call)
                try:
                    meanwhile()
                finally:
                    ids = call.wait()
        except Unavailable as exc:
            # Never connected: nothing reached Honcho, so no lookup is owed. Not for
            # a settling post: what the lookup found is not written down anywhere.
            if exc.unsent and known_ids is None:
                self.record([event("unsent", items=keys, ws=ws, reason=exc.kind)])
            raise
        self._succeeded()
        sent, cursor = [], 0
        for item in items:
            mine = ids[cursor : cursor + len(messages[item["item"]])]
            cursor += len(mine)
            if known_ids and item["item"] in known_ids:
                mine = merge_ids(known_ids[item["item"]], messages[item["item"]], mine)
            sent.append(event("sent", item=item["item"], ws=ws, hsession=hsession, ids=mine))
        self.record(sent, durable=False)
        self.report.sent += len(items)
        self.report.messages += len(flat)

    def _settle(self, item: dict) -> None:
        """An item whose earlier attempt has no outcome: find what Honcho has, send the rest."""
        attempt = self.box.attempts[item["item"]]
        hsession = attempt["hsession"]
        try:
            messages = self._messages_for(item)
        except LocalFailure as exc:
            self._fail([item], None, str(exc))
            return
        try:
            found = list(self.client(item["ws"]).list_messages(hsession, {"metadata": {"bxmem_item": item["item"]}}))
        except Missing:
            found = []
        present: dict[int, str] = {}
        for message in found:
            meta = message.get("metadata") or {}
            if meta.get("bxmem_item") == item["item"] and isinstance(meta.get("part"), int):
                present.setdefault(meta["part"], message.get("id", ""))
        self._succeeded()
        missing = [m for m in messages if m["metadata"]["part"] not in present]
        if not missing:
            ids = [present[m["metadata"]["part"]] for m in messages]
            self.record([event("sent", item=item["item"], ws=item["ws"], hsession=hsession, ids=ids, settled=True)])
            self.report.sent += 1
            log.info(f"{item['item']} was already in Honcho (an earlier run's answer was lost); recorded as sent")
            return
        if present:
            log.info(f"{item['item']}: {len(present)} of {len(messages)} parts already in Honcho; sending the rest")
        self._post(item["ws"], hsession, [item], {item["item"]: missing}, known_ids={item["item"]: present})


def _valid_time(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def run(config: Config, clock=None, rng: random.Random | None = None) -> SendReport:
    if config.local_only:
        return SendReport(local_only=True)
    for workspace in config.workspaces():
        read_key(workspace)  # an unreadable or exposed key stops the job at start, with the reason
    senders: list[Sender] = []

    def load(state_dir: Path, ledger: Ledger) -> Outbox:
        return Outbox.load(state_dir, ledger)  # the outbox is send's state, recovered from the ledger

    def work(box: Outbox, ledger: Ledger) -> None:
        senders.append(Sender(config, box, ledger, clock, rng))
        try:
            senders[0].run()
        finally:
            senders[0].close()

    def save(state_dir: Path, box: Outbox) -> None:
        box.save(state_dir)
        write_idle_summary(config, box, state_dir, senders[0]._hold if senders else None)

    busy = run_locked(config, "send", SendReport(), load, work, save, save_on_error=True, refresh_index=False)
    return busy if busy.busy else senders[0].report


def write_idle_summary(config: Config, box: Outbox, state_dir: Path, hold: Hold | None = None) -> None:
    """What the next run's fast path compares to decide there is nothing to do."""
    from .fastpath import stat_fingerprint, write_summary

    held = hold.items if hold else set()
    sendable = any(
        item["ws"] not in box.stopped and config.workspace_by_name(item["ws"]) is not None and item["item"] not in held
        for item in box.pending_items()
    )
    # Items that only wait behind an in-doubt one wake the job when it may be looked up.
    wake_at = box.backoff["until"] if box.backoff else (0.0 if sendable else (hold.until if hold else None))
    ledger_version = [box.ino, box.offset] if box.ino is not None else None  # None: no ledger yet
    watch: dict[str, tuple[str, object]] = {str(config.paths.ledger): ("size", ledger_version)}
    for workspace in config.workspaces():
        if workspace.key_file:
            refusal = box.stopped.get(workspace.name)
            # A stopped workspace wakes when its key differs from the refused one.
            version = refusal.get("key") if refusal else stat_fingerprint(workspace.key_file)
            watch[str(workspace.key_file)] = ("stat", version)
    write_summary(state_dir, "send", config, watch, wake_at)
