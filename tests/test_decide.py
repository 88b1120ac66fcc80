"""`bxmem decide` against real log files and a real brokerd socket."""

from __future__ import annotations

import json
import os

import pytest
from helpers import bxmem_main, decisions, ledger_events, run_bxmem, write_log

from bxmem.commands import decide
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines

FETCHED = [{"untrusted": True, "class": "public"}]


def run_decide(**kwargs):
    return decide.run(config_module.load(), **kwargs)


@pytest.fixture
def honcho_url_config(configure):
    return configure("http://127.0.0.1:9")  # decide never calls Honcho


def test_each_row_of_the_table(home, brokerd, honcho_url_config):
    write_log(home, "clean", turn_lines(1, "hello", "hi"))
    write_log(home, "fetched", turn_lines(1, "read the page", "done", results=FETCHED))
    write_log(home, "brokertaint", turn_lines(1, "hi", "hello"))
    write_log(home, "secret", turn_lines(1, "hi", "hello"))
    write_log(home, "burst", turn_lines(1, "hi all", "hello", speaker=None))
    write_log(home, "key", turn_lines(1, "my token ghp_" + "a" * 36, "noted"))
    write_log(home, "replykey", turn_lines(1, "make me a key", "sk-ant-" + "b" * 30))
    write_log(home, "errored", turn_lines(1, "hi", "hello", status="error"))
    write_log(home, "noreply", turn_lines(1, "hi", None))
    brokerd.states.update({"brokertaint": ("private", True), "secret": ("secret", False), "fetched": ("public", False)})

    report = run_decide()

    got = {item: (d["role"], d["reason"]) for item, d in decisions(home).items()}
    assert got == {
        "turn:clean:1": ("trusted", "clean"),
        "turn:fetched:1": ("untrusted", "untrusted-session"),
        "turn:brokertaint:1": ("untrusted", "untrusted-session"),
        "turn:secret:1": (None, "secret-session"),
        "turn:burst:1": (None, "no-speaker"),
        "turn:key:1": (None, "secret-in-text"),
        "turn:replykey:1": (None, "secret-in-text"),
        "turn:errored:1": (None, "turn-not-completed"),
        "turn:noreply:1": (None, "no-final-reply"),
    }
    assert decisions(home)["turn:clean:1"]["ws"] == "bm0-trusted"
    assert decisions(home)["turn:fetched:1"]["untrusted_by"] == ["log"]
    assert report.undecided == 0


def test_no_text_in_the_ledger(home, brokerd, honcho_url_config):
    write_log(home, "s1", turn_lines(1, "the-unique-user-words", "the-unique-reply-words"))
    run_decide()
    raw = (home / "memory" / "honcho.jsonl").read_text()
    assert "unique-user-words" not in raw and "unique-reply-words" not in raw


def test_untrusted_sticks_for_later_turns(home, brokerd, honcho_url_config):
    write_log(
        home,
        "s",
        turn_lines(1, "a", "b") + turn_lines(2, "fetch it", "ok", results=FETCHED) + turn_lines(3, "thanks", "np"),
    )
    run_decide()
    got = {k: v["role"] for k, v in decisions(home).items()}
    assert got == {"turn:s:1": "trusted", "turn:s:2": "untrusted", "turn:s:3": "untrusted"}


def test_reads_only_new_bytes_and_waits_for_unfinished_turns(home, brokerd, honcho_url_config):
    path = write_log(home, "s", turn_lines(1, "a", "b"))
    unfinished = turn_lines(2, "c", "d")
    with open(path, "a") as f:
        for line in unfinished[:-1]:
            f.write(json.dumps(line) + "\n")
        f.write('{"type":"turn_end","turn":2')  # still being written
    run_decide()
    assert set(decisions(home)) == {"turn:s:1"}
    with open(path, "a") as f:
        f.write(',"ts":"2026-09-27T10:02:00Z","status":"completed"}\n')
    run_decide()
    run_decide()
    events = [e for e in ledger_events(home) if e["ev"] == "decided"]
    assert [e["item"] for e in events] == ["turn:s:1", "turn:s:2"]


