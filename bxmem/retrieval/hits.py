"""recall's hits, each with why it is there, and their result. A hit of another kind joins as a Hit with its
own source and a Why. Stdlib only: the lean recall path loads it.
"""

from __future__ import annotations

from bxmem.trust.labels import label_of


class Why:
    """How a hit was found in its source: the query's words it holds; its rank and bm25 score
    by those words (bxmem's ranker: the local index, or a Honcho source's candidates ranked
    alike); its rank in Honcho's own answer (by meaning; None for the local index, or a
    conclusion found by its words alone); its rank in the source once both are fused; and
    the turn it follows (a local turn that answers, or goes on from, a turn the query matched)."""

    __slots__ = ("matched", "lexical_rank", "score", "semantic_rank", "fused_rank", "follows")

    def __init__(
        self,
        matched: tuple[str, ...],
        lexical_rank: int | None,
        score: float | None,
        semantic_rank: int | None = None,
        fused_rank: int | None = None,
        follows: str | None = None,
    ) -> None:
        self.matched, self.lexical_rank, self.score = matched, lexical_rank, score
        self.semantic_rank = semantic_rank
        self.fused_rank = fused_rank if fused_rank is not None else lexical_rank
        self.follows = follows

    @property
    def arms(self) -> list[str]:
        """Which arms found it: lexical (by its words), semantic (Honcho's order)."""
        return [
            arm for arm, rank in (("lexical", self.lexical_rank), ("semantic", self.semantic_rank)) if rank is not None
        ]

    def as_json(self) -> dict:
        return {
            "arms": self.arms,
            "matched": list(self.matched),
            "lexical_rank": self.lexical_rank,
            "score": None if self.score is None else round(self.score, 4),
            "semantic_rank": self.semantic_rank,
            "fused_rank": self.fused_rank,
            "follows": self.follows,
        }

    def line(self) -> str:
        parts = []
        if self.lexical_rank is not None:
            words = ", ".join(self.matched) or "none of the query's words"
            score = f", bm25 {self.score:.2f}" if self.score is not None else ""
            parts.append(f"by its words #{self.lexical_rank}{score} (matched: {words})")
        if self.follows is not None:
            parts.append(f"the turn after {self.follows}, which matched (an answer to it, or its speaker going on)")
        if self.semantic_rank is not None:
            parts.append(f"by Honcho's search #{self.semantic_rank}")
        return "; ".join(parts) + f"; #{self.fused_rank} in its source"


class Hit:
    __slots__ = (
        "source",
        "tag",
        "trust_class",
        "text",
        "agent",
        "peer",
        "where",
        "retracted",
        "workspace",
        "session",
        "date",
        "why",
    )

    def __init__(
        self,
        source: str,
        tag: str,
        trust_class: str,
        text: str,
        agent: str | None = None,
        peer: str | None = None,
        where: str | None = None,
        retracted: bool = False,
        workspace: str | None = None,
        session: str | None = None,
        date: str | None = None,
        why: Why | None = None,
    ) -> None:
        self.source = source
        self.tag = tag
        self.trust_class = trust_class
        self.text = text
        self.agent = agent
        self.peer = peer
        self.where = where
        self.retracted = retracted
        self.workspace = workspace
        self.session = session
        self.date = date
        self.why = why

    def as_json(self) -> dict:
        return {
            "source": self.source,
            "tag": self.tag,
            "class": self.trust_class,
            "text": self.text,
            "agent": self.agent,
            "peer": self.peer,
            "where": self.where,
            "retracted": self.retracted,
            "workspace": self.workspace,
            "session": self.session,
            "date": self.date,
            "why": self.why.as_json() if self.why else None,
        }


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
