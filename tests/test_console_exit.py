"""The console script leaves with os._exit (entry.console), skipping the
interpreter's teardown: what a run prints and logs must still arrive whole,
and its exit code unchanged."""

import json

from helpers import run_bxmem, write_log

from bxmem.demo.sample import turn_lines

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
