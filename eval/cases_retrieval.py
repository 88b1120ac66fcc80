"""The corpus, cases 7-12: retrieval where the answer is absent, Honcho is
down, the history is long, another agent wrote it, ask is the way in, or a
correction supersedes what was said.

Each a positive (must be found) and a negative (must not), as in eval/cases.py.
"""

from __future__ import annotations

import socket
import statistics
import time

from . import observe
from .cases import reader
from .corpus import Ctx, has
from .homes import OWNER, turn


def c07_absent(ctx: Ctx) -> None:
    b = ctx.agent("eb")
    b.session("s-b", turn(1, "when is the gecko migration", "the gecko migration is scheduled for june"))
    b.sync()
    a = reader(ctx, "ea", b)
    a.session("s-a", turn(1, "check the heron backups", "the heron backups are fine"))
    a.sync()
    c = ctx.agent("ec")
    ctx.check("+", "eb finds its own gecko turn", has(ctx.recall(b, "gecko migration"), "gecko migration"))
    ra = ctx.recall_until(a, "gecko migration", lambda r: has(r, "gecko migration"))
    ctx.check("+", "ea (reads eb) finds it through Honcho, from eb", has(ra, "gecko migration", agent="eb"))
    never = ctx.recall(a, "marmoset budget")
    ctx.check(
        "-",
        "a question about something never said: no hits at all",
        not never.hits,
        why=f"{len(never.hits)} hits from {sorted({h.source or '?' for h in never.hits})}",
    )
    rc = ctx.recall(c, "gecko migration")
    ctx.check(
        "-", "ec (reads nothing of eb): no near miss from eb's workspace", not rc.hits, "leak", f"{len(rc.hits)} hits"
    )


