"""`bxmem recall QUERY`. The agent's own Honcho workspaces are not searched, and fleet messages from its
own peer are dropped: the local index holds the same text with exact labels.
"""

from __future__ import annotations

import os
import re
import threading
import time
from functools import partial  # loaded already: threading imports it

from bxmem.commands import artifact_recall
from bxmem.commands import recall_remote as remote
from bxmem.commands.recall_remote import snippet
from bxmem.config.loader import Config, read_key
from bxmem.errors import ExitCode, KeyFileInvalid, UsageError
from bxmem.honcho.api import HonchoError, Missing, monotonic, reach
from bxmem.retrieval import render
from bxmem.retrieval.hits import Hit, RecallResult, Why
from bxmem.trust import printed_fields
from bxmem.trust.labels import FLEET_LABEL, MEMORY, TAINTED, read_tag, stored_label

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable

LOCAL_TIMEOUT_S = 2.0
HONCHO_TIMEOUT_S = 5.0
DEFAULT_K = 8
MAX_K = 100
MAX_QUERY_CHARS = 10_000


def nonce() -> str:
    """The fence's nonce (retrieval/render.py), drawn for each output, after every stored
    text was written. os.urandom is what secrets.token_hex reads, without the cost of
    importing secrets on every recall (docs/performance.md)."""
    return os.urandom(8).hex()


def exit_code(result: RecallResult) -> int:
    return ExitCode.OK if result.answered else ExitCode.UNAVAILABLE


def parse_k(value: str | None) -> int:
    """-k as written on the command line (None: absent), the same on the lean path and typer's.
    Any JSON number that is a whole number is one (`8`, `8.0`, `8e0`): the tool schema's
    integer admits them all, and a host writes the number it was given."""
    if value is None:
        return DEFAULT_K
    whole = _whole_number(value)
    if whole is None or not 1 <= whole <= MAX_K:
        raise UsageError(f"-k must be a whole number from 1 to {MAX_K}, not {value!r}")
    return whole


def _whole_number(text: str) -> int | None:
    """The whole number a decimal numeral (digits, a fraction, an exponent) is exactly, else None."""
    numeral = re.fullmatch(r"([0-9]{1,20})(?:\.([0-9]{0,20}))?(?:[eE]([+-]?[0-9]{1,4}))?", text)
    if numeral is None:
        return None
    digits, fraction, exponent = numeral.group(1), numeral.group(2) or "", numeral.group(3) or "0"
    value, power = int(digits + fraction), int(exponent) - len(fraction)
    if value == 0 or power > 3:  # past 10**3 nothing is from 1 to MAX_K: no huge power is made
        return 0 if value == 0 else None
    if power >= 0:
        return value * 10**power
    whole, rest = divmod(value, 10 ** min(-power, 60))
    return None if rest or -power > 60 else whole


# What every JSON Schema validator takes for white space in `\s`, in Python's `re` and ECMA-262's
# alike: a query or question of these alone (and NUL, which a host removes) is empty. The tool
# schemas ask for a character outside `\s` and NUL, so what they admit, the CLI does.
BLANK = "\x00\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def check_query(query: str) -> str:
    if not query.strip(BLANK):
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
    for rank, doc in enumerate(found, 1):
        where = f"turn {doc.key.rsplit(':', 1)[-1]}" if doc.kind == "turn" else doc.kind  # the session is its own field
        follows = f"turn {doc.follows.rsplit(':', 1)[-1]}" if doc.follows else None
        tag, trust_class = stored_label(doc.tag, doc.trust_class)
        hits.append(
            Hit(
                "local",
                tag,
                trust_class,
                snippet(doc.text),
                where=where,
                session=printed_fields.honcho_id(doc.session),
                date=printed_fields.date(doc.ts),
                why=Why(doc.matched, rank, -doc.score, follows=follows),
            )
        )
    return hits


def _client(config: Config, role: str):
    assert config.honcho is not None  # recall() adds the Honcho sources only when [honcho] is set
    workspace = config.workspace(role)
    # Connect first: when Honcho is down, the source is unavailable at once (api.reach).
    reach(config.honcho.url, HONCHO_TIMEOUT_S, workspace.name)
    from bxmem.honcho.client import ReadClient  # deferred: lean

    # ends_by: the source's requests end at its deadline, a trickling answer too, with the connection closed.
    return ReadClient(
        config.honcho.url,
        workspace.name,
        read_key(workspace),
        connect_timeout=HONCHO_TIMEOUT_S,
        read_timeout=HONCHO_TIMEOUT_S,
        ends_by=monotonic() + HONCHO_TIMEOUT_S,
    )


def _read_source(config: Config, source, query: str, k: int) -> list[Hit]:
    assert config.honcho is not None  # as in _client
    tag = read_tag(source.trust)
    asked, find = remote.words_query(query), remote.find_words(query)
    if not asked:
        return []
    calls: dict[str, Callable[[], list[dict]]] = {}
    with _client(config, f"read:{source.agent}") as client:
        calls["messages"] = partial(client.search, asked, remote.CANDIDATES)
        for peer in dict.fromkeys((source.agent, config.honcho.owner)):
            calls[f"meaning:{peer}"] = partial(client.query_conclusions, asked, peer, remote.CONCLUSIONS)
            if find:
                calls[f"words:{peer}"] = partial(client.find_conclusions, find, peer, remote.CONCLUSIONS)
        answers = _at_once(calls)  # on one client: its deadline ends them all
        candidates = remote.messages(answers["messages"], "message")
        orders = [list(range(len(candidates)))]
        for peer in dict.fromkeys((source.agent, config.honcho.owner)):
            concluded = remote.conclusions(answers.get(f"meaning:{peer}", []), answers.get(f"words:{peer}", []))
            first = len(candidates)
            candidates += concluded
            orders.append([first + n for n, c in enumerate(concluded) if c.semantic_rank is not None])
        ranked = remote.rank(query, candidates, k, orders)
        ws = config.workspace(f"read:{source.agent}").name
        if tag == MEMORY and ranked:
            from bxmem.store.workspace_roles import tainting_notes  # deferred: lean

            if tainting_notes(config.paths.state, config.paths.ledger, [ws]):
                tag = TAINTED  # labelled trusted, but this agent wrote untrusted turns or notes there
        hits = [
            remote.hit(source.agent, tag, source.trust_class, c, why, query, ws, agent=source.agent)
            for c, why in ranked[:k]
        ]
        artifact_recall.mark_remote(
            config, [(hit, c.text) for hit, (c, _why) in zip(hits, ranked, strict=False)], client.search
        )
        return hits


