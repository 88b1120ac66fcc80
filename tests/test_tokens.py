"""retrieval/token_bound.py's bound holds for any text, against the real o200k_base (bpe-openai,
a test dependency): the table entry by entry, the facts it assumes of the vocabulary,
random text from all of Unicode, and recall's and ask's outputs over hostile fleet text."""

from __future__ import annotations

import functools
import json
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bxmem.retrieval import token_bound


@functools.cache
def encoding():
    """o200k_base, loaded by the first test that needs it: loading bpe-openai reads its three
    vocabularies (about a second), which every pytest-xdist worker would pay to collect this file."""
    return pytest.importorskip("bpe_openai").get_encoding("o200k_base")  # a test dependency ([test] extra)


WORD = re.compile(r" ?(?:[A-Z]*[a-z]+|[A-Z]+)")


def real(text: str) -> int:
    """o200k_base's count for a text as it would be sent: a lone surrogate as U+FFFD."""
    return len(encoding().encode(text.encode("utf-8", "replace").decode("utf-8")))


def test_every_listed_piece_is_one_token_and_every_one_token_piece_is_listed():
    vocabulary = token_bound.vocabulary()
    listed = [piece for line in vocabulary.lines for piece in line.partition("\t")[2].split("|")]
    assert listed and all(
        line.partition("\t")[0] == piece[: token_bound.PREFIX]
        for line in vocabulary.lines
        for piece in line.partition("\t")[2].split("|")
    )
    assert [piece for piece in listed if len(encoding().encode(piece)) != 1] == []
    every = {v.decode() for v in encoding().token_byte_values() if WORD.fullmatch(v.decode("utf-8", "replace"))}
    assert every - set(listed) == {
        p for p in every if len(encoding().encode(p)) != 1
    }  # listed: each that BPE keeps whole


def test_the_facts_assumed_of_the_vocabulary_hold():
    """Each string of one to three digits is one token; the listed clitics are; every token
    holding a letter and then an apostrophe (one that could join a word and its clitic) is listed."""
    assert all(len(encoding().encode(s)) == 1 for n in range(1000) for s in {str(n), f"{n:02d}", f"{n:03d}"})
    vocabulary = token_bound.vocabulary()
    assert vocabulary.clitics and all(len(encoding().encode(c)) == 1 for c in vocabulary.clitics)
    crossing = {v.decode("utf-8", "replace") for v in encoding().token_byte_values() if re.search(rb"[A-Za-z]'", v)}
    assert {f"{before}'{after}" for before, after in vocabulary.crossing} == crossing


# What a recall or ask output holds: the table's words, clitics, digits, punctuation and
# spaces, and anything of Unicode: astral planes, combining marks, CJK, emoji, lone surrogates,
# what renders as nothing, line breaks of every kind.
_LISTED = [p for line in token_bound.vocabulary().lines[::7] for p in line.partition("\t")[2].split("|")[:3]]
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
PIECES = st.one_of(
    st.sampled_from(_LISTED),
    st.sampled_from(["'s", "'T", "'re", "'VE", "'ll", "'d", "'m", "n't", "'", "\u2019s", "'\u017f"]),
    st.from_regex(r"[0-9]{1,8}", fullmatch=True),
    st.sampled_from(list(' \t\n\r\u3000\u00a0.,;:!?-_/()[]{}"`|<>~#@$%^&*=+\\')),
    st.sampled_from(
        [
            "\u0301",
            "\u0308",
            "\u20dd",
            "\u200b",
            "\u202e",
            "\u2066",
            "\ufeff",
            "\U000e0041",
            "\ufe0f",
            "\u3164",
            "\ud800",
            "\udfff",
            "é",
            "ﬁ",
            "Ǆ",
            "ǅ",
            "ß",
            "İ",
            "K",
            "\u017f",
            "٣",
            "²",
            "Ⅻ",
        ]
    ),
    st.sampled_from(
        [
            "日本語",
            "備份は毎晩",
            "한국어",
            "ไทย",
            "Ελληνικά",
            "кириллица",
            "עברית",
            "العربية",
            "देवनागरी",
            "😀",
            "👍🏽",
            "👨\u200d👩\u200d👧",
            "🏳️\u200d🌈",
            "\U0001d54f",
            "𐐀𐐁",
            "\U0001f9ff\U0001fa80",
        ]
    ),
    st.text(ANY_CHAR, min_size=1, max_size=6),
)
TEXT = st.lists(PIECES, max_size=40).map("".join)


