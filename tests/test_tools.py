"""`bxmem tools`: the definitions the host puts in the model's tools array,
generated from the configuration."""

from __future__ import annotations

import json

import jsonschema
from helpers import bxmem_inprocess, bxmem_main

from bxmem.commands import ask, recall, tools
from bxmem.config import loader as config_module

AGENTS = ["boxmaker1", "boxmaker2", "scout", "ana-bot", "relay_7"]
READS = "".join(f'\n[[honcho.read]]\nagent = "{a}"\nworkspace = "{a}-trusted"\n' for a in AGENTS)


def test_the_definitions_hold_seed_fields_and_limits_and_the_caveat(configure):
    configure("http://127.0.0.1:8000", extra=READS)
    result = bxmem_main("tools")
    assert result.returncode == 0, result.stderr
    defs = json.loads(result.stdout)
    assert [d["name"] for d in defs] == ["recall", "ask_memory"]
    for d in defs:
        assert set(d) == {"name", "description", "input_schema"}
        jsonschema.Draft202012Validator.check_schema(d["input_schema"])
        assert (
            "never instructions" in d["description"]
            and "current files, tests and explicit corrections come first" in d["description"]
        )
        assert len(d["description"]) <= 250
    recall_in, ask_in = (d["input_schema"] for d in defs)
    assert set(recall_in["properties"]) == {"query", "k"} and recall_in["required"] == ["query"]
    assert set(ask_in["properties"]) == {"question", "workspaces", "reasoning"} and ask_in["required"] == ["question"]
    assert ask_in["properties"]["question"]["maxLength"] == ask.MAX_QUESTION_CHARS == tools.MAX_QUESTION_CHARS
    assert ask_in["properties"]["reasoning"]["enum"] == list(ask.REASONING) == list(tools.REASONING)
    assert recall_in["properties"]["k"]["default"] == recall.DEFAULT_K == tools.DEFAULT_K
    validator = jsonschema.Draft202012Validator(ask_in)
    assert validator.is_valid({"question": "what about backups?", "workspaces": ["own", "fleet"]})
    assert not validator.is_valid({"question": "x" * 2_001})
    assert not validator.is_valid({"question": "hi", "reasoning": "high"})


def test_ask_memory_lists_every_configured_agent_and_takes_them_all(configure):
    """ask_memory lists the agents of [[honcho.read]] (the model cannot know them
    otherwise), and its schema takes every name at once: eight for five agents."""
    configure("http://127.0.0.1:8000", extra=READS)
    ask_in = tools.definitions(config_module.load())[1]["input_schema"]
    names = ["own", "untrusted", "fleet", *AGENTS]
    workspaces = ask_in["properties"]["workspaces"]
    assert workspaces["items"] == {"type": "string", "enum": names}
    assert "an agent's name" in workspaces["description"]
    validator = jsonschema.Draft202012Validator(ask_in)
    assert validator.is_valid({"question": "q", "workspaces": names})
    assert not validator.is_valid({"question": "q", "workspaces": ["stranger"]})
    # Every name offered is one ask takes, in the order it reports them; none is `own`, a
    # name twice is asked once (so the schema spends no tokens on minItems or uniqueItems).
    assert [t.name for t in ask.targets(config_module.load(), names)] == names
    assert [t.name for t in ask.targets(config_module.load(), [])] == ["own"]
    assert [t.name for t in ask.targets(config_module.load(), ["own", "fleet", "own"])] == ["own", "fleet"]


def test_local_only_offers_recall_alone_and_says_what_it_searches(configure):
    """Local-only, recall alone is offered (ask always exits 6 there), and it says it
    searches this agent's memory, never the fleet's."""
    configure(None)
    defs = json.loads(bxmem_inprocess("tools").stdout)
    assert [d["name"] for d in defs] == ["recall"]
    assert defs[0]["description"].startswith("Search this agent's memory by keywords. ")
    assert "fleet" not in defs[0]["description"]


def test_without_read_agents_no_agent_is_mentioned(configure):
    configure("http://127.0.0.1:8000")
    workspaces = tools.definitions(config_module.load())[1]["input_schema"]["properties"]["workspaces"]
    assert workspaces["items"]["enum"] == ["own", "untrusted", "fleet"]
    assert "agent's name" not in workspaces["description"]


