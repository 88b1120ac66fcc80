"""The one place that reads recall's and ask's output.

Every case asserts on what this module extracts, never on the JSON directly,
so when the output contract changes only this file is re-pointed. It reads
the output contract: bxmem/schemas/recall.schema.json (`bxmem.recall/1`)
and ask.schema.json (`bxmem.ask/2`), whose `text` is the model-facing text
framed as bxmem/retrieval/render.py describes (a nonce fence, `[n] ` headers, every
stored line behind CONTENT). Any other shape does not parse: a case that
reads it fails rather than guessing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from bxmem.retrieval.token_bound import bound as token_bound

# The output contract's bounds on what the model sees (bxmem/schemas/recall.schema.json).
MAX_K = 8
HIT_CHARS = 600
OUTPUT_TOKENS = 1_200
ANSWER_CHARS = 4_000

# Characters neutralise() must have removed from anything shown to the agent.
INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The frame (bxmem/retrieval/render.py): a header starts a line with "[n] "; a stored text's
# every line starts with CONTENT; the fences carry a 16-hex-digit nonce.
HIT_HEADER = re.compile(r"^\[(\d+)\] ")
CONTENT = "  | "
OPENING = re.compile(r"^<<<bxmem (recall|ask|artifact) ([0-9a-f]{16}): .*>>>$")
# bxmem's own lines after the hits: a source that did not answer, no hits, hits left out.
TAIL = re.compile(r"^(?:[A-Za-z0-9_.:,@+=/ -]+: unavailable \([^\n]*\)|\(no hits\)|\(\d+ more hits? left out[^\n]*\))$")


def estimate_tokens(text: str) -> int:
    """The contract's bound is in o200k_base tokens: retrieval/token_bound.py's bound, never below the
    real count for any text (tests/test_tokens.py holds it to the real tokenizer)."""
    return token_bound(text)


@dataclass
class Hit:
    text: str
    tag: str | None
    trust_class: str | None
    source: str | None
    workspace: str | None = None
    agent: str | None = None
    peer: str | None = None
    session: str | None = None
    date: str | None = None
    retracted: bool = False
    where: str | None = None


@dataclass
class Recall:
    ok: bool  # the output parsed
    hits: list[Hit] = field(default_factory=list)
    untrusted: bool | None = None
    trust_class: str | None = None
    answered: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    raw_chars: int = 0
    version: object = None
    text: str = ""  # the model-facing text
    omitted: int = 0
    seconds: float = 0.0  # the run's wall time (Ctx.recall sets it)


@dataclass
class Answer:
    name: str
    workspace: str | None
    tag: str | None
    trust_class: str | None
    text: str
    peers: list[str] = field(default_factory=list)


@dataclass
class Ask:
    ok: bool
    answers: list[Answer] = field(default_factory=list)
    untrusted: bool | None = None
    trust_class: str | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    raw_chars: int = 0
    text: str = ""


def _label(data: dict) -> tuple[bool | None, str | None]:
    label = data.get("label") or {}
    return label.get("untrusted"), label.get("class")


def _document(stdout: str, schema: str) -> dict | None:
    """The JSON object on stdout when it is of this contract version, else None."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("schema") == schema else None


def recall(stdout: str) -> Recall:
    data = _document(stdout, "bxmem.recall/1")
    if data is None:
        return Recall(ok=False, raw_chars=len(stdout))
    untrusted, trust_class = _label(data)
    hits = []
    for item in data.get("hits") or []:
        hits.append(
            Hit(
                text=str(item.get("text") or ""),
                tag=item.get("tag"),
                trust_class=item.get("class"),
                source=item.get("source"),
                workspace=item.get("workspace"),
                agent=item.get("agent"),
                peer=item.get("peer"),
                session=item.get("session"),
                date=item.get("date"),
                retracted=bool(item.get("retracted")),
                where=item.get("where"),
            )
        )
    unavailable = {str(e.get("source")): str(e.get("reason") or "") for e in data.get("unavailable") or []}
    return Recall(
        True,
        hits,
        untrusted,
        trust_class,
        list(data.get("answered") or []),
        unavailable,
        len(stdout),
        data["schema"],
        str(data.get("text") or ""),
        int(data.get("omitted") or 0),
    )


def _peers_of(item: dict) -> list[str]:
    """The peers asked by peer chat; none when workspace chat answered (`peers` null)."""
    return [str(p) for p in item.get("peers") or []]