@given(TEXT)
@example("restic backups")
@example("we're kyle's what'S don't it'd I'm '\u017f cat'\u017f McDonald NASA ABc aBc")
@example("2024-01-01 h000123 ٣12 12² x1y2z3 123abc")
@example('\n restic\n\n  restic\tfoo\u3000bar (restic "restic" [1] local | memory')
def test_the_bound_is_never_below_the_real_count(text):
    assert token_bound.bound(text) >= real(text)


@given(st.text(ANY_CHAR, max_size=200))
def test_the_bound_holds_on_any_code_points(text):
    assert token_bound.bound(text) >= real(text)


def test_the_bound_is_within_twice_the_real_count_on_plain_english():
    """The price of a bound that holds for any text: English prose counts about 1.5 times its
    real tokens (a word the table does not hold is counted by its bytes)."""
    prose = (
        "The nightly backups of the family photos go to the NAS at two in the morning; Kyle said "
        "he would check the restic logs on Friday, and Maria wants the old snapshots pruned before the move."
    )
    assert real(prose) <= token_bound.bound(prose) <= 2 * real(prose)


# --- the outputs: recall's and ask's model-facing text over hostile fleet text ---------------

HOSTILE = [
    "restic " + "".join(chr(0x10400 + n % 80) for n in range(700)),  # Deseret: astral, 4 bytes a character
    "restic " + "".join(chr(0x1F300 + n * 7 % 700) for n in range(500)),  # emoji
    "restic " + "e\u0301\u0308\u20dd" * 150,  # combining marks stacked on a letter
    "restic " + " ".join("zqxj" + chr(97 + n % 26) * 3 for n in range(150)),  # words no table holds
    "restic " + "".join(chr(0x0400 + n * 37 % 0x2000) for n in range(700)),  # a scatter of scripts
    "restic " + "1a2b3c4d5e" * 60,  # digits and letters alternating
    "restic's what'S " * 40 + "\u202e\u2066\U000e0041\u200b" * 20,  # clitics, and what renders as nothing
]


@pytest.fixture
def hostile_fleet(home, brokerd, honcho, configure):
    from bxmem.config.loader import load
    from bxmem.honcho.client import WorkspaceClient

    configure(honcho.url)
    with WorkspaceClient(honcho.url, "fleet", None) as fleet:
        fleet.create_peer("mallory", True)
        fleet.create_session("notes", {"mallory": True})
        fleet.add_messages("notes", [{"peer_id": "mallory", "content": text} for text in HOSTILE * 3])
    return load


def test_recall_over_hostile_fleet_text_stays_within_1200_real_tokens(hostile_fleet):
    """A hostile peer's notes in Deseret or emoji, which cost several real tokens a
    character, still give a recall of at most 1,200 real tokens (an estimate that counted
    them at a fraction of their cost let one reach about 2,660)."""
    from helpers import bxmem_main

    for k in ("8", "20", "100"):
        result = bxmem_main("recall", "--json", "-k", k, "--", "restic")
        data = json.loads(result.stdout)
        assert data["hits"], result.stderr
        assert real(data["text"]) <= 1_200, (k, real(data["text"]))


def test_ask_over_hostile_answers_stays_within_its_token_bound(hostile_fleet, honcho):
    """Ask's answers are bounded in tokens, not in characters only: 4,000 characters of a
    dear script are about 12,000 tokens."""
    from bxmem.commands import ask
    from bxmem.retrieval import render

    honcho.workspace_chat = True
    for text in HOSTILE:
        honcho.chat_reply = text * 10
        answer = ask.ask(hostile_fleet(), "restic?", ["fleet"]).answers[0]
        printed = "\n".join(render.content(answer.text))
        assert real(printed) <= ask.ANSWER_TOKENS, real(printed)
