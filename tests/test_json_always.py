"""With --json, stdout is one JSON document, always: every command that takes
--json, on every exit code its row in docs/cli.md allows, errors included
(`bxmem.error/1`, bxmem/schemas/error.schema.json). The table of cases is
generated from the commands and their rows: a command or an exit code added
without a case here fails test_every_command_and_code_has_a_case."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from fake_honcho import FakeHoncho
from helpers import bxmem_inprocess, bxmem_main, honcho_config, validate_output, write_log

from bxmem.cli.app import app
from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.errors import COMMAND_EXITS, ExitCode


def json_commands() -> list[str]:
    found = []

    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs is None:
            if any("--json" in getattr(p, "opts", []) for p in command.params):
                found.append(" ".join(path))
            return
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return sorted(found)


BASE = {
    "decide": ["decide"],
    "send": ["send"],
    "mirror": ["mirror"],
    "undo": ["undo", "e1"],
    "recall": ["recall", "backups"],
    "ask": ["ask", "what changed?"],
    "sync": ["sync"],
    "audit": ["audit"],
    "config check": ["config", "check"],
    "outbox list": ["outbox", "list"],
    "outbox drop": ["outbox", "drop", "turn:s:1", "--reason", "gone for good"],
    "outbox resend": ["outbox", "resend", "turn:s:1"],
    "outbox reroute": ["outbox", "reroute", "turn:s:1"],
    "doctor": ["doctor"],
    "artifact record": ["artifact", "record", "--session", "s1", "table.csv", "--summary", "a table"],
    "artifact resolve": ["artifact", "resolve", "art_" + "a" * 52],
    "artifact list": ["artifact", "list"],
    "artifact verify": ["artifact", "verify"],
    "artifact export": ["artifact", "export", "art_" + "a" * 52, "--to", "/tmp/x"],
    "artifact rm": ["artifact", "rm", "art_" + "a" * 52],
}


@dataclass
class Case:
    home: Path
    honcho: FakeHoncho
    brokerd: StubBrokerd
    config_file: Path
    tmp_path: Path
    monkeypatch: pytest.MonkeyPatch

    def honcho_on(self, text: str | None = None) -> None:
        self.config_file.write_text(text or honcho_config(self.honcho.url))

    def decided(self, n: int = 1) -> None:
        write_log(
            self.home, "s", [line for t in range(1, n + 1) for line in turn_lines(t, f"restic backups {t}", "ok")]
        )
        decide.run(config_module.load())

    def sent(self) -> None:
        self.honcho_on()
        self.decided()
        send.run(config_module.load())

    def failed(self) -> None:
        self.honcho_on()
        self.decided()
        self.honcho.inject("status", match=r"/messages$", status=422)
        send.run(config_module.load())

    def held(self) -> None:
        self.honcho_on()
        self.decided()
        self.honcho_on(honcho_config(self.honcho.url).replace('trusted = "bm0-trusted"', 'trusted = "bm0-home"'))

    def journal(self) -> None:
        write_journal(
            self.home,
            [
                {
                    "id": "e1",
                    "ts": "2026-09-27T10:00:00Z",
                    "session": "s",
                    "op": "note",
                    "trust": "trusted",
                    "entry": "restic runs nightly",
                }
            ],
        )
        mirror.run(config_module.load())

    def down(self) -> None:
        self.config_file.write_text(honcho_config("http://127.0.0.1:9"))

    def artifacts(self) -> None:
        """Artifact memory on, a session whose exports/ holds table.csv."""
        self.honcho_on(honcho_config(self.honcho.url) + "\n[artifacts]\n")
        write_log(self.home, "s1", turn_lines(1, "make a table", "done"))
        folder = self.home / "sessions" / "s1" / "exports"
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        (folder / "table.csv").write_bytes(b"a,b\n1,2\n")

    def recorded(self, damaged: bool = False) -> str:
        self.artifacts()
        done = bxmem_inprocess(*BASE["artifact record"], "--json")
        assert done.returncode == 0, done.stderr
        art = json.loads(done.stdout)["artifact_id"]
        if damaged:
            obj = self.home / "memory" / "artifacts" / "objects" / art[4:6] / art
            os.chmod(obj, 0o600)
            obj.write_bytes(b"a,b\n1,3\n")
        return art


def _down_brokerd(c: Case) -> list[str]:
    c.down()
    c.brokerd.stop()
    write_log(c.home, "s", turn_lines(1, "a", "b"))
    return BASE["decide"]


def _held_lock(c: Case) -> list[str]:
    from bxmem.commands.outbox_actions import LOCK_WAIT_S  # noqa: F401  (the wait the command gives a running send)
    from bxmem.store.files import JobLock

    c.failed()
    c.monkeypatch.setattr("bxmem.commands.outbox_actions.LOCK_WAIT_S", 0.1)
    lock = JobLock(c.home / "memory" / "honcho.jsonl", "send")
    assert lock.acquire()
    c.monkeypatch.setattr(Case, "lock", lock, raising=False)  # released with the test's monkeypatch
    return ["sync", "--retry-failed"]


def _undo_of_undo(c: Case) -> list[str]:
    c.journal()
    done = bxmem_inprocess("undo", "e1")
    assert done.returncode == 0, done.stderr
    undo_id = done.stdout.split()[3]
    return ["undo", undo_id]


def _audit_finding(c: Case) -> list[str]:
    c.sent()
    c.honcho.messages.pop()
    return BASE["audit"]


def _doctor(c: Case, state) -> list[str]:
    """doctor on this case's home, its units not asked (this machine's systemd is not the test's)."""
    c.monkeypatch.setattr("bxmem.sources.unit_state.shutil.which", lambda _name: None)
    state(c)
    return BASE["doctor"]


