"""What `recall` found: each hit, and the result they make with the sources that
answered. commands/recall.py builds them; policy/render.py frames them.

Stdlib and policy only: the lean recall path loads it.
"""

from __future__ import annotations

from bxmem.policy.labels import label_of


class Hit:
    __slots__ = ("source", "tag", "trust_class", "text", "agent", "peer", "where", "retracted", "workspace", "session", "date")

    def __init__(self, source: str, tag: str, trust_class: str, text: str, agent: str | None = None,
                 peer: str | None = None, where: str | None = None, retracted: bool = False,
                 workspace: str | None = None, session: str | None = None, date: str | None = None) -> None:
        self.source = source  # "local", an agent's name, or "fleet"
        self.tag = tag  # identity | memory | memory-tainted
        self.trust_class = trust_class
        self.text = text
        self.agent = agent  # whose workspace (read sources)
        self.peer = peer  # who wrote it (Honcho sources)
        self.where = where  # a session and turn, or an entry kind
        self.retracted = retracted
        self.workspace = workspace  # the Honcho workspace it came from (None: the local index)
        self.session = session
        self.date = date  # ISO 8601, when known

    def as_json(self) -> dict:
        return {"source": self.source, "tag": self.tag, "class": self.trust_class, "text": self.text, "agent": self.agent,
                "peer": self.peer, "where": self.where, "retracted": self.retracted, "workspace": self.workspace,
                "session": self.session, "date": self.date}


class RecallResult:
    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.answered: list[str] = []
        self.unavailable: dict[str, str] = {}
        self.omitted = 0  # hits left out to keep the output within its token budget

    @property
    def untrusted(self) -> bool:
        return label_of(self.hits)[0]

    @property
    def trust_class(self) -> str:
        return label_of(self.hits)[1]
