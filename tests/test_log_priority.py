"""What reaches the journal when the units run the jobs (`--quiet`, LogLevelMax=notice):
bxmem's own notices, warnings and errors, each with its priority; never the
per-run info lines."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import bxmem_main, write_log

from bxmem.commands import decide
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines

PROBE = """
from bxmem.log import log, notice, setup
setup("send", quiet=True)
log.debug("a debug line")
log.info("an info line")
notice("Honcho answers again")
log.warning("Honcho unreachable")
log.error("a key refused")
"""


def test_quiet_under_journald_keeps_notices_warnings_and_errors_with_their_priority(tmp_path):
    err = tmp_path / "stderr"
    with open(err, "w") as stream:
        st = os.fstat(stream.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        subprocess.run([sys.executable, "-c", PROBE], stderr=stream, env=env, check=True)
    assert err.read_text().splitlines() == [
        "<5>bxmem send: notice: Honcho answers again",
        "<4>bxmem send: warning: Honcho unreachable",
        "<3>bxmem send: error: a key refused",
    ]


def test_quiet_off_journald_has_no_priority_prefix(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"},
    )
    assert run.stderr.splitlines()[0] == "bxmem send: notice: Honcho answers again"


def test_a_brokerd_outage_shows_its_start_and_its_end_under_quiet(home, configure, brokerd):
    configure("http://127.0.0.1:9")
    brokerd.stop()
    write_log(home, "s", turn_lines(1, "a", "b"))
    first = bxmem_main("--quiet", "decide")
    assert first.returncode == 3 and "warning: brokerd cannot answer" in first.stderr
    brokerd.start()
    back = bxmem_main("--quiet", "decide")
    assert back.returncode == 0
    assert back.stderr.startswith("bxmem decide: notice: brokerd answers again (unavailable since ")
    assert len(back.stderr.splitlines()) == 1


def test_a_honcho_outage_shows_its_start_and_its_end_under_quiet(home, brokerd, honcho, configure, capsys):
    from bxmem.log import setup

    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "a", "b"))
    decide.run(config_module.load())
    setup("send", quiet=True)  # as `bxmem --quiet send` does, on the captured stderr
    honcho.stop()
    clock = [1_000_000.0]
    assert send.run(config_module.load(), clock=lambda: clock[0]).outage
    started = capsys.readouterr().err.splitlines()
    assert len(started) == 1 and started[0].startswith("bxmem send: warning: Honcho unreachable at ")
    honcho.start()
    clock[0] += 601
    assert send.run(config_module.load(), clock=lambda: clock[0]).sent == 1
    ended = capsys.readouterr().err.splitlines()
    assert len(ended) == 1 and ended[0].startswith(f"bxmem send: notice: Honcho at {honcho.url} answers again")
