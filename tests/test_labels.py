"""trust/labels.py's tables: a tool result's label (seed 000 section 5) and the tags the
read path gives what it finds (sections 8 and 9), row by row."""

from __future__ import annotations

import pytest
from helpers import write_log

from bxmem.commands import decide, mirror, recall
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.trust.labels import (
    FLEET_LABEL,
    OWN_LABELS,
    UNREADABLE_LINE,
    entry_class,
    note_tag,
    read_tag,
    tool_result_label,
    turn_labels,
)


@pytest.mark.parametrize(
    "label, expected",
    [
        # a label as the interfaces give it: both fields, as they are
        ({"untrusted": False, "class": "private"}, (False, "private")),
        ({"untrusted": True, "class": "secret"}, (True, "secret")),
        ({"untrusted": False, "class": "public", "source": "local"}, (False, "public")),  # other fields ignored
        # anything else cannot be read (None): its line taints the session, untrusted and secret
        (None, None),
        ("untrusted", None),
        (["private"], None),
        ({"untrusted": False}, None),  # no class
        ({"class": "public"}, None),  # no untrusted
        ({"untrusted": 0, "class": "public"}, None),  # not a boolean
        ({"untrusted": "false", "class": "public"}, None),
        ({"untrusted": False, "class": "internal"}, None),  # not one of the three
        ({"untrusted": False, "class": ["private"]}, None),
    ],
)
def test_tool_result_label(label, expected):
    assert tool_result_label(label) == expected


@pytest.mark.parametrize(
    "decided, expected",
    [
        ({"untrusted_by": [], "class": "public"}, ("memory", "public")),
        ({"untrusted_by": ["log"], "class": "private"}, ("memory-tainted", "private")),
        ({"untrusted_by": ["brokerd", "log"], "class": "secret"}, ("memory-tainted", "secret")),
        ({"untrusted_by": [], "class": "private", "secret_rule": "jwt"}, ("memory", "secret")),
        ({"untrusted_by": []}, ("memory", "private")),
    ],
)
def test_turn_labels(decided, expected):
    assert turn_labels(decided) == expected


@pytest.mark.parametrize(
    "trust, tag",
    [
        ("trusted", "memory"),
        ("untrusted", "memory-tainted"),
        ("flagged", "memory-tainted"),
        (None, "memory-tainted"),
        ("Trusted", "memory-tainted"),
    ],
)
def test_note_tag(trust, tag):
    assert note_tag(trust) == tag


def test_entry_class():
    assert entry_class("likes tea") == "private"
    assert entry_class("token ghp_" + "a" * 36) == "secret"


def test_recall_and_ask_tags():
    # seed 8: another agent's trusted workspace: memory if the owner labelled it trusted, else memory-tainted
    assert (read_tag("trusted"), read_tag("untrusted"), read_tag(None)) == (
        "memory",
        "memory-tainted",
        "memory-tainted",
    )
    # seed 8: the fleet workspace: memory-tainted, private
    assert FLEET_LABEL == ("memory-tainted", "private")
    # seed 9: memory for the agent's own trusted workspace, memory-tainted otherwise
    assert OWN_LABELS == {
        "trusted": ("memory", "private"),
        "untrusted": ("memory-tainted", "private"),
        "fleet": ("memory-tainted", "private"),
    }


# --- labels that are not what the tables expect: no crash, the worst case ---------------


def test_a_tool_result_class_that_is_not_a_string_taints_the_session(home, brokerd):
    # A list made higher_class raise (unhashable), so decide failed on that log every run.
    assert tool_result_label({"untrusted": False, "class": ["private"]}) is None
    assert UNREADABLE_LINE == (True, "secret")
    write_log(home, "s", turn_lines(1, "hi", "ok", results=[{"untrusted": False, "class": ["private"]}]))
    report = decide.run(config_module.load())
    assert report.decided == {"none/log-unreadable": 1}


def test_a_note_whose_trust_is_not_a_string_is_indexed_as_tainted(home):
    # A list made the note-tag lookup raise (unhashable), so the index stopped catching up.
    assert note_tag(["trusted"]) == "memory-tainted"
    write_journal(
        home, [{"id": "n1", "ts": "t", "session": "s", "op": "note", "trust": ["trusted"], "entry": "likes tea"}]
    )
    mirror.run(config_module.load())  # refreshes the index
    hits = recall.recall(config_module.load(), "tea").hits
    assert [(h.tag, h.trust_class) for h in hits] == [("memory-tainted", "private")]