def _asked(c: Case) -> list[str]:
    c.sent()
    return BASE["ask"]


# The cases beyond the four every command shares (1, 2, 78, 130, generated below):
# (command, code) -> what sets the state up, returning the command line (without --json).
SPECIFIC = {
    ("artifact record", 0): lambda c: (c.artifacts(), BASE["artifact record"])[1],
    ("artifact record", 5): lambda c: (c.artifacts(), ["artifact", "record", "--session", "s1", "nope.csv"])[1],
    ("artifact record", 6): lambda c: BASE["artifact record"],  # artifact memory off
    ("artifact resolve", 0): lambda c: ["artifact", "resolve", c.recorded()],
    ("artifact resolve", 5): lambda c: (c.artifacts(), BASE["artifact resolve"])[1],
    ("artifact resolve", 6): lambda c: BASE["artifact resolve"],  # artifact memory off
    ("artifact resolve", 8): lambda c: ["artifact", "resolve", c.recorded(damaged=True)],
    ("artifact list", 0): lambda c: (c.recorded(), BASE["artifact list"])[1],
    ("artifact verify", 0): lambda c: (c.recorded(), BASE["artifact verify"])[1],
    ("artifact verify", 5): lambda c: (c.recorded(), ["artifact", "verify", "art_" + "b" * 52])[1],
    ("artifact verify", 8): lambda c: (c.recorded(damaged=True), BASE["artifact verify"])[1],
    ("artifact export", 0): lambda c: ["artifact", "export", c.recorded(), "--to", str(c.tmp_path / "copy")],
    ("artifact export", 5): lambda c: (
        c.recorded(),
        ["artifact", "export", "art_" + "b" * 52, "--to", str(c.tmp_path / "c")],
    )[1],
    ("artifact export", 6): lambda c: ["artifact", "export", c.recorded(), "--to", str(c.config_file)],  # exists
    ("artifact export", 8): lambda c: [
        "artifact",
        "export",
        c.recorded(damaged=True),
        "--to",
        str(c.tmp_path / "copy"),
    ],
    ("artifact rm", 0): lambda c: ["artifact", "rm", c.recorded()],
    ("artifact rm", 5): lambda c: (c.recorded(), BASE["artifact rm"])[1],
    ("artifact rm", 6): lambda c: (c.recorded(), ["artifact", "rm"])[1],  # nothing named
    ("decide", 0): lambda c: (c.decided(), BASE["decide"])[1],
    ("decide", 3): _down_brokerd,
    ("send", 0): lambda c: BASE["send"],
    ("send", 3): lambda c: (c.down(), c.decided(), BASE["send"])[2],
    ("send", 4): lambda c: (c.held(), BASE["send"])[1],
    ("mirror", 0): lambda c: BASE["mirror"],
    ("undo", 0): lambda c: (c.journal(), ["undo", "e1", "--dry-run"])[1],
    ("undo", 5): lambda c: ["undo", "no-such-edit"],
    ("undo", 6): _undo_of_undo,
    ("recall", 0): lambda c: (c.decided(), BASE["recall"])[1],
    ("recall", 7): lambda c: BASE["recall"],  # local-only, no local index yet: a document with `unavailable`
    ("ask", 0): _asked,
    ("ask", 6): lambda c: BASE["ask"],  # local-only (printed nothing on stdout before)
    ("ask", 7): lambda c: (c.down(), BASE["ask"])[1],
    ("sync", 0): lambda c: BASE["sync"],
    ("sync", 4): lambda c: (c.failed(), BASE["sync"])[1],
    ("sync", 6): _held_lock,
    ("audit", 0): lambda c: (c.sent(), BASE["audit"])[1],
    ("audit", 4): _audit_finding,
    ("audit", 5): lambda c: (c.sent(), ["audit", "--accept", "missing:nowhere:x", "--reason", "r"])[1],
    ("audit", 6): lambda c: BASE["audit"],  # local-only
    ("audit", 7): lambda c: (c.down(), BASE["audit"])[1],  # Honcho did not answer: the audit is incomplete
    ("config check", 0): lambda c: BASE["config check"],
    ("outbox list", 0): lambda c: (c.failed(), BASE["outbox list"])[1],
    ("outbox drop", 0): lambda c: (c.failed(), BASE["outbox drop"])[1],
    ("outbox drop", 5): lambda c: (c.failed(), ["outbox", "drop", "turn:x:9", "--reason", "r"])[1],
    ("outbox drop", 6): lambda c: (c.sent(), BASE["outbox drop"])[1],
    ("outbox resend", 0): lambda c: (c.failed(), BASE["outbox resend"])[1],
    ("outbox resend", 5): lambda c: (c.failed(), ["outbox", "resend", "turn:x:9"])[1],
    ("outbox resend", 6): lambda c: (c.honcho_on(), c.decided(), BASE["outbox resend"])[2],  # pending, not failed
    ("outbox reroute", 0): lambda c: (c.held(), BASE["outbox reroute"])[1],
    ("outbox reroute", 5): lambda c: (c.held(), ["outbox", "reroute", "turn:x:9"])[1],
    ("outbox reroute", 6): lambda c: (c.honcho_on(), c.decided(), BASE["outbox reroute"])[2],
    ("doctor", 0): lambda c: _doctor(c, lambda c: c.honcho_on()),
    ("doctor", 4): lambda c: _doctor(c, lambda c: (c.honcho_on(), c.brokerd.stop())),
    ("doctor", 7): lambda c: _doctor(c, Case.down),
}
# Exits whose stdout is the command's own document; every other one is an error document.
OWN_DOCUMENT = {ExitCode.OK, ExitCode.DEGRADED, ExitCode.ATTENTION}
OWN_DOCUMENT_TOO = {
    ("recall", ExitCode.UNAVAILABLE),
    ("ask", ExitCode.UNAVAILABLE),
    ("doctor", ExitCode.UNAVAILABLE),
    ("artifact verify", ExitCode.INTEGRITY),
}


