"""The reference host (tests/reference_host.py, written from docs/agent-tools.md
alone) against the real CLI: the tools array from `bxmem tools`, the documented
argv, schema validation, the label applied, and each exit code recall and ask
can return, with what the model gets for it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import CAPTURED, examples, register_secret, write_log
from reference_host import FAIL_CLOSED, NOTHING_READ, Host

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import FAKE_AWS_KEY, turn_lines, write_journal
from bxmem.errors import COMMAND_EXITS

BXMEM = [str(Path(sys.executable).parent / "bxmem")]  # the console script, as a host runs it
ROLES = {
    "bm0-trusted": "honcho_trusted",
    "bm0-untrusted": "honcho_untrusted",
    "fleet": "honcho_fleet",
    "bm1-trusted": "honcho_read_boxmaker1",
}
KEYS = {ws: register_secret(f"host-key-{ws}-41d7") for ws in ROLES}


def _config(url: str, folder: Path) -> str:
    text = (
        f'[honcho]\nurl = "{url}"\nagent = "boxmaker0"\nowner = "kyle"\ntrusted = "bm0-trusted"\n'
        'untrusted = "bm0-untrusted"\nfleet = "fleet"\n\n[[honcho.read]]\nagent = "boxmaker1"\n'
        'workspace = "bm1-trusted"\ntrust = "trusted"\n'
    )
    for ws, secret in ROLES.items():
        key = folder / f"{ws}.key"
        key.write_text(KEYS[ws] + "\n")
        os.chmod(key, 0o600)
        text += f'\n[secrets.{secret}]\nfile = "{key}"\n'
    return text


@pytest.fixture
def fleet(home, brokerd, honcho, config_file, tmp_path):
    """An agent with memory (clean, tainted and secret turns, a turn holding a key, a
    fleet note) on a Honcho with workspace chat and a key per workspace; a host
    environment built from nothing but what docs/agent-tools.md section 1 names."""
    honcho.keys.update(KEYS)
    honcho.workspace_chat = True
    config_file.write_text(_config(honcho.url, tmp_path))
    write_log(home, "clean", turn_lines(1, "what about the restic backups", "nightly restic snapshots"))
    write_log(
        home,
        "tainted",
        turn_lines(1, "read the restic page", "restic 0.17 is out", results=[{"untrusted": True, "class": "public"}]),
    )
    write_log(home, "secretive", turn_lines(1, "the restic password is in the vault", "noted"))
    write_log(home, "keyed", turn_lines(1, f"the restic s3 key is {FAKE_AWS_KEY}", "stored"))
    brokerd.states["secretive"] = ("secret", False)
    write_journal(
        home,
        [
            {
                "id": "n1",
                "ts": "2026-09-27T10:00:00Z",
                "session": "clean",
                "op": "note",
                "trust": "untrusted",
                "entry": "a forum says restic prune is slow",
            }
        ],
    )
    for job in (decide, mirror, send):
        job.run(config_module.load())
    from bxmem.config.loader import Key
    from bxmem.honcho.client import WorkspaceClient

    with WorkspaceClient(honcho.url, "bm1-trusted", Key(KEYS["bm1-trusted"])) as b:
        b.create_peer("boxmaker1", False)
        b.add_messages("sb", [{"peer_id": "boxmaker1", "content": "staging runs k3s"}])
    honcho.requests.clear()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "BXMEM_CONFIG": str(config_file),
        "BOXMAKER_HOME": str(home),
    }
    return Host(BXMEM, env)


def _seen(result) -> None:
    CAPTURED.extend([result.content, *result.log])  # the suite checks no key reached any output


def test_the_tools_array_is_bxmem_tools_and_names_every_workspace(fleet):
    tools = fleet.tools()
    assert [t["name"] for t in tools] == ["recall", "ask_memory"]
    workspaces = tools[1]["input_schema"]["properties"]["workspaces"]
    assert workspaces["items"]["enum"] == ["own", "untrusted", "fleet", "boxmaker1"]
    assert fleet.schema("recall")["properties"]["schema"]["const"] == "bxmem.recall/1"
    assert fleet.schema("ask_memory")["properties"]["schema"]["const"] == "bxmem.ask/2"


def test_exit_0_recall_gives_the_text_and_the_document_label(fleet):
    result = fleet.call("recall", {"query": "restic", "k": 10})
    _seen(result)
    assert (result.exit, result.is_error) == (0, False)
    assert result.content.startswith("<<<bxmem recall ") and "read the restic page" in result.content
    # A tainted turn, a secret session's turn and a turn holding a key are recalled on
    # the host: labelled, so brokerd raises the session to untrusted and secret.
    assert "the restic password is in the vault" in result.content and FAKE_AWS_KEY in result.content
    assert result.label == {"untrusted": True, "class": "secret"}


def test_exit_0_ask_over_every_workspace(fleet, honcho):
    result = fleet.call(
        "ask_memory", {"question": "what runs on staging?", "workspaces": ["own", "untrusted", "fleet", "boxmaker1"]}
    )
    _seen(result)
    assert result.exit == 0 and result.content.startswith("<<<bxmem ask ")
    assert result.label == {"untrusted": True, "class": "private"}  # untrusted and fleet answers are tainted
    chats = [r for r in honcho.requests if r.path.endswith("/chat")]
    assert sorted(r.path for r in chats) == sorted(f"/v3/workspaces/{ws}/chat" for ws in ROLES)
    assert all(r.headers["authorization"] == f"Bearer {KEYS[r.path.split('/')[3]]}" for r in chats)


def test_exit_7_is_a_document_too(fleet, honcho):
    honcho.stop()
    result = fleet.call("ask_memory", {"question": "anyone there?", "workspaces": ["own", "fleet"]})
    assert (result.exit, result.is_error, result.label) == (7, False, {"untrusted": False, "class": "public"})
    assert "own: unavailable (connection failed" in result.content


def test_exit_2_gives_the_model_bxmems_one_line_and_reads_no_memory(fleet, honcho):
    """What the tool schemas admit, bxmem takes (tests/test_tool_inputs.py): exit 2 comes to a
    host that runs bxmem on input it did not validate, here a query of blanks."""
    assert fleet.call("recall", {"query": "   "}).exit is None  # the schema refuses it: the host answers
    result = fleet.result("recall", fleet._run(fleet.argv("recall", {"query": "   "}), 15.0))
    assert (result.exit, result.is_error) == (2, True)
    assert (result.content, result.label) == ("bxmem: error: the query is empty", NOTHING_READ)
    result = fleet.result("ask_memory", fleet._run(fleet.argv("ask_memory", {"question": " \n "}), 15.0))
    assert (result.exit, result.content, result.label) == (2, "bxmem: error: the question is empty", NOTHING_READ)
    assert honcho.requests == []


def test_input_the_tool_schema_refuses_is_answered_by_the_host(fleet, honcho):
    result = fleet.call("ask_memory", {"question": "hi", "workspaces": ["stranger"]})
    assert (result.exit, result.is_error, result.label) == (None, True, NOTHING_READ)
    assert result.content.startswith("invalid input for ask_memory: workspaces/0: 'stranger' is not one of")
    assert fleet.call("recall", {"query": "x", "k": 50}).exit is None
    assert fleet.call("recall", {"query": "x", "k": True}).exit is None
    assert fleet.call("forget", {}).content == "there is no tool 'forget'"
    assert honcho.requests == []


def test_a_nul_and_a_lone_surrogate_in_the_models_text_are_cleaned(fleet):
    """An argument cannot hold a NUL (exec refuses it) nor a lone surrogate (UTF-8 cannot)."""
    assert fleet.argv("recall", {"query": "re\x00stic \ud83d"})[-1] == "restic \ufffd"
    with pytest.raises((ValueError, UnicodeEncodeError)):
        subprocess.run([*BXMEM, "recall", "re\x00stic"], check=False)
    result = fleet.call("recall", {"query": "re\x00stic \ud83d"})
    _seen(result)
    assert result.exit == 0 and "restic backups" in result.content


def test_exit_6_and_78_are_unavailable_and_read_nothing(fleet, config_file, honcho, home):
    fleet.tools()  # the array a host cached before the owner changed the configuration
    saved = config_file.read_text()
    config_file.write_text("")  # local-only now, and the host did not run bxmem tools again
    result = fleet.call("ask_memory", {"question": "hi?"})
    assert (result.exit, result.content, result.label) == (
        6,
        "the ask_memory tool is unavailable (bxmem exit 6)",
        NOTHING_READ,
    )
    fleet.refresh()
    assert [t["name"] for t in fleet.tools()] == ["recall"]
    config_file.write_text(saved)
    fleet.refresh()
    fleet.tools()
    fleet.env["BXMEM_CONFIG"] = str(config_file) + ".moved"
    result = fleet.call("recall", {"query": "restic"})
    assert (result.exit, result.label) == (78, NOTHING_READ)
    assert result.content == "the recall tool is unavailable (bxmem exit 78)"
    assert "does not exist" in result.log[0]  # for the host's log, never the model
    assert honcho.requests == []


def test_the_wrong_home_is_exit_78_not_an_empty_memory(fleet, tmp_path):
    """Recall as another user, or with another HOME, is exit 78 with nothing read, never
    exit 7's 'no local index yet', which the model would read as having no memory."""
    fleet.env["BOXMAKER_HOME"] = str(tmp_path / "not-the-home")
    result = fleet.call("recall", {"query": "restic"})
    assert (result.exit, result.label) == (78, NOTHING_READ)
    assert (
        f"the Boxmaker home {tmp_path / 'not-the-home'} does not exist: run `bxmem init` to make it, or set BOXMAKER_HOME"
        in result.log[0]
    )
    del fleet.env["BOXMAKER_HOME"], fleet.env["BXMEM_CONFIG"]  # HOME alone, and it is not the jobs' HOME
    result = fleet.call("recall", {"query": "restic"})
    assert result.exit == 78 and f"{tmp_path}/.local/share/boxmaker does not exist" in result.log[0]


