"""The one place that reads recall's and ask's output.

Every case asserts on what this module extracts, never on the JSON directly,
so when the output contract changes (issue 11: a versioned schema, a date and
a workspace on every hit, peers named by ask) only this file is re-pointed.
It reads today's shape and the issue 11 names where they differ.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

# Issue 11's bounds on what the model sees.
MAX_K = 8
HIT_CHARS = 600
OUTPUT_TOKENS = 1_200
ANSWER_CHARS = 4_000

# Characters neutralise() must have removed from anything shown to the agent.
INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A hit header in the plain output, at the start of a line (today: "[3] local | memory | private ...").
HIT_HEADER = re.compile(r"^\[\d+\] ")


def estimate_tokens(text: str) -> int:
    """Cheap, as recall itself must be: about four characters a token for
    English (o200k_base averages a little more; the bench checks it)."""
    return math.ceil(len(text) / 4)


@dataclass
class Hit:
    text: str
    tag: str | None
    klass: str | None
    source: str | None
    workspace: str | None = None
    agent: str | None = None
    peer: str | None = None
    session: str | None = None
    date: str | None = None
    retracted: bool = False


@dataclass
class Recall:
    ok: bool  # the output parsed
    hits: list[Hit] = field(default_factory=list)
    untrusted: bool | None = None
    klass: str | None = None
    answered: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    raw_chars: int = 0
    version: object = None


@dataclass
class Answer:
    name: str
    workspace: str | None
    tag: str | None
    klass: str | None
    text: str
    peers: list[str] = field(default_factory=list)


@dataclass
class Ask:
    ok: bool
    answers: list[Answer] = field(default_factory=list)
    untrusted: bool | None = None
    klass: str | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    raw_chars: int = 0


def _label(data: dict) -> tuple[bool | None, str | None]:
    label = data.get("label") or {}
    return label.get("untrusted"), label.get("class")


def _session_of(item: dict) -> str | None:
    if item.get("session"):
        return item["session"]
    where = item.get("where") or ""  # today: "s-1, turn 3" or "message in s-1" or "note in s-1"
    m = re.match(r"^(?:message in |note in )?([A-Za-z0-9_-]+)(?:, turn \d+)?$", where)
    return m.group(1) if m and where not in ("identity", "note", "conclusion") else None


def recall(stdout: str) -> Recall:
    try:
        data = json.loads(stdout)
    except ValueError:
        return Recall(ok=False, raw_chars=len(stdout))
    if not isinstance(data, dict):
        return Recall(ok=False, raw_chars=len(stdout))
    untrusted, klass = _label(data)
    hits = []
    for item in data.get("hits") or []:
        hits.append(Hit(
            text=str(item.get("text") or ""),
            tag=item.get("tag"),
            klass=item.get("class"),
            source=item.get("source"),
            workspace=item.get("workspace"),
            agent=item.get("agent"),
            peer=item.get("peer"),
            session=_session_of(item),
            date=item.get("date") or item.get("ts"),
            retracted=bool(item.get("retracted")),
        ))
    unavailable = {}
    for entry in data.get("unavailable") or []:
        name = entry.get("source") or entry.get("workspace") or entry.get("name") or "?"
        unavailable[str(name)] = str(entry.get("reason") or "")
    return Recall(True, hits, untrusted, klass, list(data.get("answered") or []), unavailable, len(stdout),
                  data.get("version") or data.get("schema"))


def _peers_of(item: dict) -> list[str]:
    if isinstance(item.get("peers"), list):
        return [str(p) for p in item["peers"]]
    note = item.get("note") or ""  # today: "... answered by peer chat on kyle"
    m = re.search(r"peer chat on (.+)$", note)
    return [p.strip() for p in re.split(r",| and ", m.group(1)) if p.strip()] if m else []


def ask(stdout: str) -> Ask:
    try:
        data = json.loads(stdout)
    except ValueError:
        return Ask(ok=False, raw_chars=len(stdout))
    if not isinstance(data, dict):
        return Ask(ok=False, raw_chars=len(stdout))
    untrusted, klass = _label(data)
    answers = [Answer(str(a.get("name")), a.get("workspace"), a.get("tag"), a.get("class"), str(a.get("text") or ""),
                      _peers_of(a)) for a in data.get("answers") or []]
    unavailable = {}
    for entry in data.get("unavailable") or []:
        unavailable[str(entry.get("workspace") or entry.get("name") or entry.get("source"))] = str(entry.get("reason") or "")
    return Ask(True, answers, untrusted, klass, unavailable, len(stdout))


# --- the plain output: the fence -------------------------------------------------------


def fence_of(plain: str) -> str:
    """The fence is the output's first line (issue 11: "the text starts with one
    fence line saying what it is")."""
    return plain.split("\n", 1)[0]


def fence_problems(plain: str, hits: int) -> list[str]:
    """What lets stored text pass for the frame: another line that reads as the
    fence (whatever its indent), or more hit headers than there are hits."""
    lines = plain.split("\n")
    fence = lines[0].strip()
    problems = []
    if not fence:
        return ["the output does not start with a fence line"]
    head = fence[:24]
    imitations = [n for n, line in enumerate(lines[1:], 2) if line.strip().startswith(head)]
    if imitations:
        problems.append(f"{len(imitations)} line(s) imitate the fence")
    headers = sum(1 for line in lines if HIT_HEADER.match(line.lstrip()))
    if headers > hits:
        problems.append(f"{headers} hit headers for {hits} hits")
    return problems


def bound_problems(result: Recall, stdout: str, k: int = MAX_K) -> list[str]:
    problems = []
    if len(result.hits) > k:
        problems.append(f"{len(result.hits)} hits > k={k}")
    long = [len(h.text) for h in result.hits if len(h.text) > HIT_CHARS]
    if long:
        problems.append(f"{len(long)} hit(s) over {HIT_CHARS} chars (max {max(long)})")
    if estimate_tokens(stdout) > OUTPUT_TOKENS:
        problems.append(f"output ~{estimate_tokens(stdout)} tokens > {OUTPUT_TOKENS}")
    return problems
