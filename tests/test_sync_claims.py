"""`bxmem sync` claims only what it checked, when it checked it, and prints it
whole: escaped for rich, unwrapped off a terminal (issue 12, items 1, 6, 7, 8)."""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime

from helpers import bxmem_inprocess, bxmem_main, run_bxmem, write_log
from runbook_lines import cites

from bxmem.demo.sample import turn_lines, write_journal


def sync_json(**kwargs):
    result = bxmem_inprocess("sync", "--json", **kwargs)
    return result.returncode, json.loads(result.stdout)


def recent(ts: str) -> bool:
    then = datetime.fromisoformat(ts)
    return abs((datetime.now(UTC) - then).total_seconds()) < 60


def test_nothing_answering_and_nothing_tried_is_never_called_fine(home, configure):
    configure("http://127.0.0.1:9")  # nothing listens there; no brokerd socket either
    (home / "run" / "memory-broker").mkdir(parents=True, mode=0o700)
    _code, report = sync_json()
    brokerd, honcho = report["checks"]["brokerd"], report["checks"]["honcho"]
    assert brokerd["ok"] is False and "no socket" in brokerd["problem"] and recent(brokerd["checked_at"])
    assert brokerd["deadline_s"] == 2
    assert honcho["ok"] is False and recent(honcho["checked_at"]) and honcho["deadline_s"] == 5
    plain = bxmem_inprocess("sync")
    out = plain.stdout.splitlines()
    assert any(line.startswith("brokerd now: cannot answer: no socket at ") for line in out), out
    assert any(line.startswith("Honcho now: not answering: ") and "(checked 20" in line for line in out), out
    assert "Honcho as send recorded: no outage; nothing sent yet" in out
    assert not any("answering (" in line or "brokerd: answering" in line for line in out), out
    assert "Honcho: no outage" not in plain.stdout


def test_what_answers_is_said_to_answer_with_the_time(home, brokerd, honcho, configure):
    configure(honcho.url)
    code, report = sync_json()
    assert code == 0 and report["attention"] == []
    assert report["checks"]["brokerd"]["ok"] is True and report["checks"]["honcho"]["ok"] is True
    assert brokerd.requests, "brokerd was asked"
    out = bxmem_inprocess("sync").stdout.splitlines()
    assert any(line.startswith("brokerd now: answering (checked ") for line in out), out
    assert any(line.startswith("Honcho now: answering (/health ok) (checked ") for line in out), out
    assert "key for bm0-trusted: no key file configured; requests go without a key" in out


def test_not_checked_says_so(home, configure):
    from bxmem.commands import sync
    from bxmem.config import loader as config

    configure("http://127.0.0.1:9")
    report = sync.status(config.load(), check=False)
    text = sync.lines(report)
    assert "Honcho now: not checked: sync ran without checks" in text
    assert "brokerd now: not checked: sync ran without checks" in text


def key_with_mode(tmp_path, mode):
    key = tmp_path / "t.key"
    key.write_text("k-123\n")
    os.chmod(key, mode)
    return key


def test_a_key_send_would_refuse_needs_attention(home, brokerd, honcho, configure, tmp_path):
    key = key_with_mode(tmp_path, 0o644)
    configure(honcho.url, extra=f'[secrets.honcho_trusted]\nfile = "{key}"\n')
    assert bxmem_main("send").returncode == 3  # what send does with it: that workspace stops
    code, report = sync_json()
    assert code == 4
    entry = next(k for k in report["keys"] if k["workspace"] == "bm0-trusted")
    problem = f"secrets.honcho_trusted: key file {key} has mode 0644: group or others can read it (chmod 600 it)"
    assert entry["ok"] is False and entry["problem"] == problem and recent(entry["checked_at"])
    assert (
        f"{problem}: sends to bm0-trusted stop until it is fixed" + cites("honcho-key-refused") in report["attention"]
    )
    assert [(k["workspace"], k["status"], k["problem"]) for k in report["keys_refused"]] == [
        ("bm0-trusted", None, problem)
    ]
    plain = bxmem_inprocess("sync")
    assert plain.returncode == 4
    key_line = next(line for line in plain.stdout.splitlines() if line.startswith("key for bm0-trusted:"))
    assert "send would refuse it" in key_line and " ok " not in key_line
    os.chmod(key, 0o600)
    code, report = sync_json()
    assert next(k for k in report["keys"] if k["workspace"] == "bm0-trusted")["ok"] is True
    assert code == 4 and report["keys_refused"]  # what send recorded holds until send reads the file again
    assert bxmem_main("send").returncode == 0
    code, report = sync_json()
    assert code == 0 and not report["keys_refused"]


def test_a_symlinked_key_needs_attention_too(home, brokerd, honcho, configure, tmp_path):
    real = key_with_mode(tmp_path, 0o600)
    link = tmp_path / "link.key"
    link.symlink_to(real)
    configure(honcho.url, extra=f'[secrets.honcho_fleet]\nfile = "{link}"\n')
    code, report = sync_json()
    assert code == 4 and any("is a symbolic link" in line for line in report["attention"])


