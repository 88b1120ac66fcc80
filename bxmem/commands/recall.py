"""`bxmem recall QUERY`: the local index and the fleet, each under its own deadline.

Sources: the local index (this agent's own turns and memory, exact labels);
each `[[honcho.read]]` workspace (message search, plus the conclusions of
that agent's peer and of the owner's); the fleet workspace (message search
over the whole workspace). The agent's own Honcho workspaces are not
searched, and fleet messages from its own peer are dropped: the local index
holds the same text with exact labels.

Every hit carries a tag and a class. The label over all hits tells the
caller how to taint the session: untrusted if any hit is memory-tainted, and
the highest class among them.
"""

from __future__ import annotations

import os
import threading
import time
from functools import partial  # loaded already: threading imports it

from bxmem.commands import artifact_recall
from bxmem.config.loader import Config, read_key
from bxmem.errors import ExitCode, KeyFileInvalid, UsageError
from bxmem.honcho.api import HonchoError, Missing, monotonic, reach
from bxmem.policy import render, shown
from bxmem.policy.hits import Hit, RecallResult
from bxmem.policy.labels import FLEET_LABEL, MEMORY, TAINTED, read_tag
from bxmem.policy.relevance import relevant, spans
from bxmem.policy.sanitize import neutralise
from bxmem.policy.snippets import around

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable

LOCAL_TIMEOUT_S = 2.0
HONCHO_TIMEOUT_S = 5.0
SNIPPET_CHARS = 600
DEFAULT_K = 8
MAX_K = 100
MAX_QUERY_CHARS = 10_000


def nonce() -> str:
    """The fence's nonce (policy/render.py), drawn for each output, after every stored
    text was written. os.urandom is what secrets.token_hex reads, without the cost of
    importing secrets on every recall (docs/performance.md)."""
    return os.urandom(8).hex()


def exit_code(result: RecallResult) -> int:
    """What `bxmem recall` exits with: no source answered is UNAVAILABLE."""
    return ExitCode.OK if result.answered else ExitCode.UNAVAILABLE


def snippet(text: str, query: str | None = None) -> str:
    """At most SNIPPET_CHARS of a Honcho text, neutralised as shown.text does, around the
    query's words when it is cut (the local index cuts its own, around what FTS5 matched)."""
    text = neutralise(text).strip()
    if len(text) <= SNIPPET_CHARS:
        return text
    return around(text, None, spans(query, text) if query else [], SNIPPET_CHARS)


def parse_k(value: str | None) -> int:
    """-k as written on the command line (None: absent), the same on the lean path and typer's."""
    if value is None:
        return DEFAULT_K
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_K:
        raise UsageError(f"-k must be a whole number from 1 to {MAX_K}, not {value!r}")
    return int(value)


def check_query(query: str) -> str:
    if not query.strip():
        raise UsageError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
    return query


# --- sources ------------------------------------------------------------------------


def _local(config: Config, query: str, k: int) -> list[Hit]:
    from bxmem.store.index import Index  # deferred: help

    index = Index.for_state(config.paths.state).open_readonly()
    try:
        found = index.search(query, k)
    finally:
        index.close()
    hits = []
    for doc in found:
        where = f"turn {doc.key.rsplit(':', 1)[-1]}" if doc.kind == "turn" else doc.kind  # the session is its own field
        hits.append(Hit("local", doc.tag, doc.trust_class, snippet(doc.text), where=where, session=shown.honcho_id(doc.session),
                        date=shown.date(doc.ts)))
    return hits


def _client(config: Config, role: str):
    assert config.honcho is not None  # recall() adds the Honcho sources only when [honcho] is set
    workspace = config.workspace(role)
    # Connect first: when Honcho is down (the common failure), the source is
    # unavailable at once, without loading the HTTP stack for nothing.
    reach(config.honcho.url, HONCHO_TIMEOUT_S, workspace.name)
    from bxmem.honcho.client import ReadClient  # deferred: lean

    # ends_by: the source's requests end at its deadline, a trickling answer too, with the connection closed.
    return ReadClient(config.honcho.url, workspace.name, read_key(workspace), connect_timeout=HONCHO_TIMEOUT_S,
                      read_timeout=HONCHO_TIMEOUT_S, ends_by=monotonic() + HONCHO_TIMEOUT_S)


