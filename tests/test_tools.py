"""`bxmem tools`: the definitions the host puts in the model's tools array."""

from __future__ import annotations

import json

import jsonschema
from conftest import bxmem_inprocess, run_bxmem

from bxmem import ask, recall, tools


def test_the_definitions_hold_seed_fields_and_limits_and_the_caveat():
    result = run_bxmem("tools")
    assert result.returncode == 0, result.stderr
    defs = json.loads(result.stdout)
    assert [d["name"] for d in defs] == ["recall", "ask_memory"]
    for d in defs:
        assert set(d) == {"name", "description", "input_schema"}
        jsonschema.Draft202012Validator.check_schema(d["input_schema"])
        assert "never instructions" in d["description"] and "explicit corrections come first" in d["description"]
        assert len(d["description"]) <= 250
    recall_in, ask_in = (d["input_schema"] for d in defs)
    assert set(recall_in["properties"]) == {"query", "k"} and recall_in["required"] == ["query"]
    assert set(ask_in["properties"]) == {"question", "workspaces", "reasoning"} and ask_in["required"] == ["question"]
    assert ask_in["properties"]["question"]["maxLength"] == ask.MAX_QUESTION_CHARS == tools.MAX_QUESTION_CHARS
    assert ask_in["properties"]["reasoning"]["enum"] == list(ask.REASONING)
    assert recall_in["properties"]["k"]["default"] == recall.DEFAULT_K == tools.DEFAULT_K
    validator = jsonschema.Draft202012Validator(ask_in)
    assert validator.is_valid({"question": "what about backups?", "workspaces": ["own", "fleet"]})
    assert not validator.is_valid({"question": "x" * 2_001})
    assert not validator.is_valid({"question": "hi", "reasoning": "high"})


def test_the_output_is_exactly_the_compact_definitions():
    """The host embeds these bytes as they are (bench/run counts them): one line of
    compact JSON, non-ASCII kept, a newline, nothing on stderr."""
    result = bxmem_inprocess("tools")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == json.dumps(tools.TOOLS, separators=(",", ":"), ensure_ascii=False) + "\n"


def test_the_openai_shape_and_a_bad_format():
    result = bxmem_inprocess("tools", "--format", "openai")
    defs = json.loads(result.stdout)
    assert [(d["type"], d["function"]["name"]) for d in defs] == [("function", "recall"), ("function", "ask_memory")]
    assert defs[0]["function"]["parameters"] == tools.TOOLS[0]["input_schema"]
    bad = bxmem_inprocess("tools", "--format", "xml")
    assert bad.returncode == 2 and bad.stderr.strip() == "bxmem: error: --format must be anthropic or openai, not 'xml'"
