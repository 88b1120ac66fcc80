"""The README's first command: the demo, local only and against a Honcho server."""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import bxmem_inprocess, ledger_events, run_bxmem

import bxmem.demo.run

WORKSPACES_LINE = re.compile(r"this run's workspaces on \S+: (\S+), (\S+), (\S+)$", re.MULTILINE)


@pytest.fixture
def tmpdir_for_demo():
    """An empty TMPDIR of its own, so what the demo leaves behind can be seen; short,
    because brokerd's socket path under it must fit in 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="bxd-"))
    yield path
    shutil.rmtree(path)


# decide waits this long for the demo's stand-in brokerd here, not its 2 s: the
# demo's late session is as late against it, so the story it tells is the same.
BROKER_WAIT_S = 0.2


@pytest.fixture(autouse=True)
def quick_broker(monkeypatch):
    monkeypatch.setattr(
        bxmem.demo.run, "run_demo", functools.partial(bxmem.demo.run.run_demo, broker_wait=BROKER_WAIT_S)
    )


def demo(*args: str, tmpdir: Path | None = None):
    """The demo in this process, with its own TMPDIR and lines wide enough to hold every name whole."""
    tempfile.tempdir = None  # read TMPDIR again, before and after
    try:
        return bxmem_inprocess("demo", *args, env={"COLUMNS": "250", **({"TMPDIR": str(tmpdir)} if tmpdir else {})})
    finally:
        tempfile.tempdir = None


def printed_workspaces(stdout: str) -> set[str]:
    match = WORKSPACES_LINE.search(stdout)
    assert match, f"the demo did not print its workspaces:\n{stdout[:400]}"
    return set(match.groups())


def test_demo_local_only_explains_every_decision(tmp_path):
    result = demo("--keep", str(tmp_path / "d"))
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    for session in ("s-clean", "s-fetched", "s-secret", "s-burst", "s-key", "s-team", "s-late"):
        assert session in out
    assert "1 waiting" in out and "local-only" in out
    assert f"no reply within {BROKER_WAIT_S:g} s" in out  # decide waited as long as it was told
    assert "secret-in-text" in out and "secret-session" in out and "no-speaker" in out


def test_demo_sends_to_workspaces_of_its_own_and_prints_them(honcho, tmpdir_for_demo):
    result = demo("--honcho", honcho.url, tmpdir=tmpdir_for_demo)
    assert result.returncode == 0, result.stderr
    assert "send: 15 items (12 turn messages, plus conclusions)" in " ".join(result.stdout.split())
    names = printed_workspaces(result.stdout)
    assert {m["workspace_id"] for m in honcho.messages} == names
    assert set(honcho.workspaces) == names
    # Never the README's example names, which a real agent may be using.
    assert not names & {"boxmaker0-trusted", "boxmaker0-untrusted", "fleet"}
    assert all(name.startswith("bxmem-demo-") for name in names)
    assert {c["content"] for c in honcho.conclusions.values()} == {
        "Kyle prefers metric units",
        "backups run nightly",
        "the NAS is at 10.0.0.5",
    }


def test_two_demo_runs_never_share_a_workspace(honcho, tmpdir_for_demo):
    # Reruns used to add another copy to the same three workspaces (audit then found 15 discrepancies).
    first = demo("--honcho", honcho.url, tmpdir=tmpdir_for_demo)
    sent_first = len(honcho.messages)
    second = demo("--honcho", honcho.url, tmpdir=tmpdir_for_demo)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    one, two = printed_workspaces(first.stdout), printed_workspaces(second.stdout)
    assert len(one) == len(two) == 3 and not one & two
    per_workspace: dict[str, int] = {}
    for m in honcho.messages:
        per_workspace[m["workspace_id"]] = per_workspace.get(m["workspace_id"], 0) + 1
    assert len(honcho.messages) == 2 * sent_first
    # Each run's workspaces hold exactly one copy of the sample: the same counts, nothing added to the first.
    assert sorted(per_workspace[w] for w in one) == sorted(per_workspace[w] for w in two)
    assert sum(per_workspace[w] for w in one) == sent_first


def test_demo_removes_its_temporary_home(honcho, tmpdir_for_demo):
    tmpdir = tmpdir_for_demo
    for args in ((), ("--honcho", honcho.url)):
        result = demo(*args, tmpdir=tmpdir)
        assert result.returncode == 0, result.stderr
        assert "has been removed" in result.stdout
        assert list(tmpdir.iterdir()) == [], "the demo left its temporary home behind"


def test_demo_keeps_its_home_only_when_asked(tmp_path, honcho, tmpdir_for_demo):
    kept = tmp_path / "kept"
    result = demo("--honcho", honcho.url, "--keep", str(kept), tmpdir=tmpdir_for_demo)
    assert result.returncode == 0, result.stderr
    assert list(tmpdir_for_demo.iterdir()) == []
    names = printed_workspaces(result.stdout)
    events = ledger_events(kept / "home")
    assert {e["ws"] for e in events if e["ev"] == "sent"} <= names and any(e["ev"] == "sent" for e in events)
    assert names <= set((kept / "bxmem.toml").read_text().replace('"', " ").split())
    assert "has been removed" not in result.stdout


def test_demo_never_writes_into_a_directory_that_holds_something(tmp_path, tmpdir_for_demo):
    kept = tmp_path / "kept"
    (kept / "home" / "logs").mkdir(parents=True)
    mine = kept / "home" / "logs" / "s-clean.jsonl"
    mine.write_text("the owner's own log\n")
    result = demo("--keep", str(kept), tmpdir=tmpdir_for_demo)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and str(kept) in result.stderr
    assert mine.read_text() == "the owner's own log\n"
    assert sorted(p.name for p in kept.rglob("*")) == ["home", "logs", "s-clean.jsonl"]


@pytest.mark.parametrize(
    "url",
    [
        "notaurl",
        "ftp://example.org",
        "http://user@example.org",
        "http://127.0.0.1:99999",
        "",
        "http://example.org/?q=1",
    ],
)
def test_a_honcho_option_that_is_not_a_url_is_a_usage_error_naming_it(url, tmpdir_for_demo, monkeypatch):
    from bxmem.demo.run import run_demo
    from bxmem.errors import UsageError

    monkeypatch.setenv("TMPDIR", str(tmpdir_for_demo))
    tempfile.tempdir = None  # read TMPDIR again
    try:
        with pytest.raises(UsageError, match=r"^--honcho '.*': (must be an http|port )"):
            run_demo(url)
    finally:
        tempfile.tempdir = None
    assert list(tmpdir_for_demo.iterdir()) == [], "nothing is written before the option is checked"


def test_the_usage_error_is_one_line_and_exit_2(tmpdir_for_demo):
    # As a process: the demo's exit code and its one line, from the console script's boundary.
    result = run_bxmem("demo", "--honcho", "notaurl", env={"TMPDIR": str(tmpdir_for_demo)})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "bxmem: error: --honcho 'notaurl': must be an http:// or https:// URL with no user, query or fragment\n"
    )


def test_a_honcho_that_does_not_answer_is_not_called_a_success(tmpdir_for_demo):
    result = demo("--honcho", "http://127.0.0.1:9", tmpdir=tmpdir_for_demo)
    out = " ".join(result.stdout.split())
    assert result.returncode == 3, result.stderr  # DEGRADED: Honcho did not answer
    assert "send: Honcho at http://127.0.0.1:9 did not answer (" in out
    assert (
        "15 item(s) not sent; they were in this demo's outbox, in its temporary home, which is removed now with them"
        in out
    )
    assert "send: 0 items" not in out and "the outbox keeps everything" not in out
    assert "has been removed" in out and list(tmpdir_for_demo.iterdir()) == []


def test_a_kept_demo_keeps_what_honcho_was_not_sent_and_says_how_to_send_it(tmp_path, tmpdir_for_demo):
    kept = tmp_path / "kept"
    result = demo("--honcho", "http://127.0.0.1:9", "--keep", str(kept), tmpdir=tmpdir_for_demo)
    out = " ".join(result.stdout.split())
    assert result.returncode == 3, result.stderr
    assert (
        f"15 item(s) not sent; they wait in this demo's outbox under {kept / 'home'}; "
        f"`bxmem --config {kept / 'bxmem.toml'} send` sends them once Honcho answers"
    ) in out
    status = bxmem_inprocess(
        "--config", str(kept / "bxmem.toml"), "sync", "--json", env={"BOXMAKER_HOME": str(kept / "home")}
    )
    import json

    pending = sum(w["pending_turns"] + w["pending_edits"] for w in json.loads(status.stdout)["workspaces"].values())
    assert pending == 15


def test_the_owner_view_sees_brokerd_as_the_jobs_did(tmpdir_for_demo):
    result = demo(tmpdir=tmpdir_for_demo)
    assert result.returncode == 0
    assert "brokerd now: answering" in result.stdout and "brokerd now: cannot answer" not in result.stdout
