"""`bxmem ask QUESTION`: Honcho's dialectic over named workspaces (seed section 9).

Names: `own` (the agent's trusted workspace, the default), `untrusted`,
`fleet`, or an agent from `[[honcho.read]]`; an unknown name is refused before
any call. One workspace chat per name, at most two at a time, each with its
own 150 s limit. A server without workspace chat (before 3.2) is asked by
peer chat on the owner's peer instead, and the answer says so.

Reading never creates: a workspace bxmem has not set up itself is asked only
after `workspaces/list` shows it exists (Honcho 3.0 creates a missing
workspace, with reasoning on, even for a peer chat).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from .config import Config, read_key
from .errors import Refused, UsageError
from .recall import snippet
from .labels import label_of

ASK_TIMEOUT_S = 150.0
READ_TIMEOUT_S = 180.0
MAX_QUESTION_CHARS = 2_000
AT_ONCE = 2
REASONING = ("minimal", "low")
ANSWER_CHARS = 4_000


@dataclass
class Target:
    name: str  # as the caller named it
    role: str  # config role
    tag: str
    klass: str


@dataclass
class Answer:
    name: str
    workspace: str
    tag: str
    klass: str
    text: str
    note: str | None = None

    def as_json(self) -> dict:
        return {"name": self.name, "workspace": self.workspace, "tag": self.tag, "class": self.klass,
                "text": self.text, "note": self.note}


@dataclass
class AskResult:
    answers: list[Answer] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def untrusted(self) -> bool:
        return label_of(self.answers)[0]

    @property
    def klass(self) -> str:
        return label_of(self.answers)[1]


def targets(config: Config, names: list[str]) -> list[Target]:
    if config.honcho is None:
        raise Refused("bxmem is local-only (no [honcho] section): there is no workspace to ask")
    known = {
        "own": Target("own", "trusted", "memory", "private"),
        "untrusted": Target("untrusted", "untrusted", "memory-tainted", "private"),
        "fleet": Target("fleet", "fleet", "memory-tainted", "private"),
    }
    for source in config.honcho.read:
        known[source.agent] = Target(source.agent, f"read:{source.agent}",
                                     "memory" if source.trust == "trusted" else "memory-tainted", source.class_)
    chosen = []
    for name in names or ["own"]:
        if name not in known:
            raise UsageError(f"unknown workspace name {name!r} (known: {', '.join(known)})")
        if known[name] not in chosen:
            chosen.append(known[name])
    return chosen


def _already_set_up(config: Config) -> set[str]:
    from .outbox import Outbox

    box = Outbox.read_checkpoint(config.paths.state) or {}
    return {ws for ws, state in (box.get("setup") or {}).items() if state.get("configured")}


def _ask_one(config: Config, target: Target, question: str, reasoning: str, set_up: set[str]) -> Answer:
    from .honcho import Missing, ReadClient

    workspace = config.workspace(target.role)
    with ReadClient(config.honcho.url, workspace.name, read_key(workspace), read_timeout=READ_TIMEOUT_S) as client:
        if workspace.name not in set_up and not client.workspace_exists():
            raise LookupError("the workspace does not exist yet")
        note = None
        try:
            body = client.chat(question, reasoning, READ_TIMEOUT_S)
        except Missing:
            body = client.peer_chat(config.honcho.owner, question, reasoning, READ_TIMEOUT_S)
            note = f"this server has no workspace chat: answered by peer chat on {config.honcho.owner}"
    content = body.get("content")
    text = snippet(content)[:ANSWER_CHARS] if isinstance(content, str) and content.strip() else "(no answer)"
    return Answer(target.name, workspace.name, target.tag, target.klass, text, note)


def ask(config: Config, question: str, names: list[str], reasoning: str = "minimal") -> AskResult:
    if not question.strip():
        raise UsageError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(f"the question is {len(question)} characters long; at most {MAX_QUESTION_CHARS}")
    if reasoning not in REASONING:
        raise UsageError(f"--reasoning must be one of {', '.join(REASONING)}")
    chosen = targets(config, names)
    set_up = _already_set_up(config)
    outcomes: dict[str, tuple[str, object]] = {}

    def work(target: Target) -> None:
        from .honcho import HonchoError

        try:
            outcomes[target.name] = ("ok", _ask_one(config, target, question, reasoning, set_up))
        except Exception as exc:
            outcomes[target.name] = ("error", exc.kind if isinstance(exc, HonchoError) else str(exc) or type(exc).__name__)

    # Scheduled from here, not by a semaphore in the threads: a chat abandoned at
    # its deadline frees its place at once, whatever its thread still does.
    waiting = list(chosen)
    running: dict[str, tuple[threading.Thread, float]] = {}
    finished: dict[str, tuple[str, object]] = {}
    while waiting or running:
        while waiting and len(running) < AT_ONCE:
            target = waiting.pop(0)
            thread = threading.Thread(target=work, args=(target,), daemon=True, name=f"ask-{target.name}")
            thread.start()
            running[target.name] = (thread, time.monotonic() + ASK_TIMEOUT_S)
        for name, (thread, deadline) in list(running.items()):
            if not thread.is_alive():
                finished[name] = outcomes.get(name, ("error", "the request ended without an answer"))
                del running[name]
            elif time.monotonic() >= deadline:
                finished[name] = ("timeout", f"no answer within {ASK_TIMEOUT_S:g} s")
                del running[name]
        if running:
            next(iter(running.values()))[0].join(0.02)
    result = AskResult()
    for target in chosen:
        status, value = finished[target.name]
        if status == "ok":
            result.answers.append(value)
        else:
            result.unavailable[target.name] = value
    return result
