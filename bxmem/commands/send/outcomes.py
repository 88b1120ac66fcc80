"""What `send` does with each outcome of a request: a ledger line each, folded into the outbox, and a
lasting state said to the journal once, when it starts.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence

from bxmem.commands.send.plan import Group, Tally, session_gone_reason
from bxmem.honcho.api import Redirected, Unavailable
from bxmem.log import log, notice, runbook
from bxmem.store import ledger_events
from bxmem.store.ledger import now_iso
from bxmem.store.outbox import Outbox
from bxmem.trust.send_retry import next_backoff


class Outcomes:
    def __init__(
        self,
        box: Outbox,
        report: Tally,
        url: str,
        clock: Callable[[], float],
        rng: random.Random,
        record: Callable[[Sequence[Mapping[str, object]]], None],
        keys: Callable[[], dict],
    ) -> None:
        self.box, self.report, self.url, self.clock, self.rng = box, report, url, clock, rng
        self.keys = keys  # each write workspace's key file version (WorkspaceKeys.versions)
        self.record = record  # Sender.record: ledger lines, folded into the outbox

    def succeeded(self) -> None:
        if self.box.backoff:
            notice(f"Honcho at {self.url} answers again (unreachable since {self.box.backoff['since']})")
            self.box.backoff = None

    def end_stale_backoff(self) -> None:
        """An outage met under another [honcho] url or another key file says nothing of
        this one: try at once (the owner fixed what was wrong, or moved the server)."""
        backoff = self.box.backoff
        if not backoff:
            return
        why = (
            "[honcho] url changed"
            if backoff.get("url", self.url) != self.url
            else "a key file changed"
            if backoff.get("keys", self.keys()) != self.keys()
            else None
        )
        if why:
            notice(f"{why} since Honcho was last unreachable (since {backoff.get('since')}): trying it now")
            self.box.backoff = None

    def outage(self, exc: Unavailable) -> None:
        now = self.clock()
        self.report.outage = str(exc)
        first = self.box.backoff is None
        # With what it was met under: a new [honcho] url or key file ends the backoff (Sender.run).
        self.box.backoff = {
            **next_backoff(self.box.backoff, now, now_iso(), self.rng),
            "error": str(exc),
            "url": self.url,
            "keys": self.keys(),
        }
        wait = self.box.backoff["until"] - now
        if not first:
            log.debug(f"Honcho still unreachable: {exc}; next try in {wait:.0f} s")
            return
        self.report.said.add(("outage",))
        # A redirect is no outage of the server, but it is not an answer either: nothing is
        # failed, and the owner is told what to check (a wrong URL, or a server sending bxmem elsewhere).
        what = (
            f"Honcho at {self.url} answered with a redirect, which bxmem does not follow (check [honcho] url)"
            if isinstance(exc, Redirected)
            else f"Honcho unreachable at {self.url}"
        )
        log.warning(
            f"{what}: {exc}; {len(self.box.pending)} item(s) wait, "
            f"retrying in {wait:.0f} s, then less and less often" + runbook("honcho-unreachable")
        )

    def fail(
        self,
        items: list[dict],
        status: int | None,
        reason: str,
        results: list[dict] | None = None,
        *,
        in_doubt: bool = False,
        level: int = logging.WARNING,
    ) -> None:
        """`in_doubt`: Honcho may hold what the item's attempt sent, so a requeue looks first."""
        self.record(
            [ledger_events.failed(i["item"], i["ws"], status, reason, results, in_doubt=in_doubt) for i in items]
        )
        self.report.failed += len(items)
        for i in items:
            code = f"HTTP {status}" if status else "refused here"
            doubt = "; Honcho may hold it: a retry looks it up before sending anything" if in_doubt else ""
            log.log(
                level,
                f"{i['item']} not sent to {i['ws']}: {code}, {reason}; marked failed{doubt}"
                + runbook("honcho-send-refused"),
            )

    def fail_here(self, item: dict, reason: str, quiet: bool = False) -> None:
        self.fail([item], None, reason, level=logging.INFO if quiet else logging.WARNING)

    def session_gone(self, group: Group) -> None:
        """Honcho has no session of that name any more (deleted on the server, where an id
        is never reused): its items fail, said once; so do the later ones bound for it
        (plan.Planner), until the owner resends them to a new one (bxmem outbox resend)."""
        self.record([ledger_events.session_gone(group.ws, group.session, group.hsession, 404)])
        log.warning(
            f"the Honcho session {group.hsession} in {group.ws} is gone (HTTP 404: deleted on the server); "
            f"its turns fail until the owner resends them" + runbook("honcho-session-deleted")
        )
        self.fail(group.items, 404, session_gone_reason(group.hsession), level=logging.INFO)