def test_brackets_are_text_never_markup(home, configure, tmp_path, monkeypatch):
    odd_home = tmp_path / "[bold]box[red]"
    odd_home.mkdir()
    monkeypatch.setenv("BOXMAKER_HOME", str(odd_home))
    result = bxmem_inprocess("sync")
    out = result.stdout.splitlines()
    assert (
        out[0]
        == f"nothing needs attention yet; waiting: brokerd does not answer now ({odd_home}/run/memory-broker does not exist)"
    )
    assert out[1] == "local-only: no [honcho] section, nothing is sent"
    assert out[2].startswith(f"brokerd now: cannot answer: {odd_home}/run/memory-broker does not exist (checked ")


def test_on_a_terminal_the_lines_are_the_same_text(home, configure):
    """rich renders for a person at a terminal; what it prints is exactly sync's lines."""
    from rich.console import Console

    from bxmem.cli import output as jobs
    from bxmem.commands import sync
    from bxmem.config import loader as config

    configure("http://127.0.0.1:9")
    report = sync.status(config.load(), check=False)
    report["attention"].append("a reason with [red]brackets[/red] and [honcho]")
    buffer = io.StringIO()
    jobs.render_sync(report, Console(file=buffer, force_terminal=True, color_system=None, width=400))
    assert buffer.getvalue() == "\n".join(sync.lines(report)) + "\n"
    assert "attention: a reason with [red]brackets[/red] and [honcho]" in buffer.getvalue()


def test_the_demo_keeps_its_brackets(home):
    result = run_bxmem("demo", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "local-only: no [honcho] section, nothing is sent" in result.stdout


def test_off_a_terminal_nothing_is_wrapped_or_cut(home, brokerd, honcho, configure, tmp_path):
    long = "w" * 60
    configure(honcho.url)
    text = (tmp_path / "bxmem.toml").read_text()
    text = text.replace('trusted = "bm0-trusted"', f'trusted = "{long}-trusted"').replace(
        'fleet = "fleet"', f'fleet = "{long}-fleet"'
    )
    key = key_with_mode(tmp_path, 0o640)
    (tmp_path / "bxmem.toml").write_text(text + f'[secrets.honcho_untrusted]\nfile = "{key}"\n')
    write_log(home, "a-rather-long-session-name-" + "s" * 40, turn_lines(1, "hello", "hi"))
    bxmem_main("decide")
    result = bxmem_inprocess("sync", env={"COLUMNS": "80"})
    assert result.returncode == 4
    out = result.stdout.splitlines()
    outbox = [line for line in out if line.startswith(f"outbox {long}-trusted (trusted): 1 turn(s)")]
    assert len(outbox) == 1 and "oldest turn:a-rather-long-session-name-" + "s" * 40 + ":1" in outbox[0]
    attention = [line for line in out if line.startswith("attention: ")]
    assert len(attention) == 1 and attention[0].endswith(cites("honcho-key-refused")) and len(attention[0]) > 80
    assert not any(line.startswith(" ") or "…" in line for line in out), out
    from bxmem.commands import sync

    _code, report = sync_json(env={"COLUMNS": "80"})
    assert len(out) == len(sync.lines(report))  # one printed line per fact, no more


def test_decisions_made_while_local_only_are_counted_and_never_sent(home, brokerd, honcho, configure):
    write_log(home, "s", turn_lines(1, "hello", "hi") + turn_lines(2, "k", "v"))
    write_journal(
        home,
        [{"id": "e1", "ts": "2026-09-27T10:00:00Z", "session": "s", "op": "note", "trust": "trusted", "entry": "x"}],
    )
    assert bxmem_main("decide").returncode == 0 and bxmem_main("mirror").returncode == 0  # local-only: empty config
    configure(honcho.url)
    assert bxmem_main("send").returncode == 0
    assert honcho.messages_in("bm0-trusted") == []  # seed 000: Honcho is not rebuilt from the logs
    _code, report = sync_json()
    assert report["decided_local_only"] == {"turns": 2, "edits": 1, "cards": 0}
    out = bxmem_inprocess("sync").stdout.splitlines()
    assert "decided while local-only: 2 turn(s), 1 edit(s); never sent (Honcho is not rebuilt from the logs)" in out


def test_the_local_only_lines_are_exactly_these(home):
    """A local-only home with no brokerd: the whole plain output, only the check's
    time left out (it is the moment it ran)."""
    import re

    result = bxmem_inprocess("sync")
    assert (result.returncode, result.stderr) == (0, "")
    stamp = re.compile(r"\(checked \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z, ")
    assert stamp.sub("(checked TIME, ", result.stdout) == (
        f"nothing needs attention yet; waiting: brokerd does not answer now ({home}/run/memory-broker does not exist)\n"
        "local-only: no [honcho] section, nothing is sent\n"
        f"brokerd now: cannot answer: {home}/run/memory-broker does not exist (checked TIME, 2 s deadline)\n"
        "brokerd as decide recorded: no outage; 0 turn(s) undecided\n"
        "sent: 0 item(s); last at never\n"
    )
