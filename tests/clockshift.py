"""A wrong wall clock for one bxmem process: `time.time` and `time.time_ns` run
`offset` seconds ahead (or behind, negative) of the machine's, as a system clock
set wrong would make them; the monotonic clock is untouched, as it is when the
wall clock steps. What Debian's `faketime` does to a whole process, without it
(CI's machine has only Python): the crash suite's `--fault clock` runs each job
so, and the real-server runs used faketime itself on the real CLI.

    python tests/clockshift.py OFFSET -- bxmem ARGS
"""

from __future__ import annotations

import os
import sys
import time


def shift(offset: float) -> None:
    real, real_ns = time.time, time.time_ns
    time.time = lambda: real() + offset
    time.time_ns = lambda: real_ns() + int(offset * 1e9)


def main(argv: list[str]) -> int:
    offset, separator, *job = argv
    assert separator == "--" and job[0] == "bxmem", argv
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    shift(float(offset))
    from bxmem.start.entry import main as bxmem_main

    return bxmem_main(job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