def test_exit_1_a_bug_fails_closed_and_the_model_gets_none_of_its_output(fleet):
    """A bug's traceback can quote what it was handling: never for the model."""
    bug = (
        "import sys, bxmem.commands.recall as r\n"
        "def broken(*a, **k): raise ValueError('while reading: the restic password is in the vault')\n"
        "r.recall = broken\nsys.argv[0] = 'bxmem'\nfrom bxmem.start.entry import console\nconsole()\n"
    )
    host = Host([sys.executable, "-c", bug], fleet.env)
    result = host.call("recall", {"query": "restic"})
    assert (result.exit, result.label, result.is_error) == (1, FAIL_CLOSED, True)
    assert result.content == "the recall tool failed (bxmem exit 1)"
    assert "restic password" in result.log[0] and "restic password" not in result.content


def _chats_held(fleet, honcho, signal_to_send=None, timeouts=None):
    honcho.chat_never_answers = True
    host = Host(BXMEM, fleet.env, timeouts)
    host.tools()
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(r=host.call("ask_memory", {"question": "slow?"})))
    # A shell without job control starts a background command with SIGINT ignored, and an ignored
    # signal stays ignored across exec: run so (`./dev test &` in a script), bxmem would inherit it.
    # With a handler here, bxmem starts with the default, as under an interactive parent.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        thread.start()
        for _ in range(200):  # until the chat is on the server
            if honcho.chats_in_flight:
                break
            time.sleep(0.05)
        assert honcho.chats_in_flight == 1
        if signal_to_send is not None:
            assert host.running is not None
            host.running.send_signal(signal_to_send)
        thread.join(30)
    finally:
        signal.signal(signal.SIGINT, previous)
    return outcome["r"]