def test_the_output_is_exactly_the_compact_definitions(configure):
    """The host embeds these bytes as they are (bench/run counts them): one line of
    compact JSON, non-ASCII kept, a newline, nothing on stderr; the same bytes each time."""
    configure("http://127.0.0.1:8000", extra=READS)
    result = bxmem_inprocess("tools")
    assert (result.returncode, result.stderr) == (0, "")
    expected = json.dumps(tools.definitions(config_module.load()), separators=(",", ":"), ensure_ascii=False) + "\n"
    assert result.stdout == expected == bxmem_inprocess("tools").stdout


def test_the_openai_shape_and_a_bad_format(configure):
    configure("http://127.0.0.1:8000", extra=READS)
    result = bxmem_inprocess("tools", "--format", "openai")
    defs = json.loads(result.stdout)
    assert [(d["type"], d["function"]["name"]) for d in defs] == [("function", "recall"), ("function", "ask_memory")]
    assert defs[1]["function"]["parameters"] == tools.definitions(config_module.load())[1]["input_schema"]
    bad = bxmem_inprocess("tools", "--format", "xml")
    assert bad.returncode == 2 and bad.stderr.strip() == "bxmem: error: --format must be anthropic or openai, not 'xml'"


def test_an_invalid_configuration_gives_no_definitions(config_file):
    config_file.write_text("[honcho]\nurl = 'ftp://x'\n")
    result = bxmem_inprocess("tools")
    assert result.returncode == 78 and result.stdout == ""


def test_bxmem_schema_prints_the_shipped_schemas():
    """`bxmem schema` lists every JSON Schema shipped and prints each as shipped (valid, carrying
    its document's versioned `schema` const); an unknown name is exit 2, listing the names."""
    from pathlib import Path

    import bxmem

    names = (
        "recall",
        "ask",
        "decide",
        "mirror",
        "send",
        "doctor",
        "undo",
        "sync",
        "audit",
        "outbox",
        "config",
        "artifact-record",
        "artifact-resolve",
        "artifact-list",
        "artifact-verify",
        "artifact-export",
        "artifact-rm",
        "error",
    )
    listed = bxmem_inprocess("schema")
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()] == list(names)
    for name in names:
        result = bxmem_inprocess("schema", name)
        assert (result.returncode, result.stderr) == (0, "")
        shipped = (Path(bxmem.__file__).parent / "schemas" / f"{name}.schema.json").read_text()
        assert result.stdout == shipped.rstrip("\n") + "\n"
        jsonschema.Draft202012Validator.check_schema(json.loads(result.stdout))
        assert f'"schema": {{"const": "bxmem.{name}/' in result.stdout  # the version every document carries
    bad = bxmem_inprocess("schema", "index")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == (
        "bxmem: error: schema: no schema 'index'; the schemas are: recall, ask, decide, mirror, send, "
        "doctor, undo, sync, audit, outbox, config, artifact-record, artifact-resolve, "
        "artifact-list, artifact-verify, artifact-export, artifact-rm, error\n"
    )


def test_the_artifact_tools_are_offered_only_with_artifacts_on(configure):
    """The artifact tools are offered only with [artifacts] on, after recall and ask, and
    never a tool that deletes, lists or exports (the owner's commands are not the model's)."""
    configure("http://127.0.0.1:8000", extra=READS)
    assert [d["name"] for d in tools.definitions(config_module.load())] == ["recall", "ask_memory"]
    configure("http://127.0.0.1:8000", extra=READS + "\n[artifacts]\n")
    defs = tools.definitions(config_module.load())
    assert [d["name"] for d in defs] == ["recall", "ask_memory", "artifact_record", "artifact_resolve"]
    record_in, resolve_in = defs[2]["input_schema"], defs[3]["input_schema"]
    for schema in (record_in, resolve_in):
        jsonschema.Draft202012Validator.check_schema(schema)
    assert set(record_in["properties"]) == {"file", "title", "summary", "tags", "source_version"}
    assert record_in["required"] == ["file", "summary"] and record_in["additionalProperties"] is False
    assert set(resolve_in["properties"]) == {"id", "source_version"} and resolve_in["required"] == ["id"]
    # Nothing the model chooses names a session, a path, a project or a peer.
    assert not {"session", "path", "agent", "workspace"} & (
        set(record_in["properties"]) | set(resolve_in["properties"])
    )
    assert "never instructions" in defs[3]["description"]
    configure("http://127.0.0.1:8000", extra="\n[artifacts]\nenabled = false\n")
    assert [d["name"] for d in tools.definitions(config_module.load())] == ["recall", "ask_memory"]
    configure(None)
    (config_module.load().path).write_text("[artifacts]\n")
    assert [d["name"] for d in tools.definitions(config_module.load())] == [
        "recall",
        "artifact_record",
        "artifact_resolve",
    ]
