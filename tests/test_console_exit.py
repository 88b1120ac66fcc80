"""The console script leaves with os._exit (entry.console), skipping the
interpreter's teardown: what a run prints and logs must still arrive whole,
and its exit code unchanged."""

import json
import os
import subprocess
import sys

import pytest
from helpers import run_bxmem, write_log

from bxmem.demo.sample import turn_lines
from bxmem.errors import ExitCode

# As a timer's run has it: stdout into a pipe is block-buffered (the test
# environment may set PYTHONUNBUFFERED, which would hide a missing flush).
BUFFERED = {"PYTHONUNBUFFERED": ""}


def test_output_and_log_arrive_through_pipes(home, brokerd, configure):
    configure("http://127.0.0.1:9")  # nothing listens: send reports an outage
    for s in range(3):
        lines = []
        for n in range(1, 41):
            lines += turn_lines(n, f"question {n} in session {s} " + "x" * 300, f"answer {n}")
        write_log(home, f"s{s}", lines)
    decided = run_bxmem("decide")
    assert decided.returncode == 0, decided.stderr
    assert "decided 120 turn(s)" in decided.stderr
    sent = run_bxmem("send", "--json", env=BUFFERED)
    assert sent.returncode == 3, sent.stderr  # Honcho unreachable (docs/agent-tools.md)
    report = json.loads(sent.stdout)  # block-buffered into a pipe: unflushed, this would be empty
    assert report["pending"] == 120 and report["outage"]
    assert "Honcho unreachable" in sent.stderr


def test_exit_code_of_a_failed_run_is_kept():
    usage = run_bxmem("no-such-command", env=BUFFERED)
    assert usage.returncode == 2
    assert "no-such-command" in usage.stderr


def closed_stdout_run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`bxmem ARGS | jq BAD-FILTER`: the reader of stdout has gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "bxmem", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **BUFFERED, **(env or {})},
            timeout=60,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("buffered", [True, False])
@pytest.mark.parametrize(
    "args",
    [
        ("recall", "--json", "backups"),
        ("recall", "backups"),  # the lean path
        ("artifact", "list", "--json"),
        ("config", "check", "--json"),
    ],
)  # typer's
def test_a_closed_stdout_is_quiet_not_a_traceback(args, buffered, tmp_path):
    """`bxmem ... | head -1` as click and coreutils have it: nothing on stderr, the run's exit code or 1."""
    env = {"BXMEM_CONFIG": str(tmp_path / "artifacts.toml"), "PYTHONUNBUFFERED": "" if buffered else "1"}
    (tmp_path / "artifacts.toml").write_text("[artifacts]\n")
    read = run_bxmem(*args, env=env)
    result = closed_stdout_run(*args, env=env)
    assert result.stderr == read.stderr
    assert result.returncode == (read.returncode or ExitCode.ERROR)  # the output was lost


def test_a_failed_run_into_a_closed_stdout_keeps_its_line_and_exit_code(tmp_path):
    (tmp_path / "artifacts.toml").write_text("[artifacts]\n")
    result = closed_stdout_run(
        "artifact", "resolve", "--json", "art_" + "a" * 52, env={"BXMEM_CONFIG": str(tmp_path / "artifacts.toml")}
    )
    assert result.stderr == f"bxmem: error: art_{'a' * 52} is not on this host\n"
    assert result.returncode == ExitCode.NOT_FOUND
