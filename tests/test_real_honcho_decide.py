"""decide and send against a real Honcho (opt-in): what fails closed on the decide
side holds end to end. Skipped unless a server is given (auth off):

    BXMEM_REAL_HONCHO_URL=http://127.0.0.1:8000

Workspaces are named for the run (`i17a-<run>-trusted` and so on), so reruns and
other users of a shared server never meet. Three sessions and two edits:

* `clean-<run>`: one clean turn: in the trusted workspace;
* `taint-<run>`: a tool result labelled untrusted and secret whose `turn` is a
  string, before the reply: nowhere, and no Honcho session for it at all;
* `swap-<run>`: a clean turn decided, then its log replaced by one holding a
  tool result of the same length at the user line's span: failed, not posted;
* journal: an add whose line is rewritten after mirror (same length), and one
  left alone: only the second becomes a conclusion.
"""

from __future__ import annotations

import json
import os
import secrets

import pytest
from helpers import run_bxmem, write_log

from bxmem.demo.brokerd import StubBrokerd
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.honcho.client import AuditClient, Missing, WorkspaceClient

URL = os.environ.get("BXMEM_REAL_HONCHO_URL", "")
pytestmark = pytest.mark.skipif(not URL, reason="no real Honcho given (BXMEM_REAL_HONCHO_URL)")


def test_unreadable_lines_and_changed_spans_never_reach_a_real_honcho(home, tmp_path):
    run = secrets.token_hex(4)
    config = tmp_path / "bxmem.toml"
    config.write_text(
        f'[honcho]\nurl = "{URL}"\nagent = "boxmaker0"\nowner = "kyle"\ntrusted = "i17a-{run}-trusted"\n'
        f'untrusted = "i17a-{run}-untrusted"\nfleet = "i17a-{run}-fleet"\n'
    )
    env = {"BOXMAKER_HOME": str(home), "BXMEM_CONFIG": str(config)}
    write_log(home, f"clean-{run}", turn_lines(1, f"the backups {run} run nightly", "noted"))
    taint = turn_lines(1, "what's the vault password?", f"it is hunter2-{run}")
    bad = {"type": "tool_result", "turn": "1", "label": {"untrusted": True, "class": "secret"}, "text": "..."}
    write_log(home, f"taint-{run}", [taint[0], bad, *taint[1:]])
    swap = write_log(home, f"swap-{run}", turn_lines(1, f"the owner's own words {run}", "ok"))
    write_journal(
        home,
        [
            {
                "id": f"a{run}",
                "ts": "2026-12-01T10:00:00Z",
                "session": f"clean-{run}",
                "op": "identity_add",
                "file": "user.md",
                "entry": f"Kyle prefers metric units {run}",
            },
            {
                "id": f"b{run}",
                "ts": "2026-12-01T10:00:00Z",
                "session": f"clean-{run}",
                "op": "identity_add",
                "file": "user.md",
                "entry": f"Kyle keeps the NAS at home {run}",
            },
        ],
    )
    with StubBrokerd(home / "run" / "memory-broker" / "state.sock"):
        decided = json.loads(run_bxmem("decide", "--json", env=env).stdout)
        assert decided["decided"] == {"none/log-unreadable": 1, "trusted/clean": 2}, decided
    assert run_bxmem("mirror", env=env).returncode == 0
    lines = swap.read_bytes().splitlines(keepends=True)
    page = {"type": "tool_result", "turn": 1, "label": {"untrusted": True, "class": "public"}, "text": ""}
    page["text"] = "P" * (len(lines[0]) - len(json.dumps(page).encode()) - 1)
    (tmp_path / "new.jsonl").write_bytes(json.dumps(page).encode() + b"\n" + b"".join(lines[1:]))
    (tmp_path / "new.jsonl").replace(swap)
    journal = home / "memory" / "journal.jsonl"
    journal.write_bytes(journal.read_bytes().replace(b"metric units", b"imperial!!!!"))

    sent = run_bxmem("send", "--json", env=env)
    print("$ bxmem send --json\n" + sent.stdout + sent.stderr)
    report = json.loads(sent.stdout)
    assert (report["sent"], report["failed"]) == (2, 2), report  # the clean turn and edit b go; the swapped two fail

    trusted = WorkspaceClient(URL, f"i17a-{run}-trusted", None)
    clean = [m["content"] for m in trusted.list_messages(f"clean-{run}")]
    assert clean == [f"the backups {run} run nightly", "noted"]
    for session in (f"taint-{run}", f"swap-{run}"):
        try:
            assert list(trusted.list_messages(session)) == []  # nothing of it was posted
        except Missing:
            pass  # the session was never made at all
    conclusions = [c["content"] for c in trusted.list_conclusions({"observer_id": "kyle", "observed_id": "kyle"})]
    assert conclusions == [f"Kyle keeps the NAS at home {run}"]
    for ws in ("untrusted", "fleet"):
        client = AuditClient(URL, f"i17a-{run}-{ws}", None)
        try:
            assert list(client.sessions()) == []
        except Missing:
            pass
        client.close()
    status = run_bxmem("sync", "--json", env=env)
    failed = sorted(f["item"] for f in json.loads(status.stdout)["failed"])
    print("$ bxmem sync --json (failed)\n" + json.dumps(json.loads(status.stdout)["failed"], indent=1))
    assert failed == [f"edit:a{run}", f"turn:swap-{run}:1"]
    trusted.close()
