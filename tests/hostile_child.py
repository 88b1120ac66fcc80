"""One bxmem command, run as the console script runs it, under an address-space
limit and with its timeouts shortened so a test can wait them out.

    python tests/hostile_child.py ARGS...    (BXMEM_TEST_AS_BYTES, BXMEM_TEST_SCALE, BXMEM_TEST_PEAK_FILE)

Its peak RSS is the VmHWM of its own address space, written to BXMEM_TEST_PEAK_FILE
as it exits, with how long it ran from the moment the interpreter handed it
control (CLOCK_MONOTONIC), so a loaded machine's slow interpreter start does not
count against a command's deadline; bxmem's own imports do. wait4's ru_maxrss cannot be used: Linux folds the address space a
child leaves at exec into it, and a vfork()ed child leaves its parent's, so every
child of a large pytest process would report the parent's peak.

The shortened values keep every bound's shape (send's run deadline over its
request deadline, recall's source deadline, audit's whole-command deadline):
tests/test_hostile_server.py holds each command to the same formula with them.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import NoReturn

# What tests/test_hostile_server.py waits for, and where each value lives.
SHORT = {
    "bxmem.honcho.api.CONNECT_TIMEOUT": 0.5,
    "bxmem.honcho.api.READ_TIMEOUT": 1.0,  # a request's deadline: 0.5 + 2 x 1.0 = 2.5 s
    "bxmem.commands.send.runner.RUN_BUDGET_S": 3.0,
    "bxmem.commands.send.runner.RUN_DEADLINE_S": 5.0,
    "bxmem.commands.recall.HONCHO_TIMEOUT_S": 1.0,
    "bxmem.commands.live_checks.HONCHO_TIMEOUT_S": 1.0,
    "bxmem.commands.audit.DEADLINE_S": 5.0,
    "bxmem.commands.ask.ASK_TIMEOUT_S": 4.0,
    "bxmem.commands.ask.LIST_TIMEOUT_S": 1.0,
}


STARTED = time.monotonic()


def _record_peak() -> None:
    ran_s = time.monotonic() - STARTED
    path = os.environ.get("BXMEM_TEST_PEAK_FILE")
    if not path:
        return
    with open("/proc/self/status", encoding="ascii") as status:
        peak_kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    Path(path).write_text(f"{peak_kb} {ran_s:.6f}", encoding="ascii")


def main() -> None:
    # The checkout's bxmem, as `python -m bxmem` from it would import (the tests' subject), not an installed one.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    limit = int(os.environ["BXMEM_TEST_AS_BYTES"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import importlib

    for name, value in json.loads(os.environ.get("BXMEM_TEST_SCALE") or json.dumps(SHORT)).items():
        module, attribute = name.rsplit(".", 1)
        setattr(importlib.import_module(module), attribute, value)
    sys.argv = ["bxmem", *sys.argv[1:]]
    from bxmem.start.entry import console

    leave = os._exit

    def leave_after_recording(status: int) -> NoReturn:  # console() leaves by os._exit
        _record_peak()
        leave(status)

    os._exit = leave_after_recording
    try:
        console()
    finally:
        _record_peak()


if __name__ == "__main__":
    main()
