"""Many agents against one Honcho: after an outage they do not come back in lockstep.

Simulated time: each home's send runs at the moment its backoff ends, on an
injected clock, with its own seeded jitter, so the test is deterministic and
takes no real time beyond the requests themselves.
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise

from helpers import write_log

from bxmem.commands import decide
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines
from bxmem.store.outbox import read_checkpoint
from bxmem.trust.send_retry import FIRST_DELAY_S, MAX_DELAY_S, jittered

HOMES = 12
T0 = 1_000_000.0
OUTAGE_S = 900.0  # Honcho answers 500 to everything for 15 minutes


def fleet(tmp_path, home, honcho_url):
    """Twelve agents, each with its own home, workspaces and turns (brokerd shared)."""
    agents = []
    for n in range(HOMES):
        agent_home = tmp_path / f"agent{n}"
        (agent_home / "memory").mkdir(parents=True)
        config = tmp_path / f"agent{n}.toml"
        config.write_text(
            f'[honcho]\nurl = "{honcho_url}"\nagent = "agent{n}"\nowner = "kyle"\n'
            f'trusted = "a{n}-trusted"\nuntrusted = "a{n}-untrusted"\nfleet = "fleet{n}"\n'
            f'[paths]\nrun = "{home / "run"}"\n'
        )
        for s in range(3):
            write_log(agent_home, f"s{s}", turn_lines(s + 1, f"agent {n} asks {s}", f"agent {n} answers {s}"))
        agents.append((config, agent_home))
        decide.run(load(config, agent_home))
    return agents


def load(config, agent_home):
    return config_module.load(config, home=agent_home)


def backoff_until(agent_home) -> float | None:
    box, _why = read_checkpoint(agent_home / "memory" / "bxmem")
    return box["backoff"]["until"] if box and box.get("backoff") else None


def test_a_fleet_comes_back_spread_out_and_loses_or_doubles_nothing(tmp_path, home, brokerd, honcho):
    agents = fleet(tmp_path, home, honcho.url)
    honcho.inject("status", match=".", status=500, times=10**6)
    rngs = [random.Random(n) for n in range(HOMES)]
    tries: list[list[float]] = [[] for _ in range(HOMES)]
    due = [T0] * HOMES  # the outage meets every agent at the same instant
    recovered = False
    while True:
        n = min(range(HOMES), key=lambda i: due[i])
        now = due[n]
        if now == float("inf"):
            break
        if not recovered and now >= T0 + OUTAGE_S:
            with honcho.lock:
                honcho.faults.clear()
            recovered = True
        config, agent_home = agents[n]
        report = send.run(load(config, agent_home), clock=lambda now=now: now, rng=rngs[n])
        tries[n].append(now)
        if report.outage:
            until = backoff_until(agent_home)
            assert until is not None, "an outage backs off"
            due[n] = until
        else:
            assert report.sent == 3 and report.pending == 0, report
            due[n] = float("inf")

    # Every wait stays within the bounds, 5 s to 10 minutes.
    waits = [b - a for t in tries for a, b in pairwise(t)]
    assert waits and all(FIRST_DELAY_S <= w <= MAX_DELAY_S for w in waits), waits
    # No two agents ever try at the same instant, from the first retry on, and the
    # fleet's return after the outage is spread over minutes, not one instant.
    for k in range(1, min(len(t) for t in tries)):
        assert len({round(t[k], 3) for t in tries}) == HOMES, (k, [t[k] for t in tries])
    back = sorted(t[-1] for t in tries)
    assert back[-1] - back[0] > 60, back
    busiest = max(sum(1 for b in back if start <= b < start + 5) for start in back)
    assert busiest <= 3, back  # at most 3 of 12 agents within any 5 s after the outage

    # Nothing lost, nothing doubled: each agent's three turns, two parts each, once.
    for n in range(HOMES):
        parts = Counter(
            (m["metadata"]["bxmem_item"], m["metadata"]["part"]) for m in honcho.messages_in(f"a{n}-trusted")
        )
        assert parts == Counter({(f"turn:s{s}:{s + 1}", p): 1 for s in range(3) for p in range(2)}), (n, parts)
    assert len(honcho.messages) == HOMES * 6


def test_the_jitter_keeps_within_bounds_and_spreads():
    rng = random.Random(3)
    for delay in (5.0, 10.0, 80.0, 320.0, 600.0):
        waits = [jittered(delay, rng) for _ in range(2000)]
        assert min(waits) >= FIRST_DELAY_S and max(waits) <= MAX_DELAY_S
        assert max(waits) - min(waits) > delay * 0.4  # spread, not a fixed step
        assert (
            abs(sum(waits) / len(waits) - (max(FIRST_DELAY_S, delay / 2) + min(MAX_DELAY_S, delay * 1.5)) / 2)
            < delay * 0.05
        )
