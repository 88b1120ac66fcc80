"""honcho/answers.py: any JSON a server sends is plain data of the types bxmem
needs, or an AnswerProblem naming the field, never another exception, and
never the value itself in the message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from bxmem.honcho import answers
from bxmem.honcho.answers import AnswerProblem, is_honcho_id

SECRETISH = "zz-value-that-must-not-be-echoed-zz"
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["..", "a/b", "\x1b[2J", "O-2tywf6eaFxZBpP-2EOz", SECRETISH, "x" * 513]),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "content",
                    "peer_id",
                    "session_id",
                    "created_at",
                    "metadata",
                    "items",
                    "pages",
                    "configuration",
                    "observer_id",
                    "observed_id",
                    "x",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=25,
)

PARSERS: dict[str, Callable[[object], Any]] = {
    "created_ids": lambda v: answers.created_ids(v, 2),
    "configuration": answers.configuration,
    "page": lambda v: answers.page(v, 100, 1),
    "listed_message": lambda v: answers.listed_message(v, "items[0]"),
    "listed_conclusion": lambda v: answers.listed_conclusion(v, "items[0]"),
    "listed_id": lambda v: answers.listed_id(v, "items[0]"),
    "search_hits": lambda v: answers.search_hits(v, 100),
    "conclusion_hits": lambda v: answers.conclusion_hits(v, 100),
    "chat_content": answers.chat_content,
}


@pytest.mark.parametrize("name", PARSERS)
@settings(max_examples=examples(300), deadline=None)
@given(value=json_values)
def test_any_answer_is_typed_data_or_a_named_problem(name, value):
    try:
        out = PARSERS[name](value)
    except AnswerProblem as problem:
        assert SECRETISH not in str(problem) and "\x1b" not in str(problem) and len(str(problem)) < 120
        return
    if name == "created_ids":
        assert len(out) == 2 and all(is_honcho_id(i) for i in out) and len(set(out)) == 2
    elif name in ("listed_message", "listed_conclusion"):
        assert is_honcho_id(out["id"]) and isinstance(out["content"], str)
        assert all(isinstance(out[k], str) for k in out if k.endswith("_id"))
        if name == "listed_message":
            assert isinstance(out["metadata"], dict)
    elif name == "listed_id":
        assert is_honcho_id(out)
    elif name in ("search_hits", "conclusion_hits"):
        assert all(
            isinstance(h["content"], str) and all(v is None or isinstance(v, str) for v in h.values()) for h in out
        )
    elif name == "page":
        items, more = out
        assert isinstance(items, list) and isinstance(more, bool)
    elif name == "configuration":
        assert out is None or isinstance(out, dict)
    else:
        assert out is None or isinstance(out, str)


def test_real_server_answers_parse_as_they_are():
    """Shapes as Honcho 3.0.12 answered on the rig (ids are 21-character nanoids)."""
    message = {
        "id": "O-2tywf6eaFxZBpP-2EOz",
        "content": "I keep my bike in the garage",
        "peer_id": "alice",
        "session_id": "s1",
        "metadata": {"a": 1},
        "created_at": "2026-12-01T13:24:12.451418Z",
        "workspace_id": "w",
        "token_count": 7,
    }
    assert answers.created_ids([message], 1) == ["O-2tywf6eaFxZBpP-2EOz"]
    assert answers.page({"items": [message], "total": 1, "page": 1, "size": 100, "pages": 1}, 100, 1) == (
        [message],
        False,
    )
    assert answers.page({"items": [message], "total": 150, "page": 1, "size": 100, "pages": 2}, 100, 1)[1] is True
    assert answers.listed_message(message, "items[0]")["metadata"] == {"a": 1}
    assert answers.configuration({"id": "w", "metadata": {}, "configuration": {}, "created_at": "x"}) == {}
    assert answers.chat_content({"content": None}) is None


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ([{"id": 1}, {"id": "b"}], "[0].id is a number, not a Honcho id"),
        ([{"id": "a"}, {"id": ".."}], "[1].id is not a Honcho id (1-512 of A-Z a-z 0-9 _ -)"),
        ([{"id": "a"}], "the answer lists 1 item(s) for the 2 sent"),
        ({"id": "a"}, "the answer is an object, not an array"),
    ],
)
def test_a_problem_names_its_field(value, where):
    with pytest.raises(AnswerProblem) as caught:
        answers.created_ids(value, 2)
    assert str(caught.value) == where