def _at_once(calls: dict[str, Callable[[], list[dict]]]) -> dict[str, list[dict]]:
    """Each call on a thread of its own (a source asks Honcho several things; one after another
    they took most of recall's time); a peer the workspace does not have (Missing) is an empty
    answer; any other failure is the source's, raised as the first call made it."""
    answers: dict[str, list[dict] | BaseException] = {}

    def work(name: str, call: Callable[[], list[dict]]) -> None:
        try:
            answers[name] = call()
        except Missing:
            answers[name] = []  # no such peer there: nothing to find
        except Exception as exc:  # handed to the caller below, as if it ran here
            answers[name] = exc

    threads = [threading.Thread(target=work, args=item, daemon=True) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()  # each ends by the client's deadline (ends_by), which closes its connection
    for name in calls:
        outcome = answers.get(name)
        if isinstance(outcome, BaseException):
            raise outcome
    return {name: outcome for name, outcome in answers.items() if not isinstance(outcome, BaseException)}


def _fleet(config: Config, query: str, k: int) -> list[Hit]:
    assert config.honcho is not None  # as in _client
    asked = remote.words_query(query)
    if not asked:
        return []
    with _client(config, "fleet") as client:
        found = client.search(asked, remote.CANDIDATES)
        candidates = remote.messages([m for m in found if m["peer_id"] != config.honcho.agent], "note")
        ranked = remote.rank(query, candidates, k, [list(range(len(candidates)))])
        ws = config.workspace("fleet").name
        hits = [remote.hit("fleet", *FLEET_LABEL, c, why, query, ws) for c, why in ranked]
        artifact_recall.mark_remote(
            config, [(hit, c.text) for hit, (c, _why) in zip(hits, ranked, strict=True)], client.search
        )
    return [hit for unit in _fitting(_units(_pair_retractions(hits)), k) for hit in unit]


def _pair_retractions(hits: list[Hit]) -> list[Hit]:
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
    sources: list[tuple[str, float, Callable[[], list[Hit]]]] = [
        ("local", LOCAL_TIMEOUT_S, lambda: _local(config, query, k))
    ]
    if artifact_recall.searched(config):  # first: an exact id or tag leads the round robin
        sources.insert(0, ("artifacts", LOCAL_TIMEOUT_S, lambda: artifact_recall.cards(config, query, k)))
    if config.honcho:
        for source in config.honcho.read:
            sources.append((source.agent, HONCHO_TIMEOUT_S, partial(_read_source, config, source, query, k)))
        sources.append(("fleet", HONCHO_TIMEOUT_S, lambda: _fleet(config, query, k)))
    return run_sources(sources, k)


def run_sources(sources: list[tuple[str, float, Callable[[], list[Hit]]]], k: int) -> RecallResult:
    """Each source on a daemon thread, its deadline from the same start: one that does not answer in time is
    abandoned, never waited for."""
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
    units: list[list[Hit]] = []
    for hit in hits:
        if units and units[-1][0].retracted and len(units[-1]) == 1 and hit.text.startswith("retracted: "):
            units[-1].append(hit)
        else:
            units.append([hit])
    return units


# --- what cli/output.recall writes: the model-facing text (retrieval/render.py frames it) and the JSON contract ---

SCHEMA = "bxmem.recall/1"


def bound(result: RecallResult) -> RecallResult:
    """Keep the model-facing text within render.MAX_TOKENS (o200k_base tokens, by retrieval/token_bound.py's
    bound, which no text can pass): hits in rank order,
    the last one that does not fit cut to what does, the rest left out and counted."""
    hits, result.hits = result.hits, []
    result.omitted = len(hits)  # the frame is sized with the longest count line it may need
    # sized with a nonce of 16 bytes counted as 16 tokens: no real one costs more
    head, tail, end = render.recall_frame(result, "~" * 16)
    # 8 spare: the label and the count in the real frame may differ a little from these
    used = 8 + sum(render.token_bound(line) + 1 for line in (head, *tail, end))
    for n, hit in enumerate(hits, 1):
        header = render.token_bound(render.recall_header(n, hit)) + 1
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


def render_plain(result: RecallResult, explain: bool = False) -> str:
    """The model-facing text (retrieval/render.py says why nothing stored can forge a line of it).
    `explain`: each hit's explanation after it, for a person; the model is never given it
    (the host runs recall with --json and gives it `text`), so it costs no tokens there."""
    head, tail, end = render.recall_frame(result, nonce())
    lines = [head]
    for n, hit in enumerate(result.hits, 1):
        lines.append(render.recall_header(n, hit))
        lines.extend(render.content(hit.text))
        if explain and hit.why is not None:
            lines.append(render.explanation(hit.why.line()))
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