def _raising(exc: BaseException):
    def load(*_args, **_kwargs):
        raise exc

    return load


def _generic(command: str, code: int):
    if code == ExitCode.USAGE:
        return lambda c: [*BASE[command], "--no-such-option"]
    if code == ExitCode.CONFIG:
        return lambda c: (c.monkeypatch.setenv("BXMEM_CONFIG", str(c.tmp_path / "missing.toml")), BASE[command])[1]
    failure = OSError(5, "Input/output error", "bxmem.toml") if code == ExitCode.ERROR else KeyboardInterrupt()
    return lambda c: (c.monkeypatch.setattr(config_module, "load", _raising(failure)), BASE[command])[1]


GENERIC = (ExitCode.ERROR, ExitCode.USAGE, ExitCode.CONFIG, ExitCode.INTERRUPTED)
TABLE = {**{(cmd, code): _generic(cmd, code) for cmd in BASE for code in GENERIC}, **SPECIFIC}


def test_every_command_and_code_has_a_case():
    assert sorted(BASE) == json_commands()
    assert set(TABLE) == {(cmd, code) for cmd in json_commands() for code in COMMAND_EXITS[cmd]}


@pytest.mark.parametrize(("command", "code"), sorted(TABLE))
def test_stdout_is_one_json_document(command, code, home, brokerd, honcho, config_file, tmp_path, monkeypatch):
    case = Case(home, honcho, brokerd, config_file, tmp_path, monkeypatch)
    argv = TABLE[(command, code)](case)
    result = bxmem_inprocess(*argv, "--json")
    held = getattr(Case, "lock", None)  # _held_lock sets it on the class, for this test only
    if held is not None:
        held.release()
    assert result.returncode == code, (result.returncode, result.stderr)
    document = json.loads(result.stdout)  # exactly one document: nothing before it or after it
    if code in OWN_DOCUMENT or (command, code) in OWN_DOCUMENT_TOO:
        assert document.get("schema") != "bxmem.error/1"
        return
    validate_output("error", document)
    assert document["exit_code"] == code
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line == f"bxmem: error: {document['error']['message']}" or (
        code == ExitCode.INTERRUPTED and line == "bxmem: interrupted"
    )


