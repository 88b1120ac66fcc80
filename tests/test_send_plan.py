"""send's planner on an outbox alone: no Honcho, no HTTP, no ledger file.

The outbox is folded from ledger events in memory; messages come from a stub
that says how many parts each item has."""

from __future__ import annotations

import pytest

from bxmem.commands.send.plan import LocalFailure, Planner, missing_peers, opening, target
from bxmem.formats.timestamps import format_time
from bxmem.honcho import api as honcho
from bxmem.store.outbox import Outbox
from bxmem.trust.send_retry import Hold

AGENT = "boxmaker0"
WS = "bm0-trusted"


def outbox(*items: tuple, configured: bool = True, attempts: dict | None = None) -> Outbox:
    """`items`: (item, session, peer) for a turn, or (item, None, None) for an edit."""
    box = Outbox()
    if configured:
        box.apply({"ev": "created", "ws": WS, "what": "workspace", "role": "trusted"})
    for offset, (item, session, peer) in enumerate(items):
        kind = "edit" if session is None else "turn"
        box.apply(
            {
                "ev": "decided",
                "item": item,
                "ws": WS,
                "session": session or "s-edit",
                "kind": kind,
                "peer": peer,
                "role": "trusted",
            },
            offset,
        )
    for item, ts in (attempts or {}).items():
        box.apply({"ev": "attempt", "items": [item], "ws": WS, "session": "s1", "hsession": "s1", "ts": ts})
    return box


def planner(box: Outbox, batch: int = 100, parts: dict | None = None, now: float = 1e6) -> tuple[Planner, list]:
    failed: list[tuple[str, str]] = []

    def messages_for(item: dict) -> list[dict]:
        n = (parts or {}).get(item["item"], 2)
        if n == 0:
            raise LocalFailure("holds a secret (test)")
        return [{"metadata": {"bxmem_item": item["item"], "part": i}} for i in range(n)]

    def fail(item: dict, why: str) -> None:
        # As the runner does: a failed line, folded into the outbox, takes the item out.
        box.apply({"ev": "failed", "item": item["item"], "ws": item["ws"], "reason": why})
        failed.append((item["item"], why))

    plan = Planner(
        box, list(box.pending), batch, Hold(box.attempts, now, honcho.settle_wait_s()), AGENT, messages_for, fail
    )
    return plan, failed


def units(plan: Planner) -> list[tuple]:
    """Every unit of the run, as (first item, the items of its group or None)."""
    out = []
    while (unit := plan.next_unit()) is not None:
        out.append((unit.item["item"], [i["item"] for i in unit.group.items] if unit.group else None))
    return out


def test_a_group_pulls_its_sessions_later_turns_from_the_whole_outbox():
    # decide interleaves sessions; one request per Honcho session, in outbox order.
    box = outbox(("a1", "a", "kyle"), ("b1", "b", "kyle"), ("a2", "a", "kyle"), ("b2", "b", "kyle"))
    plan, failed = planner(box)
    assert units(plan) == [("a1", ["a1", "a2"]), ("b1", ["b1", "b2"])]
    assert failed == []


@pytest.mark.parametrize(
    "batch, expected",
    [
        (1, [("a1", ["a1"])]),
        (3, [("a1", ["a1", "a2"]), ("b1", ["b1"])]),
        (100, [("a1", ["a1", "a2"]), ("b1", ["b1", "b2"])]),
    ],
)
def test_a_run_handles_at_most_batch_items(batch, expected):
    box = outbox(("a1", "a", "kyle"), ("b1", "b", "kyle"), ("a2", "a", "kyle"), ("b2", "b", "kyle"))
    assert units(planner(box, batch=batch)[0]) == expected


def test_a_new_speaker_ends_the_group_and_starts_the_next_honcho_session():
    box = outbox(("a1", "a", "kyle"), ("a2", "a", "kyle"), ("a3", "a", "maria"), ("a4", "a", "kyle"))
    plan, _ = planner(box)
    first = plan.next_unit()
    assert first is not None and first.group is not None
    assert [i["item"] for i in first.group.items] == ["a1", "a2"]  # a4 may not overtake a3
    assert (first.group.hsession, first.group.n, first.group.peers, first.group.new_session) == (
        "a",
        1,
        [AGENT, "kyle"],
        True,
    )
    assert missing_peers(box, first.group) == [AGENT, "kyle"]
    assert opening(first.group, ["kyle"], AGENT) == [
        ("create_peer", "kyle", True),
        ("create_session", "a", {AGENT: False, "kyle": True}, {"bx_session": "a", "source": "bxmem"}),
    ]


