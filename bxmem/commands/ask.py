"""`bxmem ask QUESTION`. Each workspace is listed first (Honcho 3.0 creates a missing workspace on a chat).
Honcho keeps working on a chat whose client has gone, so once a chat has timed out, or with less than MIN_LEFT_S
left, no new chat starts (docs/decisions.md gives the figures).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from bxmem.commands import recall
from bxmem.commands.ask_targets import Target, peers_to_ask, targets
from bxmem.config.loader import Config, read_key
from bxmem.errors import ExitCode, KeyFileInvalid, UsageError
from bxmem.honcho.api import HonchoError, Missing, Unavailable, monotonic
from bxmem.honcho.client import ReadClient
from bxmem.retrieval import render
from bxmem.trust.labels import label_of
from bxmem.trust.printed_fields import text as shown_text

ASK_TIMEOUT_S = 150.0
DEADLINE_S = 160.0
LIST_TIMEOUT_S = 10.0
MAX_QUESTION_CHARS = 2_000
AT_ONCE = 2
REASONING = ("minimal", "low")
ANSWER_CHARS = 4_000
# Each answer as printed, in o200k_base tokens (retrieval/token_bound.py's bound): 4,000 characters of plain
# English fit, and no text, however dear its script, costs more.
ANSWER_TOKENS = 1_500
# The least time left of DEADLINE_S for which a chat is started, by reasoning
# level; a shorter --deadline scales it down in proportion.
MIN_LEFT_S = {"minimal": 20.0, "low": 50.0}
SCHEMA = "bxmem.ask/2"


@dataclass
class Answer:
    name: str
    workspace: str
    tag: str
    trust_class: str
    text: str
    peers: list[str] | None = None  # the peers asked by peer chat; None: workspace chat
    note: str | None = None

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "workspace": self.workspace,
            "tag": self.tag,
            "class": self.trust_class,
            "text": self.text,
            "peers": self.peers,
            "note": self.note,
        }


@dataclass
class AskResult:
    answers: list[Answer] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # the name as asked -> why
    workspace_of: dict[str, str] = field(default_factory=dict)  # the name as asked -> its Honcho workspace

    @property
    def untrusted(self) -> bool:
        return label_of(self.answers)[0]

    @property
    def trust_class(self) -> str:
        return label_of(self.answers)[1]

    def as_json(self) -> dict:
        return render_json(self)

    def lines(self) -> list[str]:
        return [render_plain(self)]

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.answers else ExitCode.UNAVAILABLE


def _reason(exc: BaseException) -> str:
    """A reason that carries no text from the server and no key."""
    if isinstance(exc, HonchoError):
        return exc.kind
    if isinstance(exc, _NoWorkspace):
        return _NoWorkspace.reason
    if isinstance(exc, KeyFileInvalid):
        return f"its key file is refused: {exc.problem}"
    return type(exc).__name__


class _NoWorkspace(Exception):
    """The workspace lists no peers: it does not exist yet, or holds no memory.
    Its own class, so no other lookup error's text can become a reason."""

    reason = "the workspace does not exist yet"


@dataclass
class _Job:
    target: Target
    peer: str | None  # None: list the workspace, then workspace chat
    ends: float = 0.0
    thread: threading.Thread | None = None
    outcome: tuple[str, str | list[str]] | None = None  # (kind, its text), or ("peers", the peers listed)


@dataclass
class _State:
    target: Target
    workspace: str = ""
    peers: list[str] = field(default_factory=list)
    left_out: int = 0
    parts: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    answer: str | None = None
    failure: str | None = None