def test_sigint_is_exit_130_and_fails_closed(fleet, honcho):
    result = _chats_held(fleet, honcho, signal.SIGINT)
    assert (result.exit, result.label, result.content) == (
        130,
        FAIL_CLOSED,
        "the ask_memory tool failed (bxmem exit 130)",
    )


def test_the_hosts_timeout_sends_sigterm_which_ends_bxmem_by_the_signal(fleet, honcho):
    # Long enough for bxmem to start and reach the chat on a loaded machine: then the host's timeout.
    result = _chats_held(fleet, honcho, timeouts={"ask_memory": 4.0})
    assert (result.exit, result.label) == (-signal.SIGTERM, FAIL_CLOSED)
    assert result.content == "the ask_memory tool failed (bxmem killed by signal 15)"


@pytest.mark.parametrize(
    "code, stdout, stderr",
    [
        (0, '{"schema": "bxmem.recall/1", "label": {"untrusted": false', ""),  # cut short
        (
            0,
            '{"schema": "bxmem.recall/2", "label": {"untrusted": false, "class": "public"}, "text": "x"}',
            "",
        ),  # not this bxmem's
        (7, "", ""),
        (2, "", "bxmem: error: one\nand another line\n"),
        (3, "", ""),  # not a code recall returns
        (-9, "", ""),
    ],
)
def test_anything_but_a_document_or_a_known_refusal_fails_closed(fleet, code, stdout, stderr):
    result = fleet.result("recall", subprocess.CompletedProcess([], code, stdout, stderr))
    assert (result.label, result.is_error) == (FAIL_CLOSED, True)
    what = f"killed by signal {-code}" if code < 0 else f"exit {code}"
    assert result.content == f"the recall tool failed (bxmem {what})"  # nothing of what it printed