def ask(stdout: str) -> Ask:
    data = _document(stdout, "bxmem.ask/2")
    if data is None:
        return Ask(ok=False, raw_chars=len(stdout))
    untrusted, trust_class = _label(data)
    answers = [
        Answer(
            str(a.get("name")), a.get("workspace"), a.get("tag"), a.get("class"), str(a.get("text") or ""), _peers_of(a)
        )
        for a in data.get("answers") or []
    ]
    unavailable = {str(e.get("name")): str(e.get("reason") or "") for e in data.get("unavailable") or []}
    return Ask(True, answers, untrusted, trust_class, unavailable, len(stdout), str(data.get("text") or ""))


# --- the model-facing text: the fence ---------------------------------------------------


def fence_of(text: str) -> str:
    """The opening fence: the text's first line."""
    return text.split("\n", 1)[0]


def count_of(text: str) -> int:
    """The number of hits (or answers) the opening fence announces; -1 if none."""
    m = re.match(r"^<<<bxmem (?:recall|ask) [0-9a-f]{16}: (\d+) (?:hit|answer)s? ", text)
    return int(m.group(1)) if m else -1


def stored_lines(text: str) -> list[str]:
    """The stored text as shown: every CONTENT line, its prefix removed. A case
    checks that what it planted is here, so the frame checks are not vacuous."""
    return [line[len(CONTENT) :] for line in text.split("\n") if line.startswith(CONTENT)]


def fence_problems(text: str, hits: int) -> list[str]:
    """What would let stored text pass for bxmem's own frame (nothing stored
    may imitate or close the fence, or start a line):
    - the text opens with `<<<bxmem KIND NONCE: ...>>>` and closes with
      `<<<end bxmem KIND NONCE>>>`, and the nonce is on no other line;
    - no character other than LF breaks a line (a model may read CR, VT, FF,
      NEL, LS, PS ... as one: str.splitlines knows them all);
    - every other line is a stored line behind CONTENT, a header `[n] ` at the
      very start of the line (numbered 1..hits, one each), or one of bxmem's
      tail lines. A header indented, or any stored text that got out from behind
      CONTENT, is a line that starts outside the frame: a forgery."""
    lines = text.split("\n")
    opened = OPENING.match(lines[0])
    if not opened:
        return ["the text does not open with a fence line"]
    kind, tag = opened.groups()
    problems = []
    if lines[-1] != f"<<<end bxmem {kind} {tag}>>>" or len(lines) < 2:
        problems.append("the text does not end with its closing fence")
    if text.splitlines() != lines:
        problems.append(f"{len(text.splitlines()) - len(lines)} line break(s) other than LF")
    middle = lines[1:-1]
    if any(tag in line for line in middle):
        problems.append("the fence's nonce appears inside the text")
    headers = [int(m.group(1)) for m in map(HIT_HEADER.match, middle) if m]
    if headers != list(range(1, hits + 1)):
        problems.append(f"{len(headers)} hit headers for {hits} hits")
    outside = [line for line in middle if not (line.startswith(CONTENT) or HIT_HEADER.match(line) or TAIL.match(line))]
    fences = [line for line in outside if line.lstrip().startswith("<<<")]
    if fences:
        problems.append(f"{len(fences)} line(s) imitate the fence")
    if len(outside) > len(fences):
        problems.append(f"{len(outside) - len(fences)} line(s) start outside the frame")
    return problems


def bound_problems(result: Recall, stdout: str, k: int = MAX_K) -> list[str]:
    problems = []
    if len(result.hits) > k:
        problems.append(f"{len(result.hits)} hits > k={k}")
    long = [len(h.text) for h in result.hits if len(h.text) > HIT_CHARS]
    if long:
        problems.append(f"{len(long)} hit(s) over {HIT_CHARS} chars (max {max(long)})")
    if estimate_tokens(result.text) > OUTPUT_TOKENS:
        problems.append(f"text ~{estimate_tokens(result.text)} tokens > {OUTPUT_TOKENS}")
    return problems


def resolved(stdout: str) -> dict | None:
    """`artifact resolve --json`'s document (bxmem/schemas/artifact-resolve.schema.json), or None."""
    return _document(stdout, "bxmem.artifact-resolve/1")


# resolve's own lines between its header and the card's stored lines (bxmem/commands/artifact_doc.py).
RESOLVE_LINES = re.compile(
    r"^(?:path: /\S.*|bytes [0-9,]+ \| sha256 verified \S+ \| \S+ \| freshness [a-z_]+|warning: [^\n]+)$"
)