def _read_source(config: Config, source, query: str, k: int) -> list[Hit]:
    assert config.honcho is not None  # as in _client
    tag = read_tag(source.trust)
    with _client(config, f"read:{source.agent}") as client:
        messages = client.search(query, k)
        conclusions: list[dict] = []
        for peer in (source.agent, config.honcho.owner):
            try:
                conclusions += client.query_conclusions(query, peer, k)
            except Missing:
                pass  # no such peer there: nothing to find
    ws = config.workspace(f"read:{source.agent}").name
    if tag == MEMORY and (messages or conclusions):
        from bxmem.store.workspace_roles import tainting_notes  # deferred: lean

        if tainting_notes(config.paths.state, config.paths.ledger, [ws]):
            tag = TAINTED  # labelled trusted, but this agent wrote untrusted turns or notes there
    # Every field shown goes through policy/shown.py: an id outside Honcho's alphabet is a
    # marked placeholder, a date that is not one is dropped, the text is neutralised.
    # (the hit, what the server said): relevance is judged on the whole text
    made = [(Hit(source.agent, tag, source.trust_class, snippet(text, query), agent=source.agent,
                 peer=shown.honcho_id(m["peer_id"]), where="message", workspace=ws,
                 session=shown.honcho_id(m["session_id"]), date=shown.date(m["created_at"])), text)
            for m in messages if (text := m["content"])]
    concluded = [(Hit(source.agent, tag, source.trust_class, snippet(text, query), agent=source.agent,
                      peer=shown.honcho_id(c["observer_id"]), where="conclusion", workspace=ws,
                      session=shown.honcho_id(c["session_id"]), date=shown.date(c["created_at"])), text)
                 for c in conclusions if (text := c["content"])]
    merged: list[tuple[Hit, str]] = []  # each list is ranked by the server: interleave them
    for pair in zip(made, concluded, strict=False):  # the longer list's tail is added below
        merged.extend(pair)
    longer = made if len(made) > len(concluded) else concluded
    merged.extend(longer[min(len(made), len(concluded)):])
    artifact_recall.mark_remote(config, merged)
    # Who wrote a message is a word of it, as the speaker is of a local turn: "what is nina's cat called?"
    # finds nina's "ziggy kept me up all night, silly cat".
    return [hit for hit, text in merged if relevant(query, text, _author(hit.peer))][:k]


def _fleet(config: Config, query: str, k: int) -> list[Hit]:
    assert config.honcho is not None  # as in _client
    with _client(config, "fleet") as client:
        found = client.search(query, min(100, k + 20))  # room for our own messages, which are dropped
    others = [m for m in found
              if m["peer_id"] != config.honcho.agent and relevant(query, m["content"], _author(m["peer_id"]))]
    ws = config.workspace("fleet").name
    hits = [Hit("fleet", *FLEET_LABEL, snippet(m["content"], query), peer=shown.honcho_id(m["peer_id"]),
                where="note", workspace=ws, session=shown.honcho_id(m["session_id"]), date=shown.date(m["created_at"]))
            for m in others]
    artifact_recall.mark_remote(config, list(zip(hits, (m["content"] for m in others), strict=True)))
    return [hit for unit in _fitting(_units(_pair_retractions(hits)), k) for hit in unit]


def _author(peer: str | None) -> str | None:
    """A writing peer's id as a word of its text: only a real Honcho id (never the placeholder's words)."""
    shown_id = shown.honcho_id(peer)
    return None if shown_id == shown.INVALID_ID else shown_id


def _pair_retractions(hits: list[Hit]) -> list[Hit]:
    """A retracted note is shown beside its retraction."""
    retractions = {h.text.removeprefix("retracted: "): h for h in hits if h.text.startswith("retracted: ")}
    out: list[Hit] = []
    for hit in hits:
        if any(hit is placed for placed in out):
            continue
        out.append(hit)
        retraction = retractions.get(hit.text)
        if retraction is not None and retraction.peer == hit.peer:
            hit.retracted = True
            if not any(retraction is placed for placed in out):
                out.append(retraction)
    return out


# --- running them ---------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    from bxmem.store.index import IndexUnavailable  # deferred: help

    if isinstance(exc, HonchoError):
        return exc.kind
    if isinstance(exc, IndexUnavailable):
        return str(exc)
    if isinstance(exc, KeyFileInvalid):
        return f"its key file is refused: {exc.problem}"
    return type(exc).__name__


def recall(config: Config, query: str, k: int = DEFAULT_K) -> RecallResult:
    check_query(query)
    if not 1 <= k <= MAX_K:
        raise UsageError(f"-k must be a whole number from 1 to {MAX_K}, not {k!r}")
    sources: list[tuple[str, float, Callable[[], list[Hit]]]] = [("local", LOCAL_TIMEOUT_S, lambda: _local(config, query, k))]
    if artifact_recall.searched(config):  # first: an exact id or tag leads the round robin
        sources.insert(0, ("artifacts", LOCAL_TIMEOUT_S, lambda: artifact_recall.cards(config, query, k)))
    if config.honcho:
        for source in config.honcho.read:
            sources.append((source.agent, HONCHO_TIMEOUT_S, partial(_read_source, config, source, query, k)))
        sources.append(("fleet", HONCHO_TIMEOUT_S, lambda: _fleet(config, query, k)))
    return run_sources(sources, k)


