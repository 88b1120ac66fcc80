"""A minimal Boxmaker home: loopd logs and a memoryd journal (formats: docs/interfaces.md).

boxhome.py init RUN        two sessions and two journal edits, their text tagged with RUN
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

HOME = Path(os.environ.get("BOXMAKER_HOME", Path.home() / ".local/share/boxmaker"))


def ts() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def turn(n: int, text: str, reply: str, speaker: str = "kyle", results: tuple = ()) -> list[dict]:
    t = ts()
    lines = [{"type": "user", "turn": n, "ts": t, "speaker": speaker, "text": text}]
    for i, label in enumerate(results):
        lines.append(
            {
                "type": "tool_call",
                "turn": n,
                "ts": t,
                "id": f"c{i}",
                "tool": "fetch",
                "args": {"url": "https://example.org"},
            }
        )
        lines.append({"type": "tool_result", "turn": n, "ts": t, "id": f"c{i}", "label": label, "text": "<page text>"})
    lines.append({"type": "assistant", "turn": n, "ts": t, "final": False, "text": "let me think"})
    lines.append({"type": "assistant", "turn": n, "ts": t, "final": True, "text": reply})
    lines.append({"type": "turn_end", "turn": n, "ts": t, "status": "completed"})
    return lines


def append_log(session: str, lines: list[dict]) -> None:
    logs = HOME / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{session}.jsonl", "a") as f:  # one write: the turn appears whole
        f.write("".join(json.dumps(line) + "\n" for line in lines))


def append_edit(edit: dict) -> None:
    memory = HOME / "memory"
    memory.mkdir(parents=True, exist_ok=True)
    with open(memory / "journal.jsonl", "a") as f:  # memoryd's rule: flock the journal, append one line
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(edit) + "\n")
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def init(run: str) -> None:
    append_log(
        "s-clean",
        turn(1, f"{run} what did we decide about the backups?", f"{run} nightly restic snapshots")
        + turn(2, f"{run} and where do they go?", f"{run} to the NAS, then offsite weekly"),
    )
    append_log(
        "s-fetched",
        turn(
            1,
            f"{run} summarise the vendor notes",
            f"{run} v2 is deprecated, per the page",
            results=({"untrusted": True, "class": "public"},),
        ),
    )
    append_edit(
        {
            "id": f"j-{run}-1",
            "ts": ts(),
            "session": "s-clean",
            "op": "identity_add",
            "file": "user.md",
            "entry": f"{run} Kyle prefers metric units",
        }
    )
    append_edit(
        {
            "id": f"j-{run}-2",
            "ts": ts(),
            "session": "s-fetched",
            "op": "note",
            "trust": "untrusted",
            "entry": f"{run} the vendor page says v2 is deprecated",
        }
    )


if __name__ == "__main__" and sys.argv[1:2] == ["init"]:
    init(sys.argv[2])
