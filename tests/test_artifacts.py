"""Artifact memory end to end, in one agent's home: record, the card's route, send,
resolve and its integrity check, the owner's list/verify/export/rm, sync, and
everything local working without Honcho (issue 27's rules 3 to 6)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from artifact_helpers import ARTIFACTS, card_file, export, left_behind, object_file, record, resolve, session, store
from helpers import bxmem_inprocess, bxmem_main, decisions, ledger_events, validate_output, write_log

from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.errors import ExitCode


@pytest.fixture
def agent(home, brokerd, honcho, configure):
    configure(honcho.url, extra=ARTIFACTS)
    session(home)
    export(home)
    return home


def card_decisions(home) -> dict[str, dict]:
    return {item: ev for item, ev in decisions(home).items() if item.startswith("card:")}


def test_a_record_is_durable_and_in_the_outbox_before_it_returns(agent, honcho):
    result, doc = record("table.csv", "--tag", "cohort", "--source-version", "2026-09-01")
    assert result.returncode == 0, result.stderr
    validate_output("artifact-record", doc)
    data = b"cohort,response\na,0.4\nb,0.6\n"
    assert doc["sha256"] == hashlib.sha256(data).hexdigest() and doc["bytes"] == len(data)
    assert (doc["local_saved"], doc["honcho_queued"], doc["index_state"], doc["deduplicated"]) == (
        True,
        True,
        "queued",
        False,
    )
    assert doc["label"] == {"untrusted": False, "class": "public"}  # the result carries nothing from memory
    obj = object_file(agent, doc["artifact_id"])
    assert obj.read_bytes() == data and stat.S_IMODE(obj.stat().st_mode) == 0o400
    card = json.loads(card_file(agent, doc["experiment_id"]).read_text())
    assert card["title"] == "Cohort table" and card["tags"] == ["cohort"] and card["session"] == "s1"
    assert card["label"] == {"untrusted": False, "class": "private"}
    assert [e["state"] for e in card["remote"]] == ["queued"]
    ((_item, decided),) = card_decisions(agent).items()
    assert (decided["ws"], decided["role"], decided["reason"], decided["kind"]) == (
        "bm0-trusted",
        "trusted",
        "clean",
        "card",
    )
    assert "Cohort table" not in json.dumps(decided)  # the ledger names texts, never holds them
    assert not honcho.messages  # Honcho is the next send's business
    assert left_behind(agent).keys() == {"objects", "cards", "projections"}


def test_send_writes_the_card_as_the_agents_own_unobserved_message_once(agent, honcho):
    _result, doc = record()
    assert bxmem_main("send").returncode == 0
    assert bxmem_main("send").returncode == 0
    (message,) = honcho.messages_in("bm0-trusted")
    assert message["peer_id"] == "boxmaker0" and message["session_id"] == "s1"
    assert message["content"].startswith("[artifact card] Cohort table\nResponse by cohort.\n")
    meta = message["metadata"]
    assert (meta["role"], meta["experiment"], meta["artifact"], meta["bxmem_agent"]) == (
        "card",
        doc["experiment_id"],
        doc["artifact_id"],
        "boxmaker0",
    )
    # Nothing of the host's: no path, no file name, no session folder, no bytes.
    for never in ("table.csv", "sessions/", str(agent), "cohort,response"):
        assert never not in message["content"] and never not in json.dumps(meta)
    peers = honcho.sessions[("bm0-trusted", "s1")]["peers"]
    assert list(peers) == ["boxmaker0"] and peers["boxmaker0"]["observe_me"] is False  # never the owner's trait
    assert honcho.peers[("bm0-trusted", "boxmaker0")]["configuration"].get("observe_me") is False
    assert bxmem_main("audit").returncode == 0  # the card is one of this agent's own, recorded


@pytest.mark.parametrize(
    ("state", "untrusted_log", "where", "reason"),
    [
        (("private", False), False, "bm0-trusted", "clean"),
        (("private", True), False, "bm0-untrusted", "untrusted-session"),
        (("public", False), True, "bm0-untrusted", "untrusted-session"),
        (("secret", False), False, None, "secret-session"),
    ],
)
def test_the_card_goes_where_a_turn_of_its_session_would(
    home, brokerd, honcho, configure, state, untrusted_log, where, reason
):
    configure(honcho.url, extra=ARTIFACTS)
    session(home, untrusted=untrusted_log)
    export(home)
    brokerd.states["s1"] = state
    _result, doc = record()
    assert doc["index_reason"] == reason and doc["honcho_queued"] == (where is not None)
    bxmem_main("send")
    for ws in ("bm0-trusted", "bm0-untrusted", "fleet"):
        assert len(honcho.messages_in(ws)) == (1 if ws == where else 0), ws
    card = json.loads(card_file(home, doc["experiment_id"]).read_text())
    assert card["label"] == {"untrusted": state[1] or untrusted_log, "class": state[0]}


def test_brokerd_down_or_an_unreadable_log_keeps_the_card_local_and_labels_it_secret(home, honcho, configure):
    configure(honcho.url, extra=ARTIFACTS)  # no brokerd at all
    session(home)
    export(home)
    _result, doc = record()
    assert (doc["index_state"], doc["index_reason"]) == ("local-only", "broker-unavailable")
    card = json.loads(card_file(home, doc["experiment_id"]).read_text())
    assert card["label"] == {"untrusted": True, "class": "secret"}


@pytest.mark.parametrize("log", ["unreadable line", "no log"])
def test_a_log_bxmem_cannot_read_keeps_the_card_local(home, brokerd, honcho, configure, log):
    configure(honcho.url, extra=ARTIFACTS)
    session(home)
    export(home)
    path = home / "logs" / "s1.jsonl"
    if log == "no log":
        path.unlink()
    else:
        with open(path, "ab") as f:
            f.write(b'{"type": "tool_result", "turn": 2, "label": "nope"}\n')
    _result, doc = record()
    assert (doc["index_state"], doc["index_reason"]) == ("local-only", "log-unreadable")
    _r, resolved = resolve(doc["experiment_id"])
    assert resolved["label"] == {"untrusted": True, "class": "secret"}


def test_a_secret_or_an_empty_summary_records_locally_and_says_why(agent, honcho):
    export(agent, "k.txt", b"1")
    _result, doc = record("k.txt", summary="token ghp_" + "B" * 36)
    assert (doc["index_state"], doc["index_reason"]) == ("local-only", "secret-in-card (github-token)")
    assert "not sent to Honcho: secret-in-card (github-token)" in doc["text"]
    export(agent, "e.txt", b"2")
    _result, doc = record("e.txt", summary="\u200b ")
    assert (doc["index_state"], doc["index_reason"]) == ("local-only", "empty-summary")
    bxmem_main("send")
    assert not honcho.messages
    sync = json.loads(bxmem_inprocess("sync", "--json").stdout)
    assert sync["artifacts"]["decided_nowhere"] == {"empty-summary": 1, "secret-in-card (github-token)": 1}


def test_the_same_bytes_again_converge_on_one_object_one_card_one_decision(agent):
    _r, first = record()
    _r, again = record()
    assert again["deduplicated"] and (again["experiment_id"], again["artifact_id"]) == (
        first["experiment_id"],
        first["artifact_id"],
    )
    assert len(card_decisions(agent)) == 1
    assert len(list((store(agent) / "objects").rglob("art_*"))) == 1
    assert (
        json.loads(card_file(agent, first["experiment_id"]).read_text())["revision"] == 3
    )  # written, queued, re-recorded


def test_a_new_description_is_a_new_projection_of_the_same_experiment(agent, honcho):
    _r, first = record()
    bxmem_main("send")
    _r, second = record(title="Cohort table, corrected")
    assert second["experiment_id"] == first["experiment_id"]
    assert len(card_decisions(agent)) == 2
    bxmem_main("send")
    assert [m["content"].split("\n")[0] for m in honcho.messages_in("bm0-trusted")] == [
        "[artifact card] Cohort table",
        "[artifact card] Cohort table, corrected",
    ]


def test_a_projection_decided_nowhere_is_decided_again_by_a_record_that_can_send_it(home, brokerd, honcho, configure):
    configure(honcho.url, extra=ARTIFACTS)
    session(home)
    export(home)
    brokerd.states["s1"] = ("secret", False)
    record()
    brokerd.states["s1"] = ("private", False)
    _r, doc = record()
    assert doc["index_state"] == "queued"
    assert sorted(e["reason"] for e in card_decisions(home).values()) == ["clean", "secret-session"]
    card = json.loads(card_file(home, doc["experiment_id"]).read_text())
    assert card["label"]["class"] == "secret"  # labels only rise: the bytes were in a secret session


def test_local_only_records_and_resolves_and_never_sends(home, brokerd, configure):
    configure(None)
    (home.parent / "bxmem.toml").write_text(ARTIFACTS)
    session(home)
    export(home)
    _r, doc = record()
    assert (doc["index_state"], doc["index_reason"]) == ("local-only", "clean; local-only")
    result, resolved = resolve(doc["experiment_id"])
    assert result.returncode == 0 and Path(resolved["path"]).read_bytes().startswith(b"cohort")


def test_without_honcho_everything_local_works_and_the_card_goes_once_when_it_is_back(agent, honcho):
    honcho.inject("drop", match=".", times=1000)
    _r, doc = record()
    assert doc["honcho_queued"]
    assert resolve(doc["experiment_id"])[0].returncode == 0
    assert bxmem_inprocess("artifact", "list").returncode == 0
    assert bxmem_main("send").returncode == ExitCode.DEGRADED
    honcho.faults.clear()
    config = config_module.load()
    send.run(config, clock=lambda: 10**10)  # past the outage's backoff
    send.run(config, clock=lambda: 10**10)
    assert len(honcho.messages_in("bm0-trusted")) == 1


def test_a_card_in_doubt_is_looked_up_not_sent_again(agent, honcho):
    from bxmem.honcho.api import settle_wait_s

    record()
    honcho.inject("store-then-drop", match=r"/messages$")
    now = [1_000_000.0]
    send.run(config_module.load(), clock=lambda: now[0])
    assert len(honcho.messages_in("bm0-trusted")) == 1
    now[0] += settle_wait_s()
    report = send.run(config_module.load(), clock=lambda: now[0])
    assert report.sent == 1 and len(honcho.messages_in("bm0-trusted")) == 1


def test_resolve_checks_size_and_sha256_and_labels_the_bytes(agent):
    _r, doc = record("table.csv", "--source-version", "v1")
    result, resolved = resolve(doc["experiment_id"], "--source-version", "v1")
    assert result.returncode == 0
    validate_output("artifact-resolve", resolved)
    assert Path(resolved["path"]).read_bytes() == b"cohort,response\na,0.4\nb,0.6\n"
    assert (resolved["freshness"], resolved["tag"], resolved["label"]) == (
        "fresh",
        "memory",
        {"untrusted": False, "class": "private"},
    )
    assert resolve(doc["artifact_id"], "--source-version", "v2")[1]["freshness"] == "stale"
    assert "for comparison only" in resolve(doc["artifact_id"], "--source-version", "v2")[1]["text"]
    assert resolve(doc["artifact_id"], "--source-version", "unknown")[1]["freshness"] == "unverifiable"
    assert resolve(doc["artifact_id"])[1]["freshness"] == "not_checked"


@pytest.mark.parametrize("damage", ["missing", "truncated", "grown", "replaced", "a link", "a folder"])
def test_an_object_that_is_not_its_bytes_never_resolves(agent, honcho, configure, damage):
    _r, doc = record()
    obj = object_file(agent, doc["artifact_id"])
    os.chmod(obj, 0o600)
    data = obj.read_bytes()
    if damage == "missing":
        obj.unlink()
    elif damage == "truncated":
        obj.write_bytes(data[:-3])
    elif damage == "grown":
        obj.write_bytes(data + b"x")
    elif damage == "replaced":
        obj.write_bytes(data.replace(b"0.4", b"0.9"))  # same size, other bytes
    elif damage == "a link":
        other = agent / "elsewhere"
        other.write_bytes(data)
        obj.unlink()
        obj.symlink_to(other)
    else:
        obj.unlink()
        obj.mkdir()
    for mode in ("always", "cached"):
        configure(honcho.url, extra=f'\n[artifacts]\nintegrity = "{mode}"\n')
        result, out = resolve(doc["experiment_id"])
        assert result.returncode == ExitCode.INTEGRITY, (damage, mode, result.stderr)
        assert out["schema"] == "bxmem.error/1" and "path" not in out
        assert str(agent) not in result.stderr  # no path in the line
        assert "artifact-integrity-failed" in result.stderr
    verified = bxmem_inprocess("artifact", "verify", "--json")
    assert (
        verified.returncode == ExitCode.INTEGRITY
        and json.loads(verified.stdout)["failures"][0]["artifact"] == doc["artifact_id"]
    )
    assert (
        bxmem_inprocess("artifact", "export", doc["artifact_id"], "--to", str(agent / "out")).returncode
        == ExitCode.INTEGRITY
    )
    assert not (agent / "out").exists()


def test_cached_integrity_hashes_once_and_again_on_any_change(agent, monkeypatch):
    (agent.parent / "bxmem.toml").write_text((agent.parent / "bxmem.toml").read_text() + 'integrity = "cached"\n')
    from bxmem.store import artifacts as store_module

    hashed = []
    real = store_module.Store.check_object

    def check_object(self, a, s):
        hashed.append(a)
        return real(self, a, s)

    monkeypatch.setattr(store_module.Store, "check_object", check_object)
    _r, doc = record()
    hashed.clear()
    assert resolve(doc["experiment_id"])[0].returncode == 0
    assert resolve(doc["experiment_id"])[0].returncode == 0
    assert len(hashed) == 1
    obj = object_file(agent, doc["artifact_id"])
    os.chmod(obj, 0o600)
    obj.write_bytes(obj.read_bytes().replace(b"0.4", b"0.9"))
    assert resolve(doc["experiment_id"])[0].returncode == ExitCode.INTEGRITY
    assert len(hashed) == 2


def test_a_damaged_or_future_card_is_never_guessed_at(agent):
    _r, doc = record()
    path = card_file(agent, doc["experiment_id"])
    card = json.loads(path.read_text())
    for bad in (
        {**card, "schema": "bxmem.artifact-card/2"},
        {**card, "experiment_id": "exp_" + "a" * 52},
        {**card, "label": {"untrusted": "no", "class": "private"}},
    ):
        path.write_text(json.dumps(bad))
        result, _out = resolve(doc["experiment_id"])
        assert result.returncode == ExitCode.INTEGRITY, bad
    path.write_text("{not json")
    assert resolve(doc["experiment_id"])[0].returncode == ExitCode.INTEGRITY
    listed = json.loads(bxmem_inprocess("artifact", "list", "--json").stdout)
    assert listed["cards"] == [] and "not valid JSON" in listed["unusable"][0]


def test_an_id_not_on_this_host_is_not_found(agent):
    other_agents = "exp_" + "c" * 52
    result, _out = resolve(other_agents)
    assert result.returncode == ExitCode.NOT_FOUND and "resolves only where its bytes are" in result.stderr
    assert resolve("art_" + "d" * 52)[0].returncode == ExitCode.NOT_FOUND
    assert resolve("../../etc/passwd")[0].returncode == ExitCode.USAGE


def test_rm_leaves_a_retraction_beside_a_card_already_in_honcho(agent, honcho):
    _r, doc = record()
    bxmem_main("send")
    dry = bxmem_inprocess("artifact", "rm", "--dry-run", doc["experiment_id"])
    assert "a retraction will be added beside" in dry.stdout and card_file(agent, doc["experiment_id"]).exists()
    result = bxmem_inprocess("artifact", "rm", doc["experiment_id"])
    assert result.returncode == 0, result.stderr
    assert not card_file(agent, doc["experiment_id"]).exists() and not object_file(agent, doc["artifact_id"]).exists()
    bxmem_main("send")
    card, retraction = honcho.messages_in("bm0-trusted")
    assert retraction["content"].startswith(f"retracted: the owner removed artifact card {doc['experiment_id']}")
    assert retraction["session_id"] == card["session_id"] and retraction["peer_id"] == "boxmaker0"
    assert resolve(doc["experiment_id"])[0].returncode == ExitCode.NOT_FOUND
    assert bxmem_main("audit").returncode == 0


def test_rm_before_send_means_it_is_never_sent_and_a_new_record_is_a_new_item(agent, honcho):
    _r, doc = record()
    assert "will not be sent at all" in bxmem_inprocess("artifact", "rm", doc["artifact_id"]).stdout
    bxmem_main("send")
    assert not honcho.messages
    export(agent)
    _r, again = record()
    assert again["honcho_queued"]
    items = [e["item"] for e in ledger_events(agent) if e["ev"] == "decided"]
    assert len(items) == len(set(items)) == 3  # the card, its retraction, and the new record's own item
    bxmem_main("send")
    assert len(honcho.messages_in("bm0-trusted")) == 1


def test_rm_keeps_bytes_another_card_names(agent):
    _r, one = record()
    _r, two = record("table.csv", "--source-version", "v2")
    assert one["artifact_id"] == two["artifact_id"] and one["experiment_id"] != two["experiment_id"]
    assert "another card names its bytes" in bxmem_inprocess("artifact", "rm", one["experiment_id"]).stdout
    assert resolve(two["experiment_id"])[0].returncode == 0
    assert bxmem_inprocess("artifact", "rm", "exp_" + "z" * 52).returncode == ExitCode.NOT_FOUND


def test_export_copies_checked_bytes_to_a_new_file_only(agent, tmp_path):
    _r, doc = record()
    out = tmp_path / "copy.csv"
    assert bxmem_inprocess("artifact", "export", doc["experiment_id"], "--to", str(out)).returncode == 0
    assert out.read_bytes() == object_file(agent, doc["artifact_id"]).read_bytes()
    again = bxmem_inprocess("artifact", "export", doc["experiment_id"], "--to", str(out))
    assert again.returncode == ExitCode.REFUSED and "never over one" in again.stderr


def test_sync_shows_the_store_pending_and_failed_cards_and_the_quota(agent, honcho):
    _r, _doc = record()
    report = json.loads(bxmem_inprocess("sync", "--json").stdout)
    found = report["artifacts"]
    assert (found["cards"], found["objects"], found["pending_index"], found["failed_index"]) == (1, 1, 1, 0)
    assert report["workspaces"]["bm0-trusted"]["pending_cards"] == 1
    text = bxmem_inprocess("sync").stdout
    assert "artifacts: 1 of 10,000 card(s), 1 object(s)" in text and "1 artifact card(s) pending" in text
    assert "Cohort table" not in text and str(store(agent)) not in text  # counts only
    honcho.inject("status", match=r"/messages$", status=422)
    bxmem_main("send")
    found = json.loads(bxmem_inprocess("sync", "--json").stdout)["artifacts"]
    assert (found["pending_index"], found["failed_index"]) == (0, 1)


def test_sync_says_when_a_quota_is_nearly_used(home, brokerd, honcho, configure):
    configure(honcho.url, extra="\n[artifacts]\nmax_total_bytes = 40\nmax_artifact_bytes = 40\n")
    session(home)
    export(home, data=b"x" * 37)
    record()
    result = bxmem_inprocess("sync")
    assert result.returncode == ExitCode.ATTENTION and "artifact-quota" in result.stdout


def test_artifact_memory_off_refuses_the_host_and_offers_no_tools(home, brokerd, honcho, configure):
    configure(honcho.url)
    session(home)
    export(home)
    result, _out = record()
    assert result.returncode == ExitCode.REFUSED and "[artifacts]" in result.stderr
    assert left_behind(home) == {} and not card_decisions(home)
    names = [t["name"] for t in json.loads(bxmem_inprocess("tools").stdout)]
    assert names == ["recall", "ask_memory"]
    configure(honcho.url, extra="\n[artifacts]\nenabled = false\n")
    assert record()[0].returncode == ExitCode.REFUSED


def test_bounds_above_the_defaults_are_refused(home, configure):
    for bad in (
        "max_artifact_bytes = 1073741825",
        "max_total_bytes = 21474836481",
        "max_cards = 10001",
        "max_cards = 0",
        'integrity = "never"',
        "max_artifact_bytes = 100\nmax_total_bytes = 10",
        "colour = 1",
    ):
        configure("http://127.0.0.1:9", extra=f"\n[artifacts]\n{bad}\n")
        result = bxmem_inprocess("config", "check")
        assert result.returncode == ExitCode.CONFIG and "artifacts" in result.stderr, bad


def test_a_later_session_finds_it_in_the_card_list_and_a_log_written_since_changes_nothing(agent):
    _r, doc = record()
    write_log(agent, "s1", [{"type": "tool_result", "turn": 2, "label": {"untrusted": True, "class": "public"}}])
    card = json.loads(card_file(agent, doc["experiment_id"]).read_text())
    assert card["label"]["untrusted"] is False  # decided at record time, as a turn is at its end
    listed = json.loads(bxmem_inprocess("artifact", "list", "--json").stdout)
    assert [c["experiment_id"] for c in listed["cards"]] == [doc["experiment_id"]]


def test_the_outbox_commands_take_a_card_item_as_any_other(agent, honcho):
    """A card refused by Honcho is a failed item: listed, resent by `outbox resend`,
    dropped by `outbox drop`, each as a turn or an edit is."""
    _r, _doc = record()
    honcho.inject("status", match=r"/messages$", status=422)
    bxmem_main("send")
    (item,) = card_decisions(agent)
    listed = bxmem_inprocess("outbox", "list", "--json")
    assert item in listed.stdout
    assert bxmem_inprocess("outbox", "resend", item).returncode == 0
    assert bxmem_main("send").returncode == 0
    assert len(honcho.messages_in("bm0-trusted")) == 1
    export(agent, "b.csv", b"other")
    record("b.csv")
    honcho.inject("status", match=r"/messages$", status=422)
    bxmem_main("send")
    second = next(i for i in card_decisions(agent) if i != item)
    assert bxmem_inprocess("outbox", "drop", second, "--reason", "not wanted").returncode == 0
    bxmem_main("send")
    assert len(honcho.messages_in("bm0-trusted")) == 1


def test_a_held_card_waits_when_its_workspace_changes_role(agent, honcho, configure):
    record()
    configure(honcho.url, extra=ARTIFACTS + "")
    (agent.parent / "bxmem.toml").write_text(
        (agent.parent / "bxmem.toml").read_text().replace('trusted = "bm0-trusted"', 'trusted = "bm0-other"')
    )
    result = bxmem_main("send")
    assert result.returncode == ExitCode.ATTENTION and not honcho.messages
    held = json.loads(bxmem_inprocess("sync", "--json").stdout)["held"]
    assert held and held[0]["cards"] == 1 and held[0]["reason"] == "not-configured"