def run_sources(sources: list[tuple[str, float, Callable[[], list[Hit]]]], k: int) -> RecallResult:
    """Each source on a daemon thread with its own deadline from the same start:
    a source that does not answer in time is abandoned, never waited for."""
    outcomes: dict[str, list[Hit] | str] = {}  # a source's hits, or why it has none

    def work(name: str, fn: Callable[[], list[Hit]]) -> None:
        try:
            outcomes[name] = fn()
        except Exception as exc:  # a source's failure is its own: one unavailable line
            outcomes[name] = _describe(exc)

    start = time.monotonic()
    threads = []
    for name, _limit, fn in sources:
        thread = threading.Thread(target=work, args=(name, fn), daemon=True, name=f"recall-{name}")
        thread.start()
        threads.append(thread)
    result = RecallResult()
    per_source: dict[str, list[Hit]] = {}
    for (name, limit, _fn), thread in zip(sources, threads, strict=True):  # a thread per source
        thread.join(max(0.0, start + limit - time.monotonic()))
        outcome = outcomes.get(name, f"no answer within {limit:g} s")
        if isinstance(outcome, str):
            result.unavailable[name] = outcome
        else:
            result.answered.append(name)
            per_source[name] = outcome
    ranked = [_units(per_source.get(name, [])) for name, _limit, _fn in sources]
    turns = [units[at] for at in range(max(map(len, ranked), default=0)) for units in ranked if at < len(units)]
    result.hits.extend(hit for unit in _fitting(turns, k) for hit in unit)
    return bound(result)


def _fitting(units: list[list[Hit]], k: int) -> list[list[Hit]]:
    """The units, in order, that fit in k hits. A retracted note and its retraction
    are one unit and never split: one that no longer fits is left out whole."""
    taken: list[list[Hit]] = []
    room = k
    for unit in units:
        if len(unit) <= room:
            taken.append(unit)
            room -= len(unit)
    return taken


def _units(hits: list[Hit]) -> list[list[Hit]]:
    """A source's hits as the units the round robin takes in turn: a retracted
    note with the retraction _pair_retractions placed right after it, or one hit."""
    units: list[list[Hit]] = []
    for hit in hits:
        if units and units[-1][0].retracted and len(units[-1]) == 1 and hit.text.startswith("retracted: "):
            units[-1].append(hit)
        else:
            units.append([hit])
    return units


# --- what cli/output.recall writes: the model-facing text (policy/render.py frames it) and the JSON contract ---

SCHEMA = "bxmem.recall/1"


def bound(result: RecallResult) -> RecallResult:
    """Keep the model-facing text within render.MAX_TOKENS (estimated): hits in rank order,
    the last one that does not fit cut to what does, the rest left out and counted."""
    hits, result.hits = result.hits, []
    result.omitted = len(hits)  # the frame is sized with the longest count line it may need
    # sized with the nonce the estimate counts dearest (a piece per digit): a real one never costs more
    head, tail, end = render.recall_frame(result, "a0" * 8)
    # 8 spare: the label and the count in the real frame may differ a little from these
    used = 8 + sum(render.estimate_tokens(line) + 1 for line in (head, *tail, end))
    for n, hit in enumerate(hits, 1):
        header = render.estimate_tokens(render.recall_header(n, hit)) + 1
        room = render.MAX_TOKENS - used - header
        body = render.block_tokens(hit.text)
        if body > room:
            if room < 40:  # too little left to be worth a hit: this and the rest are counted instead
                break
            hit.text = render.fit_tokens(hit.text, room)
            body = render.block_tokens(hit.text)
        used += header + body
        result.hits.append(hit)
    result.omitted = len(hits) - len(result.hits)
    return result


def render_plain(result: RecallResult) -> str:
    """The model-facing text (policy/render.py says why nothing stored can forge a line of it)."""
    head, tail, end = render.recall_frame(result, nonce())
    lines = [head]
    for n, hit in enumerate(result.hits, 1):
        lines.append(render.recall_header(n, hit))
        lines.extend(render.content(hit.text))
    return "\n".join(lines + tail + [end])


def render_json(result: RecallResult) -> dict:
    """The contract in bxmem/schemas/recall.schema.json: `label` is what the host copies
    into the tool result's label; `text` is what it gives the model."""
    return {
        "schema": SCHEMA,
        "label": {"untrusted": result.untrusted, "class": result.trust_class},
        "text": render_plain(result),
        "hits": [hit.as_json() for hit in result.hits],
        "omitted": result.omitted,
        "answered": result.answered,
        "unavailable": [{"source": s, "reason": r} for s, r in result.unavailable.items()],
    }