@pytest.mark.parametrize(
    "known, peer, expected",
    [
        (None, "kyle", ("a", 1, [AGENT, "kyle"], True)),
        ({"name": "a", "n": 1, "peers": [AGENT, "kyle"]}, "kyle", ("a", 1, [AGENT, "kyle"], False)),
        ({"name": "a", "n": 1, "peers": [AGENT, "kyle"]}, "maria", ("a-2", 2, [AGENT, "kyle", "maria"], True)),
        # made for a memory write before anyone spoke: the first speaker joins it
        ({"name": "a", "n": 1, "peers": [AGENT]}, "kyle", ("a", 1, [AGENT, "kyle"], True)),
    ],
)
def test_target_session(known, peer, expected):
    assert target(known, peer, "a", AGENT, {}) == expected


def test_an_item_that_fails_here_is_reported_and_the_rest_goes_on():
    box = outbox(("a1", "a", "kyle"), ("a2", "a", "kyle"), ("a3", "a", "kyle"), ("b1", "b", "kyle"))
    plan, failed = planner(box, parts={"a1": 0, "a2": 0})
    # a1 fails as a group's first item, a2 as a later one: both named, a3 still goes.
    assert units(plan) == [("a3", ["a3"]), ("b1", ["b1"])]
    assert failed == [("a1", "holds a secret (test)"), ("a2", "holds a secret (test)")]


def test_a_group_stays_within_one_requests_messages():
    box = outbox(("a1", "a", "kyle"), ("a2", "a", "kyle"), ("a3", "a", "kyle"))
    parts = {"a1": 60, "a2": 40, "a3": 1}
    assert units(planner(box, parts=parts)[0]) == [("a1", ["a1", "a2"]), ("a3", ["a3"])]
    assert honcho.MAX_BATCH == 60 + 40


def test_edits_and_in_doubt_turns_are_units_of_their_own_and_a_recent_attempt_holds_its_session():
    now = 1e6
    box = outbox(
        ("e1", None, None),
        ("a1", "a", "kyle"),
        ("a2", "a", "kyle"),
        ("s1", "s1", "kyle"),
        ("s2", "s1", "kyle"),
        ("b1", "b", "kyle"),
        attempts={"a1": format_time(now - 10_000), "s1": format_time(now - 1)},
    )
    plan, _ = planner(box, now=now)
    # a1's attempt is old: it is looked up now; s1's may still be in Honcho's hands, so s1
    # and the later turn of its session wait, and the other sessions go on.
    assert units(plan) == [("e1", None), ("a1", None), ("a2", ["a2"]), ("b1", ["b1"])]
    assert plan.hold.items == {"s1", "s2"}


def test_the_next_group_is_planned_ahead_only_for_another_session_in_a_set_up_workspace():
    box = outbox(("a1", "a", "kyle"), ("a2", "a", "kyle"), ("b1", "b", "kyle"), ("e1", None, None))
    plan, _ = planner(box, batch=100, parts={"a1": 99})  # a2 cannot join a1's request
    first = plan.next_unit()
    assert first is not None and first.group is not None
    current = first.group
    assert plan.plan_ahead(current) == (None, False)  # a2: the same session, after a1
    plan.next_unit()  # a2
    unit, opens = plan.plan_ahead(current)
    assert unit is not None and unit.group is not None
    assert unit.group.items[0]["item"] == "b1" and opens
    assert plan.plan_ahead(unit.group) == (None, False)  # an edit may create sessions: never early


def test_nothing_is_planned_ahead_before_the_workspace_is_set_up():
    box = outbox(("a1", "a", "kyle"), ("b1", "b", "kyle"), configured=False)
    plan, _ = planner(box)
    first = plan.next_unit()
    assert first is not None and first.group is not None
    assert plan.plan_ahead(first.group) == (None, False)
