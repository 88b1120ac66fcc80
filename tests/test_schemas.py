"""Every --json output has a versioned JSON Schema (bxmem/schemas/, printed by `bxmem
schema NAME`), and real outputs of each command, in each of its states, validate
against it. (Every --json output any test produces is validated too: helpers.py's
check_json_output; this file makes sure each state is among them.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from helpers import SCHEMAS, bxmem_inprocess, honcho_config, sample_sent, validate_output, write_log

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.store.files import JobLock

UNTRUSTED = [{"untrusted": True, "class": "public"}]


def load():
    return config_module.load()


def run_json(*args: str) -> tuple[int, dict]:
    """The command with --json, in this process; its document, validated (helpers.check_json_output)."""
    result = bxmem_inprocess(*args, "--json")
    document = json.loads(result.stdout)
    name = f"artifact-{args[1]}" if args[0] == "artifact" else args[0]
    assert document.get("schema", "").startswith(f"bxmem.{'error' if document.get('error') else name}/"), document
    return result.returncode, document


# --- the schemas themselves ---------------------------------------------------------------


def schema_names() -> list[str]:
    return sorted(p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json"))


@pytest.mark.parametrize("name", schema_names())
def test_each_schema_is_a_valid_2020_12_document_naming_its_version(name):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == f"https://boxmaker.invalid/bxmem/schemas/{name}.schema.json"
    versions = set(
        re.findall(rf'"schema": \{{"const": "(bxmem\.{name}/\d+)"\}}', (SCHEMAS / f"{name}.schema.json").read_text())
    )
    assert len(versions) == 1, versions
    assert f", version {versions.pop()}" in schema["title"]


def test_each_schema_names_the_version_the_code_writes():
    from bxmem.cli import output
    from bxmem.commands import artifact_doc, artifact_owner, ask, audit, doctor, outbox_actions, recall, sync, undo
    from bxmem.commands.send import report
    from bxmem.errors import ERROR_SCHEMA

    written = {
        "recall": recall.SCHEMA,
        "ask": ask.SCHEMA,
        "decide": decide.SCHEMA,
        "mirror": mirror.SCHEMA,
        "send": report.SCHEMA,
        "doctor": doctor.SCHEMA,
        "undo": undo.SCHEMA,
        "sync": sync.SCHEMA,
        "audit": audit.SCHEMA,
        "outbox": outbox_actions.SCHEMA,
        "config": output.CONFIG_SCHEMA,
        "error": ERROR_SCHEMA,
        "artifact-record": artifact_doc.RECORD_SCHEMA,
        "artifact-resolve": artifact_doc.RESOLVE_SCHEMA,
        "artifact-list": artifact_owner.LIST_SCHEMA,
        "artifact-verify": artifact_owner.VERIFY_SCHEMA,
        "artifact-export": artifact_owner.EXPORT_SCHEMA,
        "artifact-rm": artifact_owner.RM_SCHEMA,
    }
    assert sorted(written) == schema_names()
    for name, version in written.items():
        assert f'"schema": {{"const": "{version}"}}' in (SCHEMAS / f"{name}.schema.json").read_text(), name


def test_every_command_with_json_output_has_a_schema_and_bxmem_schema_lists_them_all():
    """A command whose --json has no schema fails here: its output could change unseen."""
    import typer

    from bxmem.cli.agent import SCHEMAS as LISTED
    from bxmem.cli.app import app

    def commands(group: typer.Typer, prefix: str = ""):
        for info in group.registered_commands:
            assert info.callback is not None
            yield prefix + (info.name or info.callback.__name__), info.callback
        for sub in group.registered_groups:
            assert sub.typer_instance is not None and sub.name is not None
            yield from commands(sub.typer_instance, prefix + sub.name + " ")

    with_json = []
    for name, callback in commands(app):
        import inspect

        params = inspect.signature(callback).parameters.values()
        if any(getattr(p.default, "param_decls", None) and "--json" in p.default.param_decls for p in params):
            with_json.append(name)
    assert {
        "decide",
        "mirror",
        "send",
        "recall",
        "undo",
        "ask",
        "sync",
        "audit",
        "outbox list",
        "outbox drop",
        "config check",
    } <= set(with_json)
    for name in with_json:
        assert (name.replace(" ", "-") if name.startswith("artifact ") else name.split()[0]) in LISTED, (
            f"{name} --json has no schema"
        )
    assert sorted(LISTED) == schema_names()


def test_the_held_reasons_and_audit_kinds_in_the_schemas_are_every_one_the_code_gives():
    from bxmem.commands.audit import KINDS
    from bxmem.trust import write_policy

    reasons = {
        value
        for name, value in vars(write_policy).items()
        if name.isupper() and isinstance(value, str) and re.fullmatch(r"[a-z]+(-[a-z]+)+", value)
    }
    assert "workspace-reused" in reasons and "speaker-is-the-agent" in reasons
    for name, where in (
        ("send", ("properties", "held_by_config", "items", "properties", "reason", "enum")),
        ("sync", ("properties", "held", "items", "properties", "reason", "enum")),
    ):
        node = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        for key in where:
            node = node[key]
        assert set(node) == reasons, name
    audit = json.loads((SCHEMAS / "audit.schema.json").read_text())
    assert audit["$defs"]["finding"]["properties"]["kind"]["enum"] == list(KINDS)


def test_the_check_can_fail():
    """A document without its schema field, with a field of the wrong type, or with a field
    the schema does not know is refused: a schema that accepts anything holds nothing."""
    good = {
        "schema": "bxmem.mirror/1",
        "busy": False,
        "decided": {"trusted/identity-add": 1},
        "skipped_lines": 0,
        "local_only": False,
    }
    validate_output("mirror", good)
    for bad in (
        {k: v for k, v in good.items() if k != "schema"},
        {**good, "busy": "no"},
        {**good, "extra": 1},
        {**good, "decided": {"elsewhere/x": 1}},
        {**good, "schema": "bxmem.mirror/2"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate_output("mirror", bad)


# --- decide and mirror ----------------------------------------------------------------------


def while_another_runs(home: Path, job: str) -> tuple[int, dict]:
    """The job run while another run of it holds its lock: it does nothing, and says so."""
    lock = JobLock(home / "memory" / "honcho.jsonl", job)
    assert lock.acquire()
    try:
        return run_json(job)
    finally:
        lock.release()


def test_decide_in_each_state(home, brokerd, configure, config_file):
    code, idle = run_json("decide")  # local-only, nothing to decide
    assert code == 0 and idle["decided"] == {} and idle["local_only"] is True
    configure("http://127.0.0.1:9")
    write_log(home, "clean", turn_lines(1, "the backups", "nightly"))
    write_log(home, "fetched", turn_lines(1, "read it", "done", results=UNTRUSTED))
    write_log(home, "secret", turn_lines(1, "a secret", "ok", results=[{"untrusted": False, "class": "secret"}]))
    (home / "logs" / "broken.jsonl").write_text("not json\n" + json.dumps(turn_lines(1, "x", "y")[0]) + "\n")
    code, decided = run_json("decide")
    assert code == 0 and decided["decided"] == {
        "none/secret-session": 1,
        "trusted/clean": 1,
        "untrusted/untrusted-session": 1,
    }
    assert decided["skipped_lines"] == 1
    brokerd.stop()
    write_log(home, "clean", turn_lines(2, "and offsite?", "weekly"))
    code, degraded = run_json("decide")
    assert code == 3 and degraded["undecided"] == 1 and degraded["why_degraded"] and degraded["broker_problem"]
    assert degraded["broker_unavailable_since"]
    code, busy = while_another_runs(home, "decide")
    assert code == 0 and busy["busy"] is True


def test_mirror_in_each_state(home, configure):
    write_journal(
        home, [{"id": "e1", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "tea"}]
    )
    code, local = run_json("mirror")
    assert code == 0 and local["local_only"] is True and local["decided"] == {"trusted/identity-add; local-only": 1}
    configure("http://127.0.0.1:9")
    write_journal(
        home,
        [
            {"id": "e2", "ts": "t", "session": "s", "op": "note", "trust": "untrusted", "entry": "v2 is out"},
            {"id": "e3", "ts": "t", "session": "s", "op": "note", "trust": "flagged", "entry": "hmm"},
        ],
    )
    code, decided = run_json("mirror")
    assert decided["decided"] == {"fleet/untrusted-note": 1, "none/flagged-note-stays-local": 1}
    code, busy = while_another_runs(home, "mirror")
    assert code == 0 and busy["busy"] is True


# --- undo ---------------------------------------------------------------------------------------


def test_undo_dry_run_and_written(home, honcho, configure):
    configure(honcho.url)
    write_journal(
        home, [{"id": "e1", "ts": "t", "session": "s", "op": "identity_add", "file": "user.md", "entry": "tea"}]
    )
    mirror.run(load())
    send.run(load())
    code, dry = run_json("undo", "e1", "--dry-run")
    assert code == 0 and dry["written"] is False and dry["undo_id"] is None and dry["effects"]
    code, done = run_json("undo", "e1")
    assert code == 0 and done["written"] is True and done["undo_id"].startswith("undo-")
    code, again = run_json("undo", "e1")
    assert code == 6 and again["schema"] == "bxmem.error/1"


# --- sync, outbox, audit ----------------------------------------------------------------------


@pytest.fixture
def sent(home, brokerd, honcho, configure):
    """The sample home, decided, mirrored and sent: everything in Honcho."""
    return sample_sent(home, brokerd, honcho, configure)


def test_sync_local_only_and_clean(home, brokerd, configure):
    code, local = run_json("sync")
    assert code == 0 and local["mode"] == "local-only" and local["attention"] == []


def test_sync_clean_after_sending_then_with_an_audit_on_record(sent):
    code, clean = run_json("sync")
    assert code == 0 and clean["sent_items"] > 0 and clean["checks"]["honcho"]["ok"] is True
    with sent.lock:
        sent.messages.pop()
    assert run_json("audit")[0] == 4
    code, after = run_json("sync")
    assert code == 4 and after["audit"]["discrepancies"]


def test_sync_and_outbox_with_failed_held_refused_and_an_outage(
    home, brokerd, honcho, configure, config_file, tmp_path
):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "one", "1"))
    decide.run(load())
    honcho.inject("status", match=r"/bm0-trusted/sessions/s/messages$", status=422)
    send.run(load())
    write_log(home, "u", turn_lines(1, "fetched", "2", results=UNTRUSTED))
    decide.run(load())
    # held: the untrusted workspace is now named as a read source (its role changed)
    config_file.write_text(
        honcho_config(honcho.url).replace('untrusted = "bm0-untrusted"', 'untrusted = "bm0-untrusted-2"')
    )
    code, listed = run_json("outbox", "list")
    assert code == 0 and {i["state"] for i in listed["items"]} == {"failed", "held"}
    code, everything = run_json("outbox", "list", "--all")
    assert len(everything["items"]) == 2
    code, report = run_json("sync")
    assert code == 4 and report["failed"] and report["held"]
    code, dry = run_json("outbox", "reroute", "--all-held", "--dry-run")
    assert code == 0 and dry["dry_run"] is True and dry["items"][0]["to"] == "bm0-untrusted-2"
    code, dropped = run_json("outbox", "drop", "--all-held", "--reason", "moved on")
    assert code == 0 and dropped["written"] is True and dropped["reason"] == "moved on"
    code, retried = run_json("sync", "--retry-failed")
    assert retried["requeued"]["action"] == "resend" and retried["requeued"]["items"]
    # a refused key, then an outage
    key = tmp_path / "t.key"
    key.write_text("wrong\n")
    key.chmod(0o600)
    honcho.keys["bm0-trusted"] = "right"
    config_file.write_text(honcho_config(honcho.url, extra=f'\n[secrets.honcho_trusted]\nfile = "{key}"\n'))
    send.run(load())
    code, refused = run_json("sync")
    assert code == 4 and refused["keys_refused"] and refused["keys"][0]["ok"] is True


def test_send_and_sync_with_an_item_in_doubt(home, brokerd, honcho, configure, monkeypatch):
    from bxmem.honcho import api as honcho_api

    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "first", "one"))
    decide.run(load())
    monkeypatch.setattr(honcho_api, "READ_TIMEOUT", 0.3)
    honcho.inject("late", match=r"/sessions/s/messages$")  # stored only after bxmem gave up on the answer
    try:
        send.run(load())
        write_log(home, "s", turn_lines(2, "second", "two"))
        decide.run(load())
        code, waiting = run_json("send")
        assert code == 3 and waiting["in_doubt"][0]["waiting_behind"] == 1
        code, doubt = run_json("sync")
        assert doubt["in_doubt"] and doubt["workspaces"]["bm0-trusted"]["in_doubt"] == 1
        code, listed = run_json("outbox", "list")
        assert {i["state"] for i in listed["items"]} == {"in-doubt", "waiting"}
    finally:
        honcho.release_late()


def test_sync_during_an_outage(home, brokerd, configure):
    configure("http://127.0.0.1:9")
    write_log(home, "s", turn_lines(1, "one", "1"))
    decide.run(load())
    code, sending = run_json("send")
    assert code == 3 and sending["outage"]["this_run"] is True
    code, down = run_json("sync")
    assert down["outage"]["since"] and down["outage"]["next_try_in_s"] >= 0
    assert down["checks"]["honcho"]["ok"] is False and down["workspaces"]["bm0-trusted"]["pending_turns"] == 1


def test_sync_with_brokerd_down_and_a_reused_workspace(home, brokerd, honcho, configure, config_file):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "one", "1"))
    decide.run(load())
    send.run(load())
    # the trusted workspace's name given to the untrusted role: written as trusted before
    config_file.write_text(
        honcho_config(honcho.url)
        .replace('untrusted = "bm0-untrusted"', 'untrusted = "bm0-trusted"')
        .replace('trusted = "bm0-trusted"\n', 'trusted = "bm0-trusted-2"\n', 1)
    )
    brokerd.stop()
    write_log(home, "s", turn_lines(2, "two", "2"))
    decide.run(load())
    code, report = run_json("sync")
    assert code == 4 and report["reused"] and report["broker"]["unavailable_since"]
    assert report["checks"]["brokerd"]["ok"] is False


def test_audit_clean_with_findings_accepted_and_not_audited(sent, config_file):
    code, clean = run_json("audit")
    assert code == 0 and clean["discrepancies"] == [] and clean["messages"] > 0
    with sent.lock:
        trusted = [m for m in sent.messages if m["workspace_id"] == "bm0-trusted"]
        sent.messages.append({**trusted[0], "id": "dup-1"})
        sent.messages.append({**trusted[1], "id": "foreign-1", "metadata": {}})
    code, found = run_json("audit")
    assert code == 4 and {d["kind"] for d in found["discrepancies"]} == {"duplicate", "foreign-agent-message"}
    code, accepted = run_json("audit", "--accept", found["discrepancies"][0]["id"], "--reason", "known")
    assert accepted["accepted"][0]["reason"] == "known"
    config_file.write_text(config_file.read_text().replace('fleet = "fleet"', 'fleet = "fleet-2"'))
    code, moved = run_json("audit")
    assert moved["not_audited"] == {"fleet": {"items": moved["not_audited"]["fleet"]["items"], "now": None}}


# --- config check ------------------------------------------------------------------------------------


def test_config_check_local_only_honcho_and_with_a_warning(home, configure, config_file, tmp_path, monkeypatch):
    code, local = run_json("config", "check")
    assert code == 0 and local["mode"] == "local-only" and local["workspaces"] == []
    key = tmp_path / "t.key"
    key.write_text("k\n")
    key.chmod(0o600)
    configure("http://127.0.0.1:9", extra=f'\n[secrets.honcho_trusted]\nfile = "{key}"\n')
    code, partial = run_json("config", "check")
    assert code == 0 and partial["mode"] == "honcho" and partial["warnings"]
    assert [w["key"] for w in partial["workspaces"]] == [str(key), None, None]
    monkeypatch.setenv("BXMEM_CONFIG", str(tmp_path / "absent.toml"))
    code, missing = run_json("config", "check")
    assert code == 78 and missing["schema"] == "bxmem.error/1"
    monkeypatch.delenv("BXMEM_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nothing-here"))
    code, defaults = run_json("config", "check")
    assert code == 0 and defaults["config_exists"] is False


def test_every_schema_was_exercised_here():
    """Each schema but recall's, ask's, send's and doctor's (tests/test_recall_output.py, test_ask.py,
    test_send_json.py and test_doctor.py hold those in every state) is validated by the tests above; a log that
    cannot be read, in sync's, by tests/test_unreadable_logs.py (it needs the job unprivileged)."""
    import ast

    exercised = set()
    for node in ast.walk(ast.parse(Path(__file__).read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_json":
            words = [arg.value for arg in node.args[:2] if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
            exercised |= {words[0], "-".join(words)} if words else set()
    for name in schema_names():
        if name in ("recall", "ask", "send", "doctor", "error"):
            continue
        assert name in exercised, name


# --- artifact ------------------------------------------------------------------------------------


def test_every_artifact_command_in_each_of_its_states(home, brokerd, honcho, configure, tmp_path):
    from artifact_helpers import ARTIFACTS, export, session

    configure(honcho.url, extra=ARTIFACTS)
    session(home)
    export(home)
    code, kept = run_json(
        "artifact", "record", "--session", "s1", "--title", "Cohort table", "--summary", "By cohort.", "table.csv"
    )
    assert code == 0 and kept["honcho_queued"] is True and kept["index_state"] == "queued"
    code, again = run_json(
        "artifact", "record", "--session", "s1", "--title", "Cohort table", "--summary", "", "table.csv"
    )
    assert code == 0 and again["deduplicated"] is True
    code, found = run_json("artifact", "resolve", kept["artifact_id"])
    assert code == 0 and found["freshness"] in ("fresh", "not_checked", "unverifiable")
    code, listed = run_json("artifact", "list")
    assert code == 0 and [c["artifact_id"] for c in listed["cards"]] == [kept["artifact_id"]]
    assert {i["state"] for i in listed["cards"][0]["index"]} <= {"queued", "pending", "local-only"}
    code, checked = run_json("artifact", "verify")
    assert code == 0 and (checked["checked"], checked["failures"]) == (1, [])
    code, out = run_json("artifact", "export", kept["artifact_id"], "--to", str(tmp_path / "out.csv"))
    assert code == 0 and out["bytes"] == kept["bytes"] == (tmp_path / "out.csv").stat().st_size
    code, would = run_json("artifact", "rm", "--dry-run", kept["experiment_id"])
    assert code == 0 and would["dry_run"] is True and would["removed"][0]["bytes_removed"] is True
    object_path = next((home / "memory" / "artifacts" / "objects").rglob("art_*"))
    object_path.chmod(0o600)
    object_path.write_bytes(b"not the bytes")
    code, failed = run_json("artifact", "verify")
    assert code == 8 and failed["failures"][0]["artifact"] == kept["artifact_id"]
    code, error = run_json("artifact", "resolve", kept["artifact_id"])
    assert code == 8 and error["schema"] == "bxmem.error/1"
    code, gone = run_json("artifact", "rm", kept["experiment_id"])
    assert code == 0 and gone["dry_run"] is False and len(gone["removed"]) == 1
    code, empty = run_json("artifact", "list")
    assert code == 0 and empty["cards"] == []
