"""The README's first command: the demo, local only and against a Honcho server."""

from __future__ import annotations

from conftest import run_bxmem


def test_demo_local_only_explains_every_decision(tmp_path):
    result = run_bxmem("demo", "--keep", str(tmp_path / "d"))
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    for session in ("s-clean", "s-fetched", "s-secret", "s-burst", "s-key", "s-team", "s-late"):
        assert session in out
    assert "1 waiting" in out and "local-only" in out
    assert "secret-in-text" in out and "secret-session" in out and "no-speaker" in out


def test_demo_sends_to_the_given_honcho(tmp_path, honcho):
    result = run_bxmem("demo", "--honcho", honcho.url, "--keep", str(tmp_path / "d"))
    assert result.returncode == 0, result.stderr
    assert "send: 15 items (12 turn messages, plus conclusions)" in " ".join(result.stdout.split())
    assert {m["workspace_id"] for m in honcho.messages} == {"boxmaker0-trusted", "boxmaker0-untrusted", "fleet"}
    assert {c["content"] for c in honcho.conclusions.values()} == {"Kyle prefers metric units", "backups run nightly", "the NAS is at 10.0.0.5"}