class _Run:
    def __init__(self, config: Config, question: str, reasoning: str, deadline: float) -> None:
        self.config = config
        self.question = question
        self.reasoning = reasoning
        self.deadline = deadline
        self.end = time.monotonic() + deadline
        self.min_left = MIN_LEFT_S[reasoning] * deadline / DEADLINE_S
        self.workspace_chat: bool | None = None  # learnt from the first workspace chat
        self.stalled = False  # a chat timed out: the server may still be running it

    def why_not(self) -> str | None:
        if self.stalled:
            return (
                "not asked: an earlier chat to this server timed out, and Honcho keeps running a chat "
                "its client gave up on, so another would pile up beside it"
            )
        if self.end - time.monotonic() < self.min_left:
            return (
                f"not asked: under {self.min_left:.3g} s of the {self.deadline:g} s deadline left, "
                "too little for a chat to answer"
            )
        return None

    def _client(self, target: Target, ends: float) -> ReadClient:
        assert self.config.honcho is not None  # targets() refuses a local-only config
        workspace = self.config.workspace(target.role)
        remaining = max(0.1, ends - time.monotonic())
        # ends_by: every request of the job, a trickling answer too, ends at the job's deadline.
        return ReadClient(
            self.config.honcho.url,
            workspace.name,
            read_key(workspace),
            connect_timeout=min(5.0, remaining),
            read_timeout=min(LIST_TIMEOUT_S, remaining),
            ends_by=monotonic() + remaining,
            ends_by_name=None,
        )

    def work(self, job: _Job) -> None:
        try:
            with self._client(job.target, job.ends) as client:
                if job.peer is not None:
                    body = self._chat(job, lambda left: client.peer_chat(job.peer, self.question, self.reasoning, left))
                    job.outcome = ("peer", _content(body))
                    return
                listed = client.peer_ids()
                if not listed:
                    raise _NoWorkspace
                if self.workspace_chat is not False:
                    why = self.why_not()  # the listing took time, and another chat may have timed out meanwhile
                    if why:
                        job.outcome = ("error", why)
                        return
                    try:
                        body = self._chat(job, lambda left: client.chat(self.question, self.reasoning, left))
                        self.workspace_chat = True
                        job.outcome = ("answer", _content(body))
                        return
                    except Missing as exc:
                        if not exc.no_route:  # the route exists: this workspace's own 404
                            raise
                        self.workspace_chat = False
                job.outcome = ("peers", listed)
        except Exception as exc:  # one workspace's failure is its own: one unavailable line
            job.outcome = ("error", _reason(exc))

    def _chat(self, job: _Job, call):
        try:
            return call(self._left(job))
        except Unavailable as exc:
            # A chat that reached the server and timed out is still running there.
            if exc.kind == "timed out" and not exc.unsent:
                self.stalled = True
            raise

    @staticmethod
    def _left(job: _Job) -> float:
        # The read timeout ends the wait, and closes the connection, at the job's deadline.
        return max(0.1, job.ends - time.monotonic())


def _content(answer: str | None) -> str:
    """A chat's answer (answers.chat_content checked it is text or none), made inert and capped."""
    return shown_text(answer, ANSWER_CHARS)


def ask(
    config: Config, question: str, names: list[str], reasoning: str = "minimal", deadline: float = DEADLINE_S
) -> AskResult:
    if not question.strip(recall.BLANK):
        raise UsageError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(f"the question is {len(question)} characters long; at most {MAX_QUESTION_CHARS}")
    if reasoning not in REASONING:
        raise UsageError(f"--reasoning must be one of {', '.join(REASONING)}")
    if not 0 < deadline <= DEADLINE_S:
        raise UsageError(f"--deadline must be more than 0 and at most {DEADLINE_S:g} seconds")
    # As recall: a wrong HOME or user would ask with labels from no ledger (a workspace this
    # agent wrote untrusted, read as memory), not say it cannot tell.
    config.paths.require_home()
    chosen = targets(config, names)
    run = _Run(config, question, reasoning, deadline)
    states = {t.name: _State(t, workspace=config.workspace(t.role).name) for t in chosen}
    waiting: deque[_Job] = deque(_Job(t, None) for t in chosen)
    running: list[_Job] = []
    # Scheduled from here, not by a semaphore in the threads. A job keeps its slot
    # until its thread ends, which its read timeout makes happen at its deadline
    # with the connection closed: so at most AT_ONCE chats are ever open at once.
    while (waiting or running) and time.monotonic() < run.end:
        while waiting and len(running) < AT_ONCE:
            job = waiting.popleft()
            why = run.why_not()
            if why:
                _fail(states[job.target.name], job, why)
                continue
            job.ends = min(time.monotonic() + ASK_TIMEOUT_S, run.end)
            job.thread = threading.Thread(target=run.work, args=(job,), daemon=True, name=f"ask-{job.target.name}")
            job.thread.start()
            running.append(job)
        for job in list(running):
            if job.thread is not None and not job.thread.is_alive():
                running.remove(job)
                waiting.extendleft(reversed(_settle(config, states[job.target.name], job)))
        if running and running[0].thread is not None:
            running[0].thread.join(min(0.02, max(0.0, run.end - time.monotonic())))
    for job in running:  # the whole command's deadline came first
        _fail(states[job.target.name], job, f"no answer within {deadline:g} s")
    for job in waiting:
        _fail(states[job.target.name], job, run.why_not() or f"not asked within the {deadline:g} s deadline")
    return _result(states)


