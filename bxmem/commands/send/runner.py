"""`send`'s runner: everything with an effect, the ledger writes and the HTTP clients, for what plan.py chooses."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from bxmem.commands.send.edits import EditActions, merge_ids
from bxmem.commands.send.keys import WorkspaceKeys
from bxmem.commands.send.lookup import present_parts
from bxmem.commands.send.messages import Messages
from bxmem.commands.send.outcomes import Outcomes
from bxmem.commands.send.plan import (
    Group,
    LocalFailure,
    Planner,
    Tally,
    Unit,
    checked_against,
    missing_peers,
    opening,
    sendable,
)
from bxmem.commands.send.report import announce, note_state
from bxmem.commands.send.threaded_calls import Call, Lane
from bxmem.config.loader import Config
from bxmem.formats.timestamps import format_time
from bxmem.honcho.api import (
    BadAnswer,
    BadId,
    KeyRefused,
    Missing,
    Refused,
    Unavailable,
    configuration_applied,
    configuration_for,
    monotonic,
    settle_wait_s,
)
from bxmem.honcho.client import WorkspaceClient
from bxmem.log import log
from bxmem.store import ledger_events
from bxmem.store.ledger import Ledger, LedgerChanged
from bxmem.store.local_key import load as load_key
from bxmem.store.outbox import Outbox
from bxmem.store.workspace_roles import other_role, set_up_for
from bxmem.trust.send_retry import ALONE, Hold, next_try
from bxmem.trust.write_policy import Holds, writable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from bxmem.store.ledger_events import Attempt

# A run's work ends by RUN_DEADLINE_S, well under the unit's TimeoutStartSec (300 s).
RUN_BUDGET_S = 120.0
RUN_DEADLINE_S = 150.0


def _open_session(client: WorkspaceClient, calls: list[tuple]) -> None:
    for call, *args in calls:
        getattr(client, call)(*args)


class Sender:
    def __init__(
        self,
        config: Config,
        box: Outbox,
        ledger: Ledger,
        report: Tally,
        clock=None,
        rng: random.Random | None = None,
        try_now: bool = False,
    ) -> None:
        assert config.honcho is not None
        self.config = config
        self.honcho = config.honcho
        self.box = box
        self.ledger = ledger
        self.report = report
        self.clock = clock or (lambda: time.time())  # looked up per call, so a frozen clock applies
        self.hold = Hold(box.attempts, 0.0, settle_wait_s())  # what waits in doubt: the idle summary reads it too
        self.now = checked_against(config, box)  # what items are held to, as the run starts
        self.roles = self.now.roles
        self.holds = Holds()  # held by the configuration (trust/write_policy.py); job.run reads it too
        self.clients: dict[str, WorkspaceClient] = {}
        self.second_clients: dict[str, WorkspaceClient] = {}  # open sessions ahead (Group.ahead)
        self._poster, self._opener = Lane(), Lane()
        self._background: list[Call] = []
        self._held: list[Mapping[str, object]] = []  # ledger lines that may wait for the next append
        self.keys = WorkspaceKeys(config, box, report, self.record)  # read once a run
        self.outcomes = Outcomes(
            box, report, self.honcho.url, self.clock, rng or random.Random(), self.record, self.keys.versions
        )
        self.try_now = try_now  # send --now: the outage backoff is not waited for (the in-doubt wait always is)
        self._decision = lambda key: box.decision(ledger, key)  # checked to be the line folded (Outbox.decision)
        self.messages = Messages(
            self._decision,
            config.paths.logs,
            self.honcho.agent,
            self.honcho.owner,
            load_key(config.paths.state, create=False),
        )
        self.edits = EditActions(
            config,
            box,
            report,
            record=self.record,
            client=self.client,
            attempt=self._attempt,
            fail=self.outcomes.fail,
            succeeded=self.outcomes.succeeded,
        )
        self.planner: Planner | None = None
        self._ends_by: float | None = None  # api.monotonic() by which every request ends (run)

    # --- plumbing -------------------------------------------------------------------

    def record(self, events: Sequence[Mapping[str, object]], *, durable: bool = True) -> None:
        """Append to the ledger, then fold the new lines into the outbox. `durable=False` holds the lines back until
        the next append, so a group costs one fsync: only `sent` and `created` lines, whose loss is harmless
        (docs/design.md, "Sending")."""
        if not durable:
            self._held.extend(events)
            return
        self.ledger.append([*self._held, *events])
        self._held = []
        self.box.catch_up(self.ledger)

    def _attempt(
        self,
        *,
        items: list[str],
        ws: str,
        role: str,
        session: str | None,
        hsession: str | None = None,
        parts: dict[str, int] | None = None,
    ) -> Attempt:
        """An attempt line, timed by the run's clock: its in-doubt wait counts from it."""
        return ledger_events.attempt(
            format_time(self.clock()), items=items, ws=ws, role=role, session=session, hsession=hsession, parts=parts
        )

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
        if not writable(ws, self.roles):  # every write of a run goes through here: a last line of defence
            raise RuntimeError(f"bxmem does not write to {ws}: it is not one of this agent's write workspaces")
        if other_role(self.box.roles, ws, self.roles[ws]) is not None:
            raise RuntimeError(f"bxmem does not write to {ws}: this agent wrote it as another role before")
        return WorkspaceClient(
            self.honcho.url, ws, self.keys.get(ws), ends_by=self._ends_by
        )  # key: commands/send/keys.py

    def close(self) -> None:
        # A call still in flight when a run stops is abandoned, not waited for
        # (its thread is a daemon): its lane closes its client once it is done.
        busy = {id(call.client) for call in self._background if call.busy}
        for lane, clients in ((self._poster, self.clients), (self._opener, self.second_clients)):
            lane.close(then_close=[c for c in clients.values() if id(c) in busy])
            for client in clients.values():
                if id(client) not in busy:
                    client.close()
        self.messages.close()
        self.ledger.close()

    # --- the run --------------------------------------------------------------------

    def run(self) -> Tally:
        try:
            self._run()
        except LedgerChanged as exc:  # found before that item was sent: fold again, the next run sends
            self.flush()
            self.box.refold(self.ledger, f"no longer holds what the outbox folded ({exc})")
            self.report.refolded = True
            self.holds = sendable(self.box, self.now, self._decision)[1]
        self.note_state()
        return self.report

    def _run(self) -> None:
        now = self.clock()
        self.keys.resume_refreshed()
        queue, self.holds = sendable(self.box, self.now, self._decision)
        self.outcomes.end_stale_backoff()
        until = next_try(self.box.backoff, now)
        if until is not None and not self.try_now:
            self.report.waiting_until = until
        else:
            self.keys.read()
            self._ends_by = monotonic() + RUN_DEADLINE_S
            self.hold = Hold(self.box.attempts, now, settle_wait_s())
            self.planner = Planner(
                self.box,
                queue,
                self.config.send.batch,
                self.hold,
                self.honcho.agent,
                self.messages.of,
                self.outcomes.fail_here,
            )
            try:
                self._drain()
            finally:
                # Let the run's view of the outbox go before the checkpoint is saved:
                # marshal tracks every object referenced twice, and the queue would
                # make each pending item's key one (10 MiB at 100,000 items).
                self.planner = None
                self.flush()
            self.report.held = len(self.hold.items)

    def note_state(self) -> None:
        """What holds the outbox up now, whatever this run did, into the report; each
        lasting state said once to the journal (report.announce)."""
        now = self.clock()
        note_state(self.report, self.box, self.holds, self._decision, now)
        announce(self.box.announced, self.report, now)

    def _drain(self) -> None:
        planner = self.planner
        assert planner is not None
        started = time.monotonic()
        upcoming: Unit | None = None
        while True:
            if time.monotonic() - started > RUN_BUDGET_S:
                log.info(f"run budget of {RUN_BUDGET_S:g} s spent; the rest waits for the next run")
                return
            unit, upcoming = upcoming or planner.next_unit(), None
            if unit is None:
                return
            if unit.ws in self.box.stopped:
                continue
            items = unit.group.items if unit.group else [unit.item]
            # An item whose earlier attempt is unresolved stays in doubt whatever this run meets.
            doubtful = unit.group is None and unit.item["item"] in self.box.attempts
            try:
                self._ensure_workspace(unit.ws)
                if unit.group is None:
                    item = self.messages.full(unit.item)
                    self.edits.send(item) if item.get("kind") in ALONE else self._settle(item)
                    continue
                self._open(unit.group)
                # While this group's messages are posted, plan the next group and
                # open its session on the second connection. The lambda runs inside
                # _send_group, before the loop moves on: late binding cannot bite.
                planned: list[Unit | None] = []
                try:
                    ahead = lambda: planned.append(self._plan_ahead(planner, unit.group))  # noqa: B023, E731
                    self._send_group(unit.group, meanwhile=ahead)
                finally:
                    upcoming = planned[0] if planned else None
            except KeyRefused as exc:
                self.keys.stop(unit.ws, exc.status)
            except Unavailable as exc:
                self.outcomes.outage(exc)
                for client in self.clients.values():
                    client.close()
                return
            except Missing as exc:
                if unit.group is None or exc.no_route:
                    self.outcomes.fail(items, exc.status, f"{exc.operation} refused", in_doubt=doubtful)
                else:
                    self.outcomes.session_gone(unit.group)
            except BadAnswer as exc:
                # Not a crash, and not an outage: a server that answers this way answers so
                # again. The item is refused, named; in doubt if Honcho may hold what it sent.
                self.outcomes.fail(items, None, f"{exc.operation}: {exc.kind}", in_doubt=exc.maybe_stored or doubtful)
            except Refused as exc:
                # A group's refusals that reach here (its peers, its session) hold for
                # every item in it; posting refusals were sorted out item by item.
                why = f"{exc.operation}: {exc.kind}" if isinstance(exc, BadId) else f"{exc.operation} refused"
                self.outcomes.fail(items, exc.status, why, in_doubt=doubtful)

    def _plan_ahead(self, planner: Planner, current: Group) -> Unit | None:
        unit, opens = planner.plan_ahead(current)
        if opens and unit is not None and unit.group is not None:
            group = unit.group
            client = self._second_client(group.ws)
            calls = opening(group, missing_peers(self.box, group), self.honcho.agent)
            group.ahead = self._opener.submit(client, _open_session, client, calls)
            self._background.append(group.ahead)
        return unit

    # --- workspace, sessions, turns ---------------------------------------------------------

    def _ensure_workspace(self, ws: str) -> None:
        """Set up `ws` for its role now, unless the ledger says it was (workspace_roles.set_up_for)."""
        role = self.roles[ws]  # the planner hands out only this agent's write workspaces (sendable)
        if set_up_for(self.box.roles, ws, role):
            return
        wanted = configuration_for(role)
        client = self.client(ws)
        stored = client.read_configuration(if_exists=client.set_configuration(wanted))
        if not configuration_applied(wanted, stored):
            raise Refused(ws, "set workspace configuration", "the configuration read back differs")
        events = [ledger_events.created_workspace(ws, wanted, role)]
        known = self.box.workspace(ws)["peers"]
        for peer, observed in ((self.honcho.agent, False), (self.honcho.owner, True)):
            if peer not in known:
                client.create_peer(peer, observed)
                events.append(ledger_events.created_peer(ws, peer, observed))
        self.record(events)
        self.outcomes.succeeded()

    def _open(self, group: Group) -> None:
        if not group.new_session:
            return
        missing = missing_peers(self.box, group)
        if group.ahead is not None:
            group.ahead.wait()  # raises what the second connection met
        else:
            _open_session(self.client(group.ws), opening(group, missing, self.honcho.agent))
        events = [ledger_events.created_peer(group.ws, peer, peer != self.honcho.agent) for peer in missing]
        events.append(ledger_events.created_session(group.ws, group.hsession, group.session, group.n, group.peers))
        self.record(events, durable=False)  # written with the attempt that follows

    def _send_group(self, group: Group, meanwhile=None) -> None:
        try:
            self._post(group.ws, group.hsession, group.items, group.messages, meanwhile=meanwhile)
        except Refused as exc:
            # An unusable answer to the POST may have come with the messages stored: never
            # sent again one by one. A bad id is every item's, as is a refused key, or a
            # session Honcho does not have.
            if len(group.items) == 1 or isinstance(exc, (KeyRefused, BadAnswer, BadId, Missing)):
                raise
            # A 4xx stores nothing: send the items one by one to find the one refused.
            for item in group.items:
                try:
                    self._post(group.ws, group.hsession, [item], {item["item"]: group.messages[item["item"]]})
                except KeyRefused:
                    raise
                except BadAnswer as bad:
                    self.outcomes.fail([item], None, f"{bad.operation}: {bad.kind}", in_doubt=bad.maybe_stored)
                except Refused as one:
                    self.outcomes.fail([item], one.status, f"{one.operation} refused")
        finally:
            for item in group.items:  # built for this group only: let them go
                self.messages.forget(item["item"])

    def _post(
        self,
        ws: str,
        hsession: str,
        items: list[dict],
        messages: dict[str, list[dict]],
        known_ids: dict | None = None,
        meanwhile=None,
    ) -> None:
        """Record the attempt, POST the messages, record `sent` with Honcho's ids.
        `meanwhile` runs on this thread while the POST is in flight."""
        flat = [m for i in items for m in messages[i["item"]]]
        keys = [i["item"] for i in items]
        role = items[0]["role"]  # one workspace, one role: the items were held to it (sendable)
        self.record(
            [
                self._attempt(
                    items=keys,
                    ws=ws,
                    role=role,
                    session=items[0]["session"],
                    hsession=hsession,
                    parts={i["item"]: len(messages[i["item"]]) for i in items},
                )
            ]
        )
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
                self.record([ledger_events.unsent(keys, ws, exc.kind)])
            raise
        except KeyRefused as exc:
            # Refused before anything was stored (401/403): nothing to look up, so nothing
            # waits in doubt once the key is fixed. A settling post keeps its lookup.
            if known_ids is None:
                self.record([ledger_events.unsent(keys, ws, f"key refused (HTTP {exc.status})")])
            raise
        self.outcomes.succeeded()
        sent, cursor = [], 0
        for item in items:
            mine = ids[cursor : cursor + len(messages[item["item"]])]
            cursor += len(mine)
            if known_ids and item["item"] in known_ids:
                mine = merge_ids(known_ids[item["item"]], messages[item["item"]], mine)
            sent.append(ledger_events.sent_turn(item["item"], ws, role, hsession, mine))
        self.record(sent, durable=False)
        self.report.sent += len(items)
        self.report.messages += len(flat)

    def _settle(self, item: dict) -> None:
        """An item whose earlier attempt has no outcome: find what Honcho has, send the rest."""
        attempt = self.box.attempts[item["item"]]
        hsession = attempt["hsession"]
        try:
            messages = self.messages.of(item)
        except LocalFailure as exc:
            self.outcomes.fail([item], None, str(exc))
            return
        found: list = []
        # An item seen sent before the ledger was restored may be in any of its session's (Outbox.inherit).
        for name in attempt.get("hsessions") or [hsession]:
            try:
                found += self.client(item["ws"]).list_messages(name, {"metadata": {"bxmem_item": item["item"]}})
            except Missing:
                pass
        present = present_parts(found, messages, self.honcho.agent)  # ours only: peer, agent and text too
        self.outcomes.succeeded()
        missing = [m for m in messages if m["metadata"]["part"] not in present]
        if not missing:
            ids = [present[m["metadata"]["part"]] for m in messages]
            self.record([ledger_events.sent_turn(item["item"], item["ws"], item["role"], hsession, ids, settled=True)])
            self.report.sent += 1
            log.info(f"{item['item']} was already in Honcho (an earlier run's answer was lost); recorded as sent")
            return
        if present:
            log.info(f"{item['item']}: {len(present)} of {len(messages)} parts already in Honcho; sending the rest")
        self._post(item["ws"], hsession, [item], {item["item"]: missing}, known_ids={item["item"]: present})
