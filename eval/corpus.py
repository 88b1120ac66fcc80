"""What a case has to work with: agents in fresh homes, the CLI's outputs read
through observe.py, and checks that record only labels and counts."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from . import observe
from .homes import Agent, Backend


@dataclass
class Check:
    side: str  # "+" must be found / must hold, "-" must not be found
    what: str  # a description, never conversation text
    ok: bool
    gate: str = "case"  # case | leak | bound
    why: str = ""  # a label or count, never conversation text


@dataclass
class Case:
    id: str
    title: str
    finds: str
    refuses: str
    checks: list[Check] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(c.ok for c in self.checks)


class Ctx:
    def __init__(self, backend: Backend, root: Path, fast: bool, case: Case) -> None:
        self.backend, self.root, self.fast, self.case = backend, root, fast, case
        self.agents: list[Agent] = []

    def agent(self, name: str, **kwargs) -> Agent:
        agent = Agent(name=name, root=self.root / name, backend=self.backend, **kwargs)
        self.agents.append(agent)
        return agent

    def close(self) -> None:
        for agent in self.agents:
            agent.stop()

    def check(self, side: str, what: str, ok: object, gate: str = "case", why: str = "") -> bool:
        self.case.checks.append(Check(side, what, bool(ok), gate, why))
        return bool(ok)

    # --- reading, with every output held to its bounds -------------------------------

    def recall(self, agent: Agent, query: str, k: int | None = None) -> observe.Recall:
        args = ["recall", "--json"] + (["-k", str(k)] if k else []) + ["--", query]
        run = agent.cli(*args)
        result = observe.recall(run.stdout)
        self.check("-", f"{agent.name}'s recall output parses", result.ok, "bound", f"exit {run.code}")
        problems = observe.bound_problems(result, run.stdout, k or observe.MAX_K)
        self.check("-", f"{agent.name}'s recall within bounds", not problems, "bound", "; ".join(problems))
        result.seconds = run.seconds
        return result

    def recall_until(self, agent: Agent, query: str, found, timeout: float | None = None) -> observe.Recall:
        """A real server indexes what it is sent in the background: ask again
        until `found(result)` holds or the time is up (no wait on the fake)."""
        limit = timeout if timeout is not None else (60.0 if self.backend.real else 0.0)
        end = time.monotonic() + limit
        while True:
            result = self.recall(agent, query)
            if found(result) or time.monotonic() >= end:
                return result
            time.sleep(2)

    def plain(self, agent: Agent, query: str) -> str:
        out = agent.cli("recall", "--", query).stdout
        return out[:-1] if out.endswith("\n") else out  # print's line end: not part of the text

    def ask(self, agent: Agent, question: str, *workspaces: str) -> tuple[observe.Ask, float, int]:
        args = ["ask", "--json"] + [a for w in workspaces for a in ("-w", w)] + ["--", question]
        run = agent.cli(*args, timeout=400)
        result = observe.ask(run.stdout)
        long = [len(a.text) for a in result.answers if len(a.text) > observe.ANSWER_CHARS]
        self.check(
            "-",
            f"{agent.name}'s ask answers within {observe.ANSWER_CHARS} chars",
            not long,
            "bound",
            f"{len(long)} over",
        )
        return result, run.seconds, run.code


def has(result: observe.Recall, needle: str, **labels) -> list[observe.Hit]:
    """The hits whose text holds `needle` (and whose fields equal `labels`)."""
    return [
        h
        for h in result.hits
        if needle.lower() in h.text.lower() and all(getattr(h, k) == v for k, v in labels.items())
    ]


def outputs(agents: list[Agent], skip=lambda agent, run: False) -> str:
    return "\n".join(r.stdout + r.stderr for a in agents for r in a.runs if not skip(a, r))
