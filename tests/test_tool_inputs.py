"""Every input a tool schema admits is one the CLI takes: generated from each schema
`bxmem tools` prints, validated by it, turned into argv as docs/agent-tools.md section 3
says (tests/reference_host.py), and run through the real CLI, which must never answer
exit 2 (bad input) to it. The generator knows every keyword the schemas use, and the
test fails on one it does not know, so a schema cannot grow past what is checked."""

from __future__ import annotations

import json

import jsonschema
import pytest
from helpers import bxmem_main
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from reference_host import Host

from bxmem.commands import recall, tools
from bxmem.config import loader as config_module

READS = '\n[[honcho.read]]\nagent = "boxmaker1"\nworkspace = "boxmaker1-trusted"\n'
KNOWN = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "minLength",
    "maxLength",
    "pattern",
    "description",
    "minimum",
    "maximum",
    "default",
    "items",
    "enum",
    "minItems",
    "maxItems",
    "uniqueItems",
}
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())


def keywords(schema: object) -> set[str]:
    if isinstance(schema, dict):
        found = set(schema)
        for key, value in schema.items():
            if key == "properties":
                found |= {k for v in value.values() for k in keywords(v)}
            elif key == "items":
                found |= keywords(value)
        return found
    return set()


def number(schema: dict) -> st.SearchStrategy:
    """An integer as a JSON document may spell it: 8, 8.0, or what a float that is whole prints as."""
    whole = st.integers(schema.get("minimum", -(10**6)), schema.get("maximum", 10**6))
    return st.one_of(whole, whole.map(float))


def strategy(schema: dict) -> st.SearchStrategy:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "string":
        text = st.text(ANY_CHAR, min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 50))
        return text | st.sampled_from(["  x ", "\u3000\ufeff?", "\x1c", "\x00a\x00", "\ud800", " \n\t"])
    if kind == "integer":
        return number(schema)
    if kind == "array":
        items = schema["items"]
        return st.lists(
            strategy(items),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems", 5),
            unique=schema.get("uniqueItems", False),
        )
    if kind == "object":
        props = schema["properties"]
        required = {name: strategy(props[name]) for name in schema.get("required", [])}
        optional = {name: strategy(s) for name, s in props.items() if name not in required}
        return st.fixed_dictionaries(required, optional=optional)
    raise AssertionError(f"no generator for a schema of type {kind!r}")


@pytest.fixture
def offered(configure):
    configure("http://127.0.0.1:9", extra=READS)  # Honcho refused: every run is quick, none reads memory from it
    return {d["name"]: d["input_schema"] for d in tools.definitions(config_module.load())}


def test_the_generator_knows_every_keyword_the_schemas_use(offered):
    for name, schema in offered.items():
        assert keywords(schema) <= KNOWN, (name, keywords(schema) - KNOWN)


def _run(offered: dict, tool: str, call: dict) -> None:
    validator = jsonschema.Draft202012Validator(offered[tool])
    if not validator.is_valid(call):  # what the generator makes beyond the schema: the host answers it
        return
    argv = Host([], {}).argv(tool, json.loads(json.dumps(call)))
    result = bxmem_main(*argv)
    assert result.returncode != 2, (call, argv, result.stderr)
    assert result.returncode in (0, 7), (call, result.returncode, result.stderr[-300:])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(st.data())
@example(None)
def test_every_recall_input_the_schema_admits_the_cli_takes(offered, data):
    """Every input the recall tool's schema admits, the CLI takes: `k: 8.0` (a JSON Schema
    integer is any whole number) and a query led by an ideographic space among them."""
    calls: list[dict] = (
        [{"query": "backups", "k": 8.0}, {"query": "backups", "k": 20}, {"query": "\u3000x"}]
        if data is None
        else [data.draw(strategy(offered["recall"]))]
    )
    for call in calls:
        _run(offered, "recall", call)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=20)
@given(st.data())
@example(None)
def test_every_ask_input_the_schema_admits_the_cli_takes(offered, data):
    calls = (
        [{"question": "anyone?", "workspaces": ["own", "fleet", "boxmaker1"], "reasoning": "low"}]
        if data is None
        else [data.draw(strategy(offered["ask_memory"]))]
    )
    for call in calls:
        _run(offered, "ask_memory", call)


def test_what_the_cli_refuses_as_blank_the_schemas_refuse(offered):
    for blank in ("   ", "\u3000", "\x00", "\t\n\u2028", "\xa0\u205f"):
        assert not jsonschema.Draft202012Validator(offered["recall"]).is_valid({"query": blank})
        assert not jsonschema.Draft202012Validator(offered["ask_memory"]).is_valid({"question": blank})


@pytest.mark.parametrize("spelled", ["8", "8.0", "8e0", "0.8e1", "80e-1", "8.000"])
def test_k_is_taken_as_any_json_spelling_of_a_whole_number(spelled):
    assert recall.parse_k(spelled) == 8


@pytest.mark.parametrize("spelled", ["8.5", "0", "101", "-8", "1e400", ".8", "e8", "8e", "\uff18", " 8", "1e-2", "nan"])
def test_k_that_is_no_whole_number_in_range_is_refused(spelled):
    from bxmem.errors import UsageError

    with pytest.raises(UsageError, match="-k must be a whole number from 1 to 100"):
        recall.parse_k(spelled)
