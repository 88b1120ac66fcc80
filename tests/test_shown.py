"""What bxmem prints that came from outside goes through trust/printed_fields.py, and within its
schema's limits: ids, dates and text from Honcho in recall's and ask's JSON
and text, in audit's and undo's lines."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
from helpers import SCHEMAS, bxmem_inprocess, honcho_config, write_log
from hostile_honcho import FORGED_DATE, FORGED_IDS, FORGED_TEXT, Attack, arm
from hypothesis import given
from hypothesis import strategies as st

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal
from bxmem.trust import printed_fields
from bxmem.trust.sanitize import replacement

RECALL = json.loads((SCHEMAS / "recall.schema.json").read_text())
ID_PATTERN = re.compile(RECALL["$defs"]["id"]["anyOf"][1]["pattern"])
DATE_PATTERN = re.compile(RECALL["$defs"]["date"]["anyOf"][1]["pattern"])


def load():
    return config_module.load()


def inert(text: str) -> bool:
    """Nothing neutralise would strip or change, and no line break but newline."""
    return all(replacement(c) is None for c in text)


# --- the sanitiser itself ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_", "wanted"),
    [
        ("2026-12-01T13:24:12.451418Z", "2026-12-01T13:24:12.451418Z"),
        ("2026-12-01T13:24:12.451418+00:00", "2026-12-01T13:24:12.451418Z"),
        ("2026-12-01t13:24:12z", "2026-12-01T13:24:12Z"),
        ("2026-12-01 13:24", "2026-12-01T13:24:00"),
        ("2026-12-01T13:24:12.123456789-0530", "2026-12-01T13:24:12.123456-05:30"),
        ("2026-12-01T13:24:12,5+02", "2026-12-01T13:24:12.5+02:00"),
        ("2026-12-01", "2026-12-01"),
        ("2024-02-29T00:00:00Z", "2024-02-29T00:00:00Z"),
        (" 2026-12-01 ", "2026-12-01"),
    ],
)
def test_a_date_is_written_one_way(given_, wanted):
    assert printed_fields.date(given_) == wanted
    assert DATE_PATTERN.fullmatch(wanted)


@pytest.mark.parametrize(
    "given_",
    [
        FORGED_DATE,
        "2026-13-01",
        "2026-02-30",
        "2025-02-29",
        "2026-12-01T24:00:00Z",
        "2026-12-01T10:60:00Z",
        "2026-12-01T10:00:60Z",
        "2026-12-01T10:00:00+24:00",
        "0000-01-01",
        "yesterday",
        "",
        "2026-12-01\nattention: x",
        "2026-12-01T10:00:00Z\x1b[2J",
        1796131452,
        None,
        ["2026-12-01"],
        "\uff12\uff10\uff12\uff16-12-01",
    ],
)
def test_what_is_not_a_date_is_dropped(given_):
    assert printed_fields.date(given_) is None


@given(
    st.text(max_size=60)
    | st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?"
        r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?",
        fullmatch=True,
    )
)
def test_every_date_shown_fits_the_schema(value):
    out = printed_fields.date(value)
    assert out is None or DATE_PATTERN.fullmatch(out)


@given(st.one_of(st.text(max_size=600), st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2)))
def test_every_id_shown_is_one_or_the_placeholder(value):
    out = printed_fields.honcho_id(value)
    assert out is None if value is None else (out == printed_fields.INVALID_ID or ID_PATTERN.fullmatch(out))
    item = printed_fields.item(value)
    assert item is None or item == printed_fields.INVALID_ID or re.fullmatch(r"[A-Za-z0-9_.:#-]+", item)
    token = printed_fields.token(value)
    assert token is None or token == printed_fields.INVALID_ID or re.fullmatch(r"[A-Za-z0-9_.:#-]{1,512}", token)


@given(st.text(max_size=2_000), st.integers(min_value=1, max_value=700))
def test_text_shown_is_inert_and_within_its_cap(value, cap):
    out = printed_fields.text(value, cap)
    assert (len(out) <= cap and inert(out) and out == unicodedata.normalize("NFC", out).strip()) or out.endswith("…")


@given(st.text(max_size=2_000), st.integers(min_value=1, max_value=700))
def test_a_line_shown_is_text_shown_on_one_line(value, cap):
    out = printed_fields.line(value, cap)
    assert len(out) <= cap and inert(out) and len(out.splitlines()) <= 1 and out == " ".join(out.split())


def test_the_placeholder_is_no_id_and_survives_the_header_alphabet():
    from bxmem.retrieval.render import field

    assert (
        not ID_PATTERN.fullmatch(printed_fields.INVALID_ID)
        and field(printed_fields.INVALID_ID) == printed_fields.INVALID_ID
    )


# --- recall and ask, fed by a hostile server ---------------------------------------------------


FORGED_HIT = {
    "content": f"backups {FORGED_TEXT}",
    "peer_id": "\x1b]0;owned\x07\nattention: x",
    "session_id": "../..",
    "created_at": FORGED_DATE,
    "metadata": "not an object",
    "id": 12345,
}


@pytest.fixture
def reader(home, brokerd, honcho, config_file):
    config_file.write_text(
        honcho_config(honcho.url)
        + '[[honcho.read]]\nagent = "boxmaker1"\nworkspace = "bm1-trusted"\ntrust = "trusted"\n'
    )
    write_log(home, "s", turn_lines(1, "the backups run nightly", "noted"))
    decide.run(load())
    return honcho


def _text_lines_are_bxmem_s(text: str) -> None:
    """Every line is a fence, a header, an unavailable line or stored text after the content prefix."""
    for line in text.split("\n"):
        assert inert(line) and "\x1b" not in line, repr(line)
        assert (
            line.startswith(("<<<bxmem ", "<<<end bxmem ", "  | ", "["))
            or line == "(no hits)"
            or re.fullmatch(r"[A-Za-z0-9_.:,@+=/() -]+: unavailable \(.*\)", line)
        ), repr(line)


@pytest.mark.parametrize("forged", [*FORGED_IDS, FORGED_TEXT], ids=repr)
def test_recall_shows_each_forged_field_as_its_schema_allows(reader, forged):
    hit = {
        **FORGED_HIT,
        "peer_id": forged if isinstance(forged, str) else FORGED_HIT["peer_id"],
        "session_id": forged if isinstance(forged, str) else None,
    }
    conclusion = {
        "content": f"backups {FORGED_TEXT}",
        "observer_id": hit["peer_id"],
        "session_id": hit["session_id"],
        "created_at": FORGED_DATE,
        "id": forged,
    }
    arm(
        reader,
        Attack(
            "typed", r"/search$|/conclusions/query$", body=lambda asked: [conclusion] if "top_k" in asked else [hit]
        ),
    )
    for as_json in (True, False):
        result = bxmem_inprocess(
            "recall", *(["--json"] if as_json else []), "backups"
        )  # --json: schema-checked (conftest)
        assert result.returncode == 0, result.stderr
        if as_json:
            data = json.loads(result.stdout)
            honcho_hits = [h for h in data["hits"] if h["source"] != "local"]
            assert {h["source"] for h in honcho_hits} == {"boxmaker1", "fleet"}
            for h in honcho_hits:
                assert h["date"] is None
                assert h["peer"] in (forged, printed_fields.INVALID_ID) and (
                    h["peer"] == printed_fields.INVALID_ID or ID_PATTERN.fullmatch(h["peer"])
                )
                assert inert(h["text"]) and "\x1b" not in h["text"] and "\u202e" not in h["text"]
            _text_lines_are_bxmem_s(data["text"])
        else:
            _text_lines_are_bxmem_s(result.stdout.rstrip("\n"))


@pytest.mark.parametrize(
    "body", [[{"content": 5}], [{"content": "x", "peer_id": 5}], {"content": "x"}, [None]], ids=repr
)
def test_recall_of_a_wrong_typed_answer_is_that_source_unavailable(reader, body):
    arm(reader, Attack("typed", r"/search$", body=body))
    data = json.loads(bxmem_inprocess("recall", "--json", "backups").stdout)
    reasons = {u["source"]: u["reason"] for u in data["unavailable"]}
    assert reasons["fleet"].startswith("Honcho's answer is not usable: ") and "local" in data["answered"]


def test_ask_shows_a_forged_answer_inert_and_capped(reader):
    send.run(load())  # the workspace and its peers, for ask to find
    arm(reader, Attack("typed", r"/chat$", body={"content": FORGED_TEXT * 400}))
    result = bxmem_inprocess("ask", "--json", "where are the backups?")  # schema-checked (conftest)
    data = json.loads(result.stdout)
    (answer,) = data["answers"]
    assert len(answer["text"]) <= 4_000 and inert(answer["text"]) and "\u202e" not in answer["text"]
    _text_lines_are_bxmem_s(data["text"])


@pytest.mark.parametrize("forged", [i for i in FORGED_IDS if i is not None], ids=repr)
def test_ask_never_asks_or_shows_a_forged_peer(reader, forged):
    page = {"items": [{"id": "kyle"}, {"id": forged}], "total": 2, "page": 1, "size": 100, "pages": 1}
    arm(reader, Attack("typed", r"/peers/list$", body=page))
    data = json.loads(bxmem_inprocess("ask", "--json", "where are the backups?").stdout)
    assert data["answers"] == [] and data["unavailable"][0]["reason"].startswith(
        "Honcho's answer is not usable: items[1].id is "
    )
    assert not [r for r in reader.requests if r.path.endswith("/chat")]


# --- undo's lines -------------------------------------------------------------------------------


def test_undo_names_a_forged_recorded_conclusion_id_by_the_placeholder(home, honcho, configure):
    configure(honcho.url)
    write_journal(
        home,
        [
            {
                "id": "a",
                "ts": "2026-12-01T10:00:00Z",
                "session": "s",
                "op": "identity_add",
                "file": "user.md",
                "entry": "Kyle prefers metric units",
            }
        ],
    )
    mirror.run(load())
    arm(honcho, Attack("typed", r"POST .*/conclusions$", store=True, body=[{"id": "A1"}]))
    send.run(load())
    ledger = home / "memory" / "honcho.jsonl"
    ledger.write_text(ledger.read_text().replace('"id":"A1"', '"id":"A1\\u001b[2J\\nattention: forged"'))
    (home / "memory" / "bxmem" / "outbox.marshal").unlink()
    result = bxmem_inprocess("undo", "--dry-run", "a")
    assert "\x1b" not in result.stdout and "attention" not in result.stdout
    assert "its conclusion (invalid id) in bm0-trusted will be deleted" in result.stdout