def _fail(state: _State, job: _Job, reason: str) -> None:
    if job.peer is None:
        state.failure = reason
    else:
        state.failures[job.peer] = reason


def _settle(config: Config, state: _State, job: _Job) -> list[_Job]:
    """Record a finished job; the peer chats to run next, if the workspace needs them."""
    kind, value = job.outcome or ("error", "the request ended without an answer")
    if kind == "error":
        _fail(state, job, str(value))
    elif kind == "answer":
        state.answer = str(value)
    elif kind == "peer":
        state.parts[job.peer or ""] = str(value)
    elif kind == "peers":
        state.peers, state.left_out = peers_to_ask(config, state.target, list(value))
        if not state.peers:
            state.failure = "no peer with memory to ask in the workspace"
        return [_Job(state.target, peer) for peer in state.peers]
    return []


def _bounded(text: str) -> str:
    """An answer as shown: at most ANSWER_CHARS characters and ANSWER_TOKENS tokens as printed."""
    return render.fit_tokens(render.cut(text, ANSWER_CHARS), ANSWER_TOKENS)


def _result(states: dict[str, _State]) -> AskResult:
    result = AskResult()
    for name, state in states.items():
        t = state.target
        result.workspace_of[name] = state.workspace
        if state.failure is not None:
            result.unavailable[name] = state.failure
        elif state.answer is not None:
            text = _bounded(state.answer or "(no answer)")
            result.answers.append(Answer(name, state.workspace, t.tag, t.trust_class, text, note=t.note))
        elif state.parts:
            text = "\n\n".join(
                f"{peer}: {state.parts[peer] or '(no answer)'}" for peer in state.peers if peer in state.parts
            )
            note = "this server has no workspace chat: asked by peer chat on " + ", ".join(state.peers)
            if state.left_out:
                note += f" ({state.left_out} more peers not asked)"
            if state.failures:
                note += "; no answer from " + ", ".join(f"{p} ({r})" for p, r in state.failures.items())
            note += f"; {t.note}" if t.note else ""
            result.answers.append(
                Answer(name, state.workspace, t.tag, t.trust_class, _bounded(text), list(state.peers), note)
            )
        else:
            result.unavailable[name] = next(iter(state.failures.values()), "no answer")
    return result


# --- what cli/output.show writes: the model-facing text (framed as recall's) and the JSON contract ---


def render_plain(result: AskResult) -> str:
    tag = recall.nonce()  # as recall draws it, for the same fence
    count = f"{len(result.answers)} answer{'s' if len(result.answers) != 1 else ''}"
    lines = [render.opening("ask", tag, (result.untrusted, result.trust_class), count)]
    for n, answer in enumerate(result.answers, 1):
        head = (
            f"[{n}] {render.field(answer.name)} | {render.field(answer.tag)} | {render.field(answer.trust_class)} | "
            f"workspace {render.field(answer.workspace)}"
        )
        if answer.peers is not None:
            head += " | peers " + render.field(",".join(answer.peers))
        if answer.note:
            head += " | " + render.field(answer.note, 300)
        lines.append(head)
        lines.extend(render.content(answer.text))
    lines += [
        f"{render.field(name)}: unavailable ({render.field(reason, 300)})"
        for name, reason in result.unavailable.items()
    ]
    return "\n".join([*lines, render.closing("ask", tag)])


def render_json(result: AskResult) -> dict:
    """The contract in bxmem/schemas/ask.schema.json."""
    return {
        "schema": SCHEMA,
        "label": {"untrusted": result.untrusted, "class": result.trust_class},
        "text": render_plain(result),
        "answers": [a.as_json() for a in result.answers],
        # `workspace` is the Honcho workspace, as in `answers`
        "unavailable": [
            {"name": n, "workspace": result.workspace_of.get(n, n), "reason": r} for n, r in result.unavailable.items()
        ],
    }