def test_every_code_recall_and_ask_can_return_is_exercised_above():
    exercised = {0, 1, 2, 6, 7, 78, 130}
    assert set(COMMAND_EXITS["recall"]) | set(COMMAND_EXITS["ask"]) == exercised


def test_exits_2_6_and_78_come_before_any_memory_is_read(fleet, honcho, config_file, monkeypatch, tmp_path):
    """What section 5 labels them by: neither the local index nor Honcho is read."""
    from helpers import bxmem_inprocess

    from bxmem.store import index

    opened = []

    def open_readonly(self):
        opened.append(self)
        return 1 / 0

    monkeypatch.setattr(index.Index, "open_readonly", open_readonly)
    refused = {
        ("recall", "--json", "--", "   "): 2,
        ("recall", "--json", "-k", "0", "--", "restic"): 2,
        ("ask", "--json", "--", "  "): 2,
        ("ask", "--json", "-w", "stranger", "--", "hi?"): 2,
        ("ask", "--json", "--reasoning", "high", "--", "hi?"): 2,
    }
    for argv, code in refused.items():
        assert bxmem_inprocess(*argv).returncode == code, argv
    saved = config_file.read_text()
    config_file.write_text("")
    assert bxmem_inprocess("ask", "--json", "--", "hi?").returncode == 6
    config_file.write_text(saved)
    assert (
        bxmem_inprocess(
            "recall", "--json", "--", "restic", env={"BXMEM_CONFIG": str(tmp_path / "gone.toml")}
        ).returncode
        == 78
    )
    assert (
        bxmem_inprocess("recall", "--json", "--", "restic", env={"BOXMAKER_HOME": str(tmp_path / "gone")}).returncode
        == 78
    )
    assert opened == [] and honcho.requests == []
    bxmem_inprocess("recall", "--json", "--", "restic")  # the probes do see a read
    assert opened and honcho.requests


@pytest.fixture
def artifact_host(fleet, home, brokerd, config_file):
    """The same host with [artifacts] on: the session `clean` has an exports/ folder."""
    config_file.write_text(config_file.read_text() + "\n[artifacts]\n")
    fleet.refresh()
    exports = home / "sessions" / "clean" / "exports"
    exports.mkdir(parents=True)
    os.chmod(exports, 0o700)
    (exports / "table.csv").write_bytes(b"cohort,response\na,0.4\n")
    write_log(home, "tainted2", turn_lines(1, "read a page", "ok", results=[{"untrusted": True, "class": "public"}]))
    (home / "sessions" / "tainted2" / "exports").mkdir(parents=True)
    os.chmod(home / "sessions" / "tainted2" / "exports", 0o700)
    (home / "sessions" / "tainted2" / "exports" / "page.txt").write_bytes(b"from the web")
    return fleet


def test_the_artifact_tools_run_end_to_end_as_section_8_says(artifact_host):
    host = artifact_host
    assert [t["name"] for t in host.tools()] == ["recall", "ask_memory", "artifact_record", "artifact_resolve"]
    kept = host.call(
        "artifact_record",
        {
            "file": "table.csv",
            "title": "Cohort table",
            "summary": "Response by cohort.",
            "tags": ["cohort", "--json"],
            "source_version": "v1",
        },
        session="clean",
    )
    _seen(kept)
    assert (kept.exit, kept.is_error, kept.label) == (0, False, NOTHING_READ)
    found = re.search(r"exp_[a-z2-7]{52}", kept.content)
    assert found, kept.content
    experiment = found.group()
    got = host.call("artifact_resolve", {"id": experiment, "source_version": "v2"}, session="clean")
    _seen(got)
    assert (got.exit, got.is_error) == (0, False)
    assert got.content.startswith("<<<bxmem artifact ") and "freshness stale" in got.content
    assert "  | Cohort table" in got.content and "  | tags: cohort, --json" in got.content
    assert got.label == {"untrusted": False, "class": "private"}
    path = next(line.removeprefix("path: ") for line in got.content.splitlines() if line.startswith("path: "))
    assert Path(path).read_bytes() == b"cohort,response\na,0.4\n"


