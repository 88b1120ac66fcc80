"""The bar a person at a terminal sees while the local index is rebuilt (rich)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rich.progress import Progress

THRESHOLD_BYTES = 1 << 20  # a rebuild from a smaller ledger is over before a bar would help


class index_rebuild_bar:
    """A bar over the ledger's `total` bytes, at a terminal and for a large ledger
    only; entered, the function commands/index_fold.py tells each offset read, or None."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Progress | None = None
        if total >= THRESHOLD_BYTES and sys.stderr.isatty():
            from rich.console import Console  # deferred: command (rich only when a bar is shown)
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn  # deferred: command

            self.bar = Progress(
                "rebuilding the local index",
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task("ledger", total=total)

    def __enter__(self):
        if self.bar is None:
            return None
        self.bar.start()
        bar, task, step = self.bar, self.task, max(1, self.total // 500)
        shown = [0]

        def advance(offset: int) -> None:
            if offset - shown[0] >= step:
                shown[0] = offset
                bar.update(task, completed=offset)

        return advance

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
