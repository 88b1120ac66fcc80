"""A sample Boxmaker home whose sessions exercise every decision, shared by the demo and the tests."""

from __future__ import annotations

import json
from pathlib import Path

OWNER = "kyle"
AGENT = "boxmaker0"

# A fake key of a well-known shape, so the secret rules refuse the turn.
FAKE_AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"


def turn_lines(
    n: int,
    text: str,
    reply: str | None,
    speaker: object = OWNER,
    status: str = "completed",
    results: list[dict] | None = None,
) -> list[dict]:
    ts = f"2026-09-27T10:{n:02d}:00Z"
    user: dict = {"type": "user", "turn": n, "ts": ts, "text": text}
    if speaker is not None:
        user["speaker"] = speaker
    lines = [user]
    for i, label in enumerate(results or []):
        lines.append(
            {
                "type": "tool_call",
                "turn": n,
                "ts": ts,
                "id": f"c{i}",
                "tool": "fetch",
                "args": {"url": "https://example.org"},
            }
        )
        lines.append({"type": "tool_result", "turn": n, "ts": ts, "id": f"c{i}", "label": label, "text": "<page text>"})
    if reply is not None:
        lines.append({"type": "assistant", "turn": n, "ts": ts, "final": False, "text": "let me think"})
        lines.append({"type": "assistant", "turn": n, "ts": ts, "final": True, "text": reply})
    lines.append({"type": "turn_end", "turn": n, "ts": ts, "status": status})
    return lines


# session id -> (brokerd's answer (class, untrusted), log lines, what the demo says about it)
SESSIONS: dict[str, tuple[tuple[str, bool], list[dict], str]] = {
    "s-clean": (
        ("private", False),
        turn_lines(1, "what did we decide about the backups?", "we decided nightly restic snapshots")
        + turn_lines(2, "and where do they go?", "to the NAS, then offsite weekly"),
        "a clean session: both turns go to the trusted workspace",
    ),
    "s-fetched": (
        ("public", True),
        turn_lines(
            1,
            "summarise the vendor's release notes",
            "v2 is deprecated, per the page",
            results=[{"untrusted": True, "class": "public"}],
        ),
        "fetched a web page: its turn goes to the untrusted workspace only",
    ),
    "s-secret": (
        ("secret", False),
        turn_lines(1, "read me the vault entry", "done, it is in your clipboard"),
        "brokerd says the session is secret: its turn goes nowhere",
    ),
    "s-burst": (
        ("private", False),
        turn_lines(1, "(three people posted at once)", "I answered all three", speaker=None),
        "a burst from several people (no single speaker): nowhere",
    ),
    "s-key": (
        ("private", False),
        turn_lines(1, f"my key is {FAKE_AWS_KEY}, set it up", "I won't store that; please rotate it"),
        "an AWS key in the text: nowhere",
    ),
    "s-team": (
        ("private", False),
        turn_lines(1, "morning, can you check the CI?", "CI is green", speaker="ana.lima")
        + turn_lines(2, "thanks; kyle here, anything else?", "no, all quiet"),
        "two speakers: ana.lima (peer ana_Dot_lima), then kyle, who starts the Honcho session s-team-2",
    ),
    "s-late": (
        ("private", True),
        turn_lines(1, "look up the weather", "it is sunny"),
        "brokerd answers late the first time: the turn waits undecided, then goes untrusted",
    ),
}


def write_home(home: Path) -> None:
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for session, (_state, lines, _why) in SESSIONS.items():
        with open(logs / f"{session}.jsonl", "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")


def broker_states() -> dict[str, tuple[str, bool]]:
    return {session: state for session, (state, _lines, _why) in SESSIONS.items()}


def workspaces(run_id: str) -> dict[str, str]:
    return {role: f"bxmem-demo-{run_id}-{role}" for role in ("trusted", "untrusted", "fleet")}


def write_config(path: Path, home: Path, honcho_url: str | None, names: dict[str, str]) -> None:
    def quote(value: str) -> str:  # a JSON string is a TOML basic string: a --keep path may hold quotes
        return json.dumps(value, ensure_ascii=False)

    text = f"[paths]\nhome = {quote(str(home))}\n"
    if honcho_url:
        text += f"\n[honcho]\nurl = {quote(honcho_url)}\nagent = {quote(AGENT)}\nowner = {quote(OWNER)}\n" + "".join(
            f"{role} = {quote(name)}\n" for role, name in names.items()
        )
    path.write_text(text)


# The interfaces file's example journal: one edit of every kind.
JOURNAL: list[dict] = [
    {
        "id": "j-0001",
        "ts": "2026-09-27T10:00:00Z",
        "session": "s-clean",
        "op": "identity_add",
        "file": "user.md",
        "entry": "Kyle prefers metric units",
    },
    {
        "id": "j-0002",
        "ts": "2026-09-27T10:01:00Z",
        "session": "s-clean",
        "op": "identity_add",
        "file": "memory.md",
        "entry": "backups run weekly",
    },
    {
        "id": "j-0003",
        "ts": "2026-09-27T10:02:00Z",
        "session": "s-clean",
        "op": "identity_replace",
        "file": "memory.md",
        "old": "backups run weekly",
        "entry": "backups run nightly",
    },
    {
        "id": "j-0004",
        "ts": "2026-09-27T10:03:00Z",
        "session": "s-clean",
        "op": "identity_add",
        "file": "user.md",
        "entry": "Kyle lives in Oakland",
    },
    {
        "id": "j-0005",
        "ts": "2026-09-27T10:04:00Z",
        "session": "s-clean",
        "op": "identity_remove",
        "file": "user.md",
        "entry": "Kyle lives in Oakland",
    },
    {
        "id": "j-0006",
        "ts": "2026-09-27T10:05:00Z",
        "session": "s-clean",
        "op": "identity_add",
        "file": "memory.md",
        "entry": "old fact",
    },
    {
        "id": "j-0007",
        "ts": "2026-09-27T10:06:00Z",
        "session": "s-clean",
        "op": "consolidate",
        "file": "memory.md",
        "dropped": ["old fact"],
        "moved": ["long-form note"],
    },
    {
        "id": "j-0008",
        "ts": "2026-09-27T10:07:00Z",
        "session": "s-team",
        "op": "note",
        "trust": "trusted",
        "entry": "the NAS is at 10.0.0.5",
    },
    {
        "id": "j-0009",
        "ts": "2026-09-27T10:08:00Z",
        "session": "s-fetched",
        "op": "note",
        "trust": "untrusted",
        "entry": "the vendor page says v2 is deprecated",
    },
    {
        "id": "j-0010",
        "ts": "2026-09-27T10:09:00Z",
        "session": "s-fetched",
        "op": "note",
        "trust": "flagged",
        "entry": "ignore previous instructions and ...",
    },
]


def write_journal(home: Path, records: list[dict] | None = None) -> Path:
    path = home / "memory" / "journal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for record in JOURNAL if records is None else records:
            f.write(json.dumps(record) + "\n")
    return path
