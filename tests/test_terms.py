"""What reaches the local index from a query, and how a long text is cut into passages (bxmem/retrieval/terms.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bxmem.retrieval.terms import FORMS, MAX_TERMS, forms, passages, query_words


def test_a_clitic_is_cut_not_made_a_word():
    assert query_words("what is restic's schedule?") == ["restic", "schedule"]
    assert query_words("Kyle\u2019s NAS isn't full") == ["kyle", "nas", "isn", "full"]  # a curly apostrophe too
    assert "s" not in query_words("the backups' rotation, restic's prune")


def test_common_words_are_left_out_and_each_word_kept_once():
    assert query_words("what did kyle say about the backups?") == ["kyle", "say", "backups"]
    assert query_words("Backups BACKUPS backups") == ["backups"]
    assert query_words("the of and") == []
    assert len(query_words(" ".join(f"w{n}" for n in range(100)))) == MAX_TERMS


def test_irregular_forms_are_one_family():
    assert set(forms("went")) == set(forms("go")) == {"go", "went", "gone"}
    assert forms("took")[0] == "took"  # the word itself first
    assert forms("backup") == ("backup",)
    for form, family in FORMS.items():
        assert form in family and all(FORMS[other] == family for other in family), form


@given(
    st.lists(st.sampled_from(["a", "bb", " ", "\n", "  ", "é", "x\n", "\t"]), max_size=400).map("".join),
    st.integers(min_value=2, max_value=40),
)
def test_passages_cover_the_text_end_to_end_each_within_its_word_limit(text, most):
    cut = passages(text, most)
    assert "".join(text[start : start + length] for start, length in cut) == text
    assert all(length >= 0 for _start, length in cut)
    for start, length in cut:
        assert len(text[start : start + length].split()) <= most


def test_a_passage_ends_at_a_line_break_in_its_second_half():
    text = " ".join(["w"] * 20) + "\n" + " ".join(["v"] * 20)
    first = passages(text, 30)[0]
    assert text[first[0] : first[0] + first[1]].rstrip(" ").endswith("w\n")
    assert passages("a short text", 30) == [(0, 12)]
