"""What a `bxmem send` run did, and what the command prints about it."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ExitCode


@dataclass
class SendReport:
    busy: bool = False
    local_only: bool = False
    waiting_until: float | None = None
    sent: int = 0
    messages: int = 0
    requests: int = 0
    failed: int = 0
    outage: str | None = None
    stopped: list[str] = field(default_factory=list)
    pending: int = 0
    held: int = 0  # items waiting behind an in-doubt attempt (retry.Hold)
    settle_at: float | None = None  # when the first of those may be looked up
    # Items the configuration holds (write_policy.py), by workspace, recorded
    # role, role now and reason: {"workspace", "role", "now", "reason", "explain", "turns", "edits", "oldest"}
    held_by_config: list[dict] = field(default_factory=list)

    @property
    def degraded(self) -> bool:
        return bool(self.outage or self.waiting_until or self.stopped)

    # What the command prints (jobs.finish writes it): the report knows its own output.
    def notice(self) -> str | None:
        if self.local_only:
            return "local-only: no [honcho] section in the configuration, nothing is sent"
        return "another send is running; this one exits" if self.busy else None

    def pending_count(self, config) -> tuple[int | None, str | None]:
        """The items still in the outbox after the run, or None and why they were not counted.

        A run that waits out a backoff returns before it counts (it sends nothing);
        its count comes from the outbox checkpoint it saved on the way out, which
        is the ledger folded up to now.
        """
        if self.local_only:
            return None, "local-only: no [honcho] section, so there is no outbox"
        if self.busy:
            return None, "another send is running and holds the outbox"
        if self.waiting_until is None:
            return self.pending, None
        from .outbox import Outbox

        saved = Outbox.read_checkpoint(config.paths.state)
        if saved is None or not isinstance(saved.get("pending"), dict):
            return None, "the outbox checkpoint could not be read"
        return len(saved["pending"]), None

    def as_json(self, config) -> dict:  # scripts get an object in every case
        pending, not_counted = self.pending_count(config)
        return {"local_only": self.local_only, "busy": self.busy, "sent": self.sent, "messages": self.messages,
                "requests": self.requests, "failed": self.failed, "pending": pending, "pending_not_counted": not_counted,
                "outage": self.outage, "waiting_until": self.waiting_until, "stopped": self.stopped,
                "held_by_config": self.held_by_config}

    def held_count(self) -> int:
        return sum(g["turns"] + g["edits"] for g in self.held_by_config)

    def summary(self, config) -> str | None:
        held = self.held_count()
        if self.local_only or self.busy or not (self.sent or self.failed or held):
            return None
        pending, _ = self.pending_count(config)
        return (f"sent {self.sent} item(s) in {self.requests} request(s); {self.failed} failed; {pending} pending"
                + (f", {held} of them held by the configuration (bxmem sync says why)" if held else ""))

    @property
    def exit_code(self) -> int:
        if self.local_only or self.busy:
            return ExitCode.OK
        if self.held_by_config:  # the owner's to resolve: nothing sends them until the configuration does
            return ExitCode.ATTENTION
        return ExitCode.DEGRADED if self.degraded else ExitCode.OK


def log_held(groups: list[dict]) -> list[dict]:
    """One warning for each group of items the configuration holds (write_policy.Holds.groups); the groups."""
    from .log import log, runbook

    for g in groups:
        log.warning(f"{g['turns'] + g['edits']} item(s) held that would write to {g['workspace'] or '(no workspace)'} as "
                    f"{g['role'] or '(no role)'} ({g['reason']}): {g['explain']}; nothing is sent for them"
                    + runbook("honcho-held-by-config"))
    return groups