def _black_hole() -> socket.socket:
    """A server that accepts connections (the kernel does) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: connections are refused


def c08_down(ctx: Ctx) -> None:
    b = ctx.agent("eb")
    b.session("s-b", turn(1, "hi", "hello"))
    b.sync()
    a = reader(ctx, "ea", b)
    a.session("s-a", turn(1, "where is the lynx dashboard", "the lynx dashboard is on port 3000"))
    a.sync()
    hole = _black_hole()
    try:
        a.honcho_url = f"http://127.0.0.1:{hole.getsockname()[1]}"
        a.write_config()
        start = time.monotonic()
        r = ctx.recall(a, "lynx dashboard")
        wall = time.monotonic() - start
        ctx.case.figures["recall_s_silent_honcho"] = round(wall, 2)
        ctx.check(
            "+",
            "recall answers from the local index within 5 s + 1 s",
            has(r, "lynx dashboard", source="local") and wall <= 6.0,
            why=f"{wall:.1f} s",
        )
        ctx.check(
            "+",
            "and names each unavailable source (fleet, eb)",
            {"fleet", "eb"} <= set(r.unavailable),
            why=",".join(sorted(r.unavailable)),
        )
        ctx.check("-", "no hit from a source that did not answer", all(h.source == "local" for h in r.hits))
        if not ctx.fast:
            ans, secs, _code = ctx.ask(a, "where is the lynx dashboard", "own", "fleet")
            ctx.case.figures["ask_s_silent_honcho"] = round(secs, 1)
            ctx.check(
                "+",
                "ask (silent server) says unavailable per workspace within 161 s",
                {"own", "fleet"} <= set(ans.unavailable) and secs <= 161,
                why=f"{secs:.0f} s",
            )
    finally:
        hole.close()
    a.honcho_url = f"http://127.0.0.1:{_dead_port()}"
    a.write_config()
    ans, secs, _code = ctx.ask(a, "where is the lynx dashboard", "own", "fleet", "eb")
    ctx.case.figures["ask_s_refused"] = round(secs, 2)
    ctx.check(
        "+",
        "ask (server down) says unavailable for each workspace, within its deadline",
        {"own", "fleet", "eb"} <= set(ans.unavailable) and secs <= 161,
        why=f"{secs:.1f} s, {len(ans.unavailable)} named",
    )
    ctx.check("-", "and gives no answer", not ans.answers)


def c09_long(ctx: Ctx) -> None:
    turns, notes = (2_000, 100) if ctx.fast else (100_000, 1_000)
    a = ctx.agent("ea")
    filler = "the nightly backup and deploy cache report " * 25  # ~1,000 characters: longer than a hit may be
    per = 100
    for s in range(turns // per):
        lines: list[dict] = []
        for n in range(1, per + 1):
            text = f"turn {s}-{n} about backup deploy cache " + (filler if n % 10 == 0 else "")
            lines += turn(n, text, f"reply {s}-{n} deploy backup")
        if s == 7:
            lines += turn(per + 1, "remember the wolverine cache key rotates hourly", "noted")
        a.session(f"s-{s:05d}", lines)
    for n in range(notes):
        a.journal(
            "note",
            session="s-00000",
            trust="untrusted" if n % 2 else "trusted",
            entry=f"note {n} on backup cache {filler[: 40 * (n % 20)]}",
        )
    start = time.monotonic()
    a.sync(send=False)  # the index is the subject; sending 100,000 turns is the send bench's job
    ctx.case.figures.update(turns=turns, notes=notes, build_s=round(time.monotonic() - start, 1))
    queries = ["backup", "deploy cache", "nightly backup report", "wolverine cache key", "note backup", "reply deploy"]
    times, biggest = [], 0
    for q in queries * (3 if ctx.fast else 10):
        r = ctx.recall(a, q)
        times.append(r.seconds)
        biggest = max(biggest, observe.estimate_tokens(r.text))
    r = ctx.recall(a, "wolverine")
    ctx.check(
        "+", f"a planted fact is found first among {turns:,} turns", bool(r.hits) and "wolverine" in r.hits[0].text
    )
    times.sort()
    ctx.case.figures.update(
        recall_median_s=round(statistics.median(times), 3),
        recall_p95_s=round(times[int(0.95 * (len(times) - 1))], 3),
        max_tokens=biggest,
    )
    bounds = [c for c in ctx.case.checks if c.gate == "bound" and not c.ok]
    ctx.check(
        "-",
        f"every one of {len(times) + 1} outputs within k, 600 chars/hit, 1,200 tokens",
        not bounds,
        why=f"{len(bounds)} over",
    )


def c10_two_agents(ctx: Ctx) -> None:
    a, b = ctx.agent("ea"), ctx.agent("eb")
    a.session("s-a", turn(1, "when is the serval deploy", "the serval deploy is friday"))
    a.journal("note", session="s-a", trust="untrusted", entry="the tapir cache needs warming")
    b.session("s-b", turn(1, "when is the caracal deploy", "the caracal deploy is monday"))
    b.journal("note", session="s-b", trust="untrusted", entry="the okapi queue is stuck")
    a.sync()
    b.sync()
    ra = ctx.recall_until(a, "okapi queue", lambda r: has(r, "okapi queue"))
    ctx.check(
        "+",
        "ea finds eb's fleet note, tainted, with eb's name",
        has(ra, "okapi queue", tag="memory-tainted", peer="eb"),
    )
    rb = ctx.recall_until(b, "tapir cache", lambda r: has(r, "tapir cache"))
    ctx.check(
        "+",
        "eb finds ea's fleet note, tainted, with ea's name",
        has(rb, "tapir cache", tag="memory-tainted", peer="ea"),
    )
    ctx.check("-", "ea does not find eb's trusted turn", not has(ctx.recall(a, "caracal deploy"), "caracal"), "leak")
    ctx.check("-", "eb does not find ea's trusted turn", not has(ctx.recall(b, "serval deploy"), "serval"), "leak")
    a.reads.append({"agent": "eb", "workspace": b.trusted, "trust": "trusted"})
    a.write_config()
    ra = ctx.recall_until(a, "caracal deploy", lambda r: has(r, "caracal"))
    ctx.check(
        "+", "once configured to read eb, ea finds eb's trusted turn, from eb", has(ra, "caracal deploy", agent="eb")
    )


def c11_ask(ctx: Ctx) -> None:
    b, d = ctx.agent("eb"), ctx.agent("ed")
    b.session("s-b", turn(1, "when is the ibis report due", "the ibis report is due friday"))
    d.session("s-d", turn(1, "the heron report", "is late"))
    a = ctx.agent(
        "ea",
        reads=[
            {"agent": "eb", "workspace": b.trusted, "trust": "trusted"},
            {"agent": "ed", "workspace": d.trusted, "trust": "trusted"},
        ],
        no_key={"ed"},
    )
    a.session("s-a", turn(1, "the ibis report", "eb has it"))
    a.journal("note", session="s-a", trust="untrusted", entry="ibis reports move to fridays")
    for agent in (b, d, a):
        agent.sync()
    ans, secs, _code = ctx.ask(a, "when is the ibis report due", "own", "fleet", "eb")
    ctx.case.figures["ask_s"] = round(secs, 2)
    want = {"own": (a.trusted, "memory"), "fleet": (a.fleet, "memory-tainted"), "eb": (b.trusted, "memory")}
    got = {x.name: x for x in ans.answers}
    ctx.check(
        "+",
        "every workspace asked is answered and named",
        set(got) == set(want),
        why=f"answered {sorted(got)}, unavailable {sorted(ans.unavailable)}",
    )
    ctx.check(
        "+",
        "each answer is labelled as recall would label it",
        all(n in got and got[n].workspace == ws and got[n].tag == tag for n, (ws, tag) in want.items())
        and ans.untrusted is True,
    )
    own = got.get("own")
    if any(x.peers for x in ans.answers):  # a server without workspace chat (3.0.12, the fake by default)
        ctx.check(
            "+",
            "without workspace chat, the peers asked are named (own: the owner's and the agent's)",
            own is not None and {OWNER, "ea"} <= set(own.peers) and all(x.peers for x in ans.answers),
            why=f"own peers: {len(own.peers) if own else 0}",
        )
    else:  # workspace chat answered: the model's text names no peer either
        ctx.check(
            "+",
            "with workspace chat, the text names no peers asked",
            not [line for line in ans.text.splitlines() if line.startswith("[") and "| peers " in line],
        )
    fake = ctx.backend.fake
    if ctx.backend.auth:  # with auth off no workspace has a key, and none needs one
        before = len(fake.requests) if fake else 0
        keyless, _s, code = ctx.ask(a, "when is the heron report due", "ed")
        sent = (
            fake.requests[before:] if fake else []
        )  # this ask names only ed: no key of another workspace may go with it
        ctx.check(
            "-",
            "a workspace with no key is asked without one: unavailable (401), never bad input",
            not keyless.answers
            and code == 7
            and keyless.unavailable.get("ed", "").startswith("HTTP 401")
            and not [r for r in sent if "authorization" in r.headers],
            "leak",
            f"exit {code}, {len([r for r in sent if 'authorization' in r.headers])} requests with a key",
        )
    before = len(fake.requests) if fake else 0
    stranger, _s, code = ctx.ask(a, "anything", "stranger")
    ctx.check(
        "-",
        "an unknown workspace name is refused before any request",
        code != 0 and not stranger.answers and (not fake or len(fake.requests) == before),
        why=f"exit {code}",
    )


def c12_supersede(ctx: Ctx) -> None:
    a = ctx.agent("ea")
    a.session(
        "s-old",
        turn(1, "when is the dingo deploy window", "the dingo deploy window is tuesday", ts="2026-09-01T09:00:00Z"),
    )
    a.journal(
        "identity_add",
        session="s-old",
        ts="2026-09-01T09:01:00Z",
        file="memory.md",
        entry="the dingo deploy window is tuesday",
    )
    a.journal(
        "identity_replace",
        session="s-new",
        ts="2026-09-20T09:00:00Z",
        file="memory.md",
        old="the dingo deploy window is tuesday",
        entry="the dingo deploy window is thursday",
    )
    a.sync()
    r = ctx.recall(a, "dingo deploy window")
    ctx.check(
        "+",
        "the new entry is ranked first, as identity",
        bool(r.hits) and "thursday" in r.hits[0].text and r.hits[0].tag == "identity",
        why=f"first: {r.hits[0].tag if r.hits else None}",
    )
    old = has(r, "tuesday")
    ctx.check("-", "the old text is never identity", not [h for h in old if h.tag == "identity"])
    ctx.check(
        "+",
        "where the old text still appears (an old turn) it carries its date",
        all(h.date for h in old),
        why=f"{len(old)} old hits, {sum(1 for h in old if h.date)} dated",
    )