def test_brokerd_down_leaves_turns_undecided_then_decides_from_later_state(home, honcho_url_config, brokerd):
    brokerd.stop()
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    report = run_decide()
    assert report.undecided == 1 and not decisions(home)
    # Meanwhile the session fetches a page, and brokerd comes back knowing it.
    write_log(home, "s", turn_lines(2, "fetch", "ok", results=FETCHED))
    brokerd.states["s"] = ("private", True)
    brokerd.start()
    report = run_decide()
    got = {k: v["role"] for k, v in decisions(home).items()}
    assert got == {"turn:s:1": "untrusted", "turn:s:2": "untrusted"}  # never towards trusted
    assert report.undecided == 0


def test_attack_brokerd_answers_late_after_the_page_was_fetched(home, honcho_url_config, brokerd):
    """A turn from a session that fetched a page never reaches the trusted workspace,
    even when brokerd answers too late the first time and 'clean' the second."""
    write_log(home, "s", turn_lines(1, "fetch the page", "done", results=FETCHED))
    brokerd.delay = 3.0
    assert run_decide(broker_timeout=0.3).undecided == 1
    brokerd.delay = 0.0  # brokerd (wrongly) says clean now
    run_decide()
    assert decisions(home)["turn:s:1"]["role"] == "untrusted"


def test_brokerd_garbage_and_bad_directory_mode_mean_unavailable(home, honcho_url_config, brokerd):
    write_log(home, "s", turn_lines(1, "a", "b"))
    brokerd.garbage = True
    report = run_decide()
    assert report.undecided == 1 and "did not parse" in report.broker_problem
    brokerd.garbage = False
    os.chmod(brokerd.sock_path.parent, 0o755)
    report = run_decide()
    assert report.undecided == 1 and "mode 755" in report.broker_problem
    os.chmod(brokerd.sock_path.parent, 0o700)
    assert run_decide().undecided == 0


def test_broker_outage_logged_once_and_exit_code_degraded(home, honcho_url_config, brokerd):
    brokerd.stop()
    write_log(home, "s", turn_lines(1, "a", "b"))
    first = bxmem_main("decide")
    quiet = bxmem_main("-q", "decide")  # as the units run it: the journal heard of it once
    second = bxmem_main("decide")  # by hand: every run that exits 3 says why (tests/test_every_run_reports.py)
    assert first.returncode == 3 and quiet.returncode == 3 and second.returncode == 3
    assert "warning: brokerd cannot answer" in first.stderr and "broker-state-unavailable" in first.stderr
    assert quiet.stderr == "" and "warning" not in second.stderr
    assert "1 turn(s) wait undecided: brokerd cannot answer since " in second.stderr
    brokerd.start()
    third = bxmem_main("decide")
    assert third.returncode == 0 and "answers again" in third.stderr


