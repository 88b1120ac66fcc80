"""The ledger's time format, written and read in one place (formats/timestamps.py)."""

from __future__ import annotations

from freezegun import freeze_time
from hypothesis import given
from hypothesis import strategies as st

from bxmem.commands.live_checks import age as _age
from bxmem.commands.send.messages import valid_time
from bxmem.formats.timestamps import format_time, parse_time
from bxmem.store.ledger import now_iso


def test_times_are_written_in_utc_to_the_millisecond_with_a_z():
    assert format_time(0) == "1970-01-01T00:00:00.000Z"
    assert format_time(1_764_580_622.1239) == "2025-12-01T09:17:02.123Z"  # cut, never rounded up
    with freeze_time("2026-11-30 10:00:00.123456"):
        assert now_iso() == "2026-11-30T10:00:00.123Z"


# From 1970 to 2096 a float second holds its microseconds exactly, as the datetime it becomes does.
@given(st.floats(min_value=0, max_value=4e9))
def test_a_written_time_reads_back_as_the_millisecond_it_names(t):
    written = format_time(t)
    back = parse_time(written)
    assert back is not None and format_time(back) == written
    assert abs(back - t) < 0.0011


def test_what_is_no_time_reads_as_none_never_as_a_crash():
    value: object
    for value in (
        None,
        5,
        1.5,
        b"2026-12-01T10:00:00Z",
        [],
        "",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-12-01T25:00:00Z",
        "0001-01-01T00:00:00",
    ):
        assert parse_time(value) is None, value
    assert parse_time("2026-12-01T10:00:00+01:00") == parse_time("2026-12-01T09:00:00.000Z")


def test_sync_and_send_read_times_as_the_ledger_writes_them():
    assert _age(format_time(1_000.0), 1_060.0) == 60.0
    assert _age(format_time(1_100.0), 1_060.0) == 0.0  # a little ahead (skew between the jobs): no negative age
    assert _age(format_time(2_000.0), 1_060.0) is None  # far ahead of the clock: unknown (sync says so: future_times)
    assert _age(None, 1_060.0) is None and _age(7, 1_060.0) is None  # a number where a time belongs: unknown
    assert valid_time("2026-12-01T10:00:00.000Z") and valid_time("2026-12-01T10:00")
    assert not valid_time(7) and not valid_time("soon")
