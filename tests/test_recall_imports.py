"""What the agent's every recall loads: nothing it does not use (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

from conftest import run_bxmem, write_log

from bxmem.commands import decide
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines

# Each was once loaded on the lean recall path for nothing: datetime by the
# `sqlite3` package (its date adapters), socket for its enums, secrets for the
# nonce, logging for a logger recall never writes to; typer and pydantic are
# the full CLI's.
NOT_LOADED = ("datetime", "sqlite3", "socket", "secrets", "logging", "typer", "pydantic", "httpx", "typing")


def test_the_lean_recall_path_loads_none_of_the_heavy_modules(home, brokerd, configure):
    configure("http://127.0.0.1:9")  # Honcho refused: the common failure, answered from the index alone
    write_log(home, "s", turn_lines(1, "the restic backups", "run nightly"))
    decide.run(config_module.load())
    run_bxmem("recall", "restic")  # as on a host: the validated configuration is cached by the first run
    probe = (
        "import sys; from bxmem.start.entry import main; code = main(['bxmem', 'recall', 'restic backups', '--json']); "
        "print(code, sorted(sys.modules), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    code, loaded = out.stderr.strip().split(" ", 1)
    assert code == "0" and '"restic backups"' not in out.stdout and "restic" in out.stdout  # it did recall
    heavy = sorted({name.split(".")[0] for name in eval(loaded)} & set(NOT_LOADED))
    assert heavy == [], heavy
