"""Each write workspace's key, read once a run; a refused key (by Honcho, or its file by bxmem) stops its
workspace alone until the key file changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from bxmem.commands.send.plan import Tally
from bxmem.config.loader import Config, Key, key_fingerprint, read_key
from bxmem.errors import KeyFileInvalid
from bxmem.log import log, notice, runbook
from bxmem.store import ledger_events
from bxmem.store.outbox import Outbox


class WorkspaceKeys:
    def __init__(
        self, config: Config, box: Outbox, report: Tally, record: Callable[[Sequence[Mapping[str, object]]], None]
    ) -> None:
        self.config = config
        self.box = box
        self.report = report
        self.record = record  # Sender.record: ledger lines, folded into the outbox
        self._keys: dict[str, Key | None] = {}

    def get(self, ws: str) -> Key | None:
        return self._keys.get(ws)

    def read(self) -> None:
        """The keys of send's own workspaces, read once a run. A key file bxmem
        refuses stops its workspace alone, as a key Honcho refuses does."""
        for workspace in self.config.workspaces():
            if not workspace.role.startswith("read:") and workspace.name not in self.box.stopped:
                try:
                    self._keys[workspace.name] = read_key(workspace)
                except KeyFileInvalid as exc:
                    self.stop(workspace.name, None, str(exc))

    def stop(self, ws: str, status: int | None, problem: str | None = None) -> None:
        workspace = self.config.workspace_by_name(ws)
        secret = workspace.secret if workspace else "?"
        fingerprint = key_fingerprint(workspace.key_file) if workspace else None
        self.record([ledger_events.key_refused(ws, status, secret, fingerprint, problem)])
        self.report.stopped.append(ws)
        self.report.said.add(("refused", ws))
        why = problem or f"Honcho refused the key for workspace {ws} (HTTP {status})"
        log.error(
            f"{why}; sends to {ws} stop until secrets.{secret} changes, the other workspaces go on"
            + runbook("honcho-key-refused")
        )

    def versions(self) -> dict[str, list[int] | None]:
        """Each write workspace's key file version (its stat fingerprint): an outage is
        kept with them, and a new key ends its backoff (Sender.run)."""
        return {
            ws.name: key_fingerprint(ws.key_file)
            for ws in self.config.workspaces()
            if not ws.role.startswith("read:") and ws.key_file is not None
        }

    def resume_refreshed(self) -> None:
        for ws, refusal in list(self.box.stopped.items()):
            workspace = self.config.workspace_by_name(ws)
            current = key_fingerprint(workspace.key_file) if workspace else None
            if workspace is not None and current != refusal.get("key"):
                self.record([ledger_events.key_resumed(ws, "key file changed")])
                notice(f"the key for workspace {ws} changed; resuming its sends")
