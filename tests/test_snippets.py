"""A hit's text: at most 600 characters, around what matched, both halves of a turn visible (bxmem/retrieval/snippets.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bxmem.retrieval.snippets import ELLIPSIS, OTHER_HALF, SNIPPET_CHARS, around

FILLER = "the nightly report lists every job and its duration in minutes "


def _turn(said: str, reply: str) -> tuple[str, int]:
    return f"{said}\n{reply}", len(said) + 1


def _mark(text: str, word: str) -> list[tuple[int, int]]:
    at = text.index(word)
    return [(at, at + len(word))]


def test_a_text_that_fits_is_shown_whole():
    assert around("  the restic backups\nrun nightly  ", 21, []) == "the restic backups\nrun nightly"
    exact = "x" * SNIPPET_CHARS
    assert around(exact, None, []) == exact


def test_the_match_in_a_long_prompt_is_shown_with_the_start_of_the_reply():
    said = FILLER * 10 + "remember the wolverine cache key rotates hourly " + FILLER * 10
    text, reply_at = _turn(said, "Noted: hourly rotation. " + FILLER * 5)
    snippet = around(text, reply_at, _mark(text, "wolverine"))
    assert len(snippet) <= SNIPPET_CHARS
    assert "wolverine cache key rotates hourly" in snippet
    assert "\nNoted: hourly rotation." in snippet  # the reply half stays visible
    assert snippet.startswith(ELLIPSIS)  # the cut is marked


def test_a_match_in_the_reply_keeps_the_beginning_of_what_was_said():
    said = "can you summarise the deploy log for me? " + FILLER * 8
    reply = FILLER * 8 + "the otter deploy failed on step 7 " + FILLER * 8
    text, reply_at = _turn(said, reply)
    snippet = around(text, reply_at, _mark(text, "otter"))
    assert snippet.startswith("can you summarise the deploy log")
    assert "the otter deploy failed on step 7" in snippet
    assert len(snippet.split("\n", 1)[0]) <= OTHER_HALF


def test_without_a_mark_a_long_text_is_its_beginning():
    text = FILLER * 20
    snippet = around(text, None, [])
    assert snippet.startswith(FILLER[:40]) and snippet.endswith(ELLIPSIS) and len(snippet) <= SNIPPET_CHARS


def test_the_densest_run_of_matches_is_chosen():
    text = "restic " + FILLER * 10 + "restic prune and restic check on the nas " + FILLER * 10
    marks = [(m, m + 6) for m in range(len(text)) if text.startswith("restic", m)]
    assert "restic prune and restic check" in around(text, None, marks)


@given(
    said=st.text(max_size=1500), reply=st.none() | st.text(max_size=1500), at=st.floats(0, 1), width=st.integers(1, 30)
)
def test_never_longer_than_the_cap(said, reply, at, width):
    text, reply_at = (said, None) if reply is None else _turn(said, reply)
    start = int(at * max(0, len(text) - width))
    snippet = around(text, reply_at, [(start, start + width)] if text else [])
    assert len(snippet) <= SNIPPET_CHARS
    if len(text.strip()) <= SNIPPET_CHARS:
        assert snippet == text.strip()