def test_malformed_lines_are_skipped_counted_and_named(home, honcho_url_config, brokerd):
    path = home / "logs" / "s.jsonl"
    path.parent.mkdir(parents=True)
    good = turn_lines(1, "a", "b")
    with open(path, "wb") as f:
        f.write(json.dumps(good[0]).encode() + b"\n")
        f.write(b"{not json\n")
        f.write(b'{"type":"user","turn":"x"}\n')
        f.write(b"\xff\xfe invalid utf8\n")
        f.write(b"[1,2]\n")
        f.write(b'{"type":"mystery","turn":1}\n')
        for line in good[1:]:
            f.write(json.dumps(line).encode() + b"\n")
    result = bxmem_main("decide", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["skipped_lines"] == 4
    assert f"{path}:2: not valid JSON; line skipped" in result.stderr
    assert f"{path}:3: field 'turn' is not a positive integer" in result.stderr
    assert f"{path}:4: not valid UTF-8" in result.stderr
    # Skipped for their content, and tainting: the turn they fall in goes nowhere, naming the first.
    decided = decisions(home)["turn:s:1"]
    assert (decided["role"], decided["reason"], decided["unreadable"]) == (
        None,
        "log-unreadable",
        {"line": 2, "why": "not valid JSON"},
    )


def test_a_log_whose_name_is_not_a_session_id_is_ignored_once(home, honcho_url_config, brokerd):
    write_log(home, "bad.name", turn_lines(1, "a", "b"))
    first = bxmem_main("decide")
    second = bxmem_main("decide")
    assert "bad.name.jsonl: ignored" in first.stderr
    assert "ignored" not in second.stderr
    assert not decisions(home)


def test_missing_logs_folder_is_not_an_error(home, honcho_url_config):
    result = bxmem_main("decide")
    assert result.returncode == 0
    assert "no logs folder" in result.stderr


def test_crash_between_ledger_append_and_state_write_decides_nothing_twice(home, honcho_url_config, brokerd):
    write_log(home, "s", turn_lines(1, "a", "b"))
    state = home / "memory" / "bxmem" / "decide.json"
    run_decide()
    before = state.read_bytes()
    write_log(home, "s", turn_lines(2, "c", "d"))
    run_decide()
    state.write_bytes(before)  # as if the state write after the append never happened
    run_decide()
    items = [e["item"] for e in ledger_events(home) if e["ev"] == "decided"]
    assert items == ["turn:s:1", "turn:s:2"]


def test_local_only_still_decides_and_says_so(home, brokerd):
    write_log(home, "s", turn_lines(1, "a", "b"))
    result = bxmem_main("decide")
    assert result.returncode == 0
    assert "local-only" in result.stderr
    d = decisions(home)["turn:s:1"]
    assert d["role"] == "trusted" and d["ws"] is None


def test_second_decide_at_once_exits_zero(home, honcho_url_config, brokerd):
    from bxmem.store.files import JobLock

    (home / "memory" / "bxmem").mkdir(parents=True)
    lock = JobLock(home / "memory" / "honcho.jsonl", "decide")
    assert lock.acquire()
    try:
        assert run_decide().busy
    finally:
        lock.release()


def test_lost_state_file_decides_nothing_twice(home, honcho_url_config, brokerd):
    write_log(home, "s", turn_lines(1, "a", "b") + turn_lines(2, "c", "d"))
    run_decide()
    (home / "memory" / "bxmem" / "decide.json").unlink()
    write_log(home, "s", turn_lines(3, "e", "f"))
    run_decide()
    items = [e["item"] for e in ledger_events(home) if e["ev"] == "decided"]
    assert items == ["turn:s:1", "turn:s:2", "turn:s:3"]


def test_progress_reports_the_backlog_in_bytes(home, honcho_url_config, brokerd):
    for s in range(5):
        write_log(home, f"p{s}", turn_lines(1, "x" * 1000, "y"))
    seen = []
    run_decide(progress=lambda done, total: seen.append((done, total)))
    total = sum((home / "logs" / f"p{s}.jsonl").stat().st_size for s in range(5))
    assert len(seen) == 5 and {t for _d, t in seen} == {total}
    assert [d for d, _t in seen] == sorted(d for d, _t in seen) and seen[0][0] == 0


def test_no_progress_bar_without_a_terminal(home, honcho_url_config, brokerd):
    write_log(home, "big", [line for n in range(1, 400) for line in turn_lines(n, "z" * 12_000, "ok")])
    result = run_bxmem("decide")
    assert result.returncode == 0 and result.stdout == ""
    assert "deciding the backlog" not in result.stderr and "\r" not in result.stderr


def test_a_state_from_before_exact_sets_is_read_again_and_finds_the_turns_it_lost(home, honcho_url_config, brokerd):
    """decide.json written by the version that kept only the highest decided turn:
    the first run reads every log again and learns the decided turns from the
    ledger, so turns that version lost (decided after turn 3 in its append, but
    before it in the log) are decided now, and turn 3 is not decided twice."""
    path = write_log(home, "s", turn_lines(1, "a", "b") + turn_lines(2, "c", "d") + turn_lines(3, "e", "f"))
    run_decide()
    ledger = home / "memory" / "honcho.jsonl"
    kept = [line for line in ledger.read_text().splitlines(keepends=True) if '"turn:s:3"' in line]
    ledger.write_text("".join(kept))
    old_state = {
        "ledger_size": ledger.stat().st_size,
        "undecided": {},
        "broker_down_since": None,
        "logs_missing": False,
        "logs": {
            "s": {
                "offset": path.stat().st_size,
                "line": 12,
                "ino": path.stat().st_ino,
                "untrusted": False,
                "class": "public",
                "open": {},
                "seen": 3,
            }
        },
    }
    (home / "memory" / "bxmem" / "decide.json").write_text(json.dumps(old_state))
    (home / "memory" / "bxmem" / "idle-decide.marshal").unlink()
    run_decide()
    items = [e["item"] for e in ledger_events(home) if e["ev"] == "decided"]
    assert sorted(items) == ["turn:s:1", "turn:s:2", "turn:s:3"]