def test_a_bug_still_leaves_a_document_and_its_traceback(home, monkeypatch):
    monkeypatch.setattr(config_module, "load", _raising(RuntimeError("boom")))
    import contextlib
    import io

    from bxmem.cli.app import run_cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(RuntimeError):
        run_cli(["sync", "--json"])
    document = validate_output("error", json.loads(out.getvalue()))
    assert (
        document["exit_code"] == 1
        and document["error"]["message"] == "unexpected RuntimeError (a bug: the traceback is on stderr)"
    )


def test_the_lean_path_too(home, tmp_path):
    """recall and the timer jobs skip typer: their errors meet the same boundary."""
    bad_k = bxmem_main("recall", "--json", "-k", "0", "backups")
    assert bad_k.returncode == 2 and json.loads(bad_k.stdout)["error"]["code"] == "USAGE"
    missing = bxmem_main("send", "--json", env={"BXMEM_CONFIG": str(tmp_path / "missing.toml")})
    assert missing.returncode == 78 and json.loads(missing.stdout)["error"]["runbook"] == "honcho-config-invalid"
    # A query that is --json after `--` is text, not the option: no document is promised.
    assert bxmem_main("recall", "--", "--json").stdout.startswith("<<<bxmem recall")


def test_retry_failed_with_json_prints_only_the_document(home, brokerd, honcho, configure):
    """Before: "re-queued 1 failed item(s); ..." came first on stdout, before the JSON."""
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(config_module.load())
    honcho.inject("status", match=r"/messages$", status=422)
    send.run(config_module.load())
    result = bxmem_inprocess("sync", "--retry-failed", "--json")
    document = json.loads(result.stdout)
    assert [i["item"] for i in document["requeued"]["items"]] == ["turn:s:1"] and document["failed"] == []
    assert os.environ.get("BXMEM_CONFIG")  # the suite's own config, unchanged