def test_resolving_what_a_tainted_session_kept_taints_the_reader(artifact_host):
    kept = artifact_host.call(
        "artifact_record", {"file": "page.txt", "summary": "what the page said"}, session="tainted2"
    )
    assert kept.exit == 0 and "untrusted workspace" in kept.content
    found = re.search(r"art_[a-z2-7]{52}", kept.content)
    assert found, kept.content
    art = found.group()
    got = artifact_host.call("artifact_resolve", {"id": art}, session="clean")
    assert got.exit == 0 and got.label == {"untrusted": True, "class": "private"}


@pytest.mark.parametrize(
    ("tool", "call", "code", "words"),
    [
        ("artifact_record", {"file": "../clean/exports/table.csv", "summary": "s"}, 2, "is not one path component"),
        ("artifact_record", {"file": "nope.csv", "summary": "s"}, 5, "no file 'nope.csv'"),
        ("artifact_record", {"file": "t.csv", "summary": "x" * 2001}, 2, "--summary is 2,001 characters"),
        ("artifact_resolve", {"id": "exp_" + "q" * 52}, 5, "is not on this host"),
        ("artifact_resolve", {"id": "../../etc/passwd"}, 2, "is not an experiment id"),
    ],
)
def test_the_artifact_tools_refusals_give_the_model_one_line_labelled_as_nothing(
    artifact_host, tool, call, code, words
):
    result = artifact_host.call(tool, call, session="clean")
    assert (result.exit, result.is_error, result.label) == (code, True, NOTHING_READ)
    assert result.content.startswith("bxmem: error: ") and words in result.content
    assert "memory/artifacts" not in result.content


def test_a_link_in_exports_and_damaged_bytes_are_lines_too(artifact_host, home):
    exports = home / "sessions" / "clean" / "exports"
    (exports / "link.csv").symlink_to(exports / "table.csv")
    result = artifact_host.call("artifact_record", {"file": "link.csv", "summary": "s"}, session="clean")
    assert (result.exit, result.label) == (6, NOTHING_READ) and "symbolic link" in result.content
    kept = artifact_host.call("artifact_record", {"file": "table.csv", "summary": "s"}, session="clean")
    found = re.search(r"art_[a-z2-7]{52}", kept.content)
    assert found, kept.content
    art = found.group()
    obj = home / "memory" / "artifacts" / "objects" / art[4:6] / art
    os.chmod(obj, 0o600)
    obj.write_bytes(b"cohort,response\na,0.9\n")
    result = artifact_host.call("artifact_resolve", {"id": art}, session="clean")
    assert (result.exit, result.is_error, result.label) == (8, True, NOTHING_READ)
    assert "failed its integrity check" in result.content and str(obj) not in result.content


def test_the_model_cannot_name_a_session_or_a_path(artifact_host):
    result = artifact_host.call(
        "artifact_record", {"file": "table.csv", "summary": "s", "session": "other"}, session="clean"
    )
    assert (result.exit, result.is_error) == (None, True) and "invalid input" in result.content
    result = artifact_host.call("artifact_resolve", {"id": "exp_x", "path": "/etc/passwd"}, session="clean")
    assert result.exit is None and "invalid input" in result.content


def test_every_artifact_input_the_schemas_admit_is_answered_with_a_document_or_one_line(artifact_host):
    """The artifact tools' schemas give names and types alone (the tools budget: docs/decisions.md),
    so the CLI holds the bounds: whatever a schema admits, generated as tests/test_tool_inputs.py
    generates recall's, the model gets a result document or one `bxmem: error:` line (section 8),
    never a failed tool, and a file outside exports/ is never read."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from test_tool_inputs import strategy

    offered = {t["name"]: t["input_schema"] for t in artifact_host.tools()}
    names = st.sampled_from(["table.csv", "page.txt", "../clean/exports/table.csv", "exports", "/etc/passwd", ".", ""])

    @settings(suppress_health_check=list(HealthCheck), max_examples=examples(15), deadline=None)
    @given(st.data())
    def check(data):
        for tool in ("artifact_record", "artifact_resolve"):
            call = data.draw(strategy(offered[tool]))
            if tool == "artifact_record" and data.draw(st.booleans()):
                call["file"] = data.draw(names)
            result = artifact_host.call(tool, call, session="clean")
            assert result.label != FAIL_CLOSED and result.exit in (0, 2, 5, 6, 8), (tool, call, result.exit, result.log)
            if result.is_error:
                assert result.content.startswith("bxmem: error: ") and result.label == NOTHING_READ, (
                    call,
                    result.content,
                )

    check()
