"""The trust boundary, tested like an attacker would: 10,000 generated sessions.

Sessions get random speakers (the owner, another person, none, a name that
is no peer, one named like the agent), tool results labelled untrusted at
random turns, classes that rise to secret in the log or at brokerd, keys of
well-known shapes in the text, and a brokerd that answers late. They run
through the real decide and send against the fake Honcho. Then, from the
generated facts alone (not from bxmem's code):

* no turn of a session untrusted by either source (up to that turn, or by
  brokerd at all) is in the trusted workspace;
* no secret-class turn and no turn with a known-prefix secret is anywhere;
* every local recall hit of a tainted turn is tagged memory-tainted, and a
  result with such a hit carries the untrusted label.
"""

from __future__ import annotations

import json
import os
import random
import sys

import pytest
from helpers import write_log
from test_sanitize import EXAMPLES

from bxmem.commands import decide, recall
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module

SESSIONS = int(os.environ.get("BXMEM_TRUST_SESSIONS", "10000"))
SPEAKERS = ["kyle", "kyle", "ana.lima", None, "two words", "boxmaker0", "x" * 600]
CLASSES = ["public", "public", "private", "private", "secret"]


def generate(rng: random.Random, n: int) -> dict[str, dict]:
    sessions = {}
    for s in range(n):
        turns = []
        for t in range(1, rng.randint(1, 4) + 1):
            results = [
                {"untrusted": rng.random() < 0.25, "class": rng.choice(CLASSES)}
                for _ in range(rng.choice([0, 0, 1, 2]))
            ]
            key = rng.choice(list(EXAMPLES.values())) if rng.random() < 0.08 else None
            turns.append(
                {
                    "n": t,
                    "speaker": rng.choice(SPEAKERS),
                    "results": results,
                    "key": key,
                    "key_in_reply": rng.random() < 0.5,
                    "status": "completed" if rng.random() < 0.92 else rng.choice(["error", "cancelled"]),
                    "reply": rng.random() < 0.97,
                }
            )
        sessions[f"g{s}"] = {
            "turns": turns,
            "broker": (rng.choice(CLASSES), rng.random() < 0.2),
            "late": rng.random() < 0.01,
        }
    return sessions


def log_lines(session: str, spec: dict) -> list[dict]:
    lines = []
    for turn in spec["turns"]:
        n, ts = turn["n"], f"2026-09-27T10:{turn['n']:02d}:00Z"
        text = f"w{session}x{n} question"
        reply = f"w{session}x{n} answer"
        if turn["key"]:
            if turn["key_in_reply"]:
                reply += " " + turn["key"]
            else:
                text += " " + turn["key"]
        user = {"type": "user", "turn": n, "ts": ts, "text": text}
        if turn["speaker"] is not None:
            user["speaker"] = turn["speaker"]
        lines.append(user)
        for i, label in enumerate(turn["results"]):
            lines.append({"type": "tool_result", "turn": n, "ts": ts, "id": f"c{i}", "label": label, "text": "page"})
        if turn["reply"]:
            lines.append({"type": "assistant", "turn": n, "ts": ts, "final": True, "text": reply})
        lines.append({"type": "turn_end", "turn": n, "ts": ts, "status": turn["status"]})
    return lines


def truth(spec: dict) -> dict[int, dict]:
    """Per turn, what the generated facts say (independently of bxmem's rules)."""
    out, tainted, worst = {}, False, "public"
    rank = {"public": 0, "private": 1, "secret": 2}
    broker_class, broker_untrusted = spec["broker"]
    for turn in spec["turns"]:
        for label in turn["results"]:
            tainted = tainted or label["untrusted"]
            worst = max(worst, label["class"], key=rank.__getitem__)
        out[turn["n"]] = {
            "tainted": tainted or broker_untrusted,
            "secret": broker_class == "secret" or worst == "secret",
            "key": turn["key"] is not None,
        }
    return out


@pytest.mark.slow
def test_nothing_crosses_the_trust_boundary(home, brokerd, honcho, configure, capsys):
    rng = random.Random(20261130)
    sessions = generate(rng, SESSIONS)
    configure(honcho.url, batch=10_000)
    for session, spec in sessions.items():
        write_log(home, session, log_lines(session, spec))
        brokerd.states[session] = spec["broker"]
        if spec["late"]:
            brokerd.late_once.add(session)
    brokerd.late_delay = 0.3
    config = config_module.load()
    decide.run(config, broker_timeout=0.1)  # the late ones wait undecided...
    decide.run(config)  # ...and are decided from brokerd's state now
    for _ in range(10):
        if not send.run(config_module.load()).sent:
            break

    facts = {s: truth(spec) for s, spec in sessions.items()}
    counts = {
        "sessions": len(sessions),
        "turns": sum(len(f) for f in facts.values()),
        "trusted": 0,
        "untrusted": 0,
        "violations": 0,
    }
    for message in honcho.messages:
        if message["peer_id"] == "boxmaker0" or message["metadata"].get("part") != 0:
            continue
        _, session, n = message["metadata"]["bxmem_item"].split(":")
        fact = facts[session][int(n)]
        where = "trusted" if message["workspace_id"] == "bm0-trusted" else "untrusted"
        counts[where] += 1
        if fact["secret"] or fact["key"] or (where == "trusted" and fact["tainted"]):
            counts["violations"] += 1
    counts["nowhere"] = counts["turns"] - counts["trusted"] - counts["untrusted"]

    tagged_wrong = 0
    for session in rng.sample(sorted(sessions), 50):
        result = recall.recall(config, f"w{session}x1", k=2)
        for hit in result.hits:
            if facts[session][1]["tainted"] and hit.tag != "memory-tainted":
                tagged_wrong += 1
            if facts[session][1]["secret"] and hit.trust_class != "secret":
                tagged_wrong += 1
        if any(hit.tag == "memory-tainted" for hit in result.hits) and not result.untrusted:
            tagged_wrong += 1
    counts["recall_labels_wrong"] = tagged_wrong
    with capsys.disabled():
        sys.stdout.write("\ntrust boundary: " + json.dumps(counts) + "\n")
    assert counts["violations"] == 0 and tagged_wrong == 0
    assert counts["trusted"] > 0 and counts["untrusted"] > 0 and counts["nowhere"] > 0
