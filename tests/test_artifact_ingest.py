"""Hostile exports (issue 27 rule 2, seed 002 28.2): only a regular file of one link,
directly inside the calling session's exports/, reached without following a link, the
same file from the first look to the last byte. Each refusal is one line and leaves
nothing half-published: no object, no card, no temporary file, no ledger line."""

from __future__ import annotations

import os
import socket
import stat

import pytest
from artifact_helpers import ARTIFACTS, export, left_behind, record, session
from helpers import bxmem_inprocess, decisions, run_bxmem

from bxmem.commands import artifact
from bxmem.config import loader as config_module
from bxmem.errors import ExitCode, NotFound, Refused, UsageError
from bxmem.store import artifact_ingest


@pytest.fixture
def agent(home, brokerd, honcho, configure):
    configure(honcho.url, extra=ARTIFACTS)
    session(home)
    return home


def refused(home, result, code: int, words: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert len(result.stderr.splitlines()) == 1 and words in result.stderr, result.stderr
    assert left_behind(home) == {}, left_behind(home)
    assert not [i for i in decisions(home) if i.startswith("card:")]


def exports(home):
    return home / "sessions" / "s1" / "exports"


def test_a_symbolic_link_as_the_file_is_refused_wherever_it_points(agent, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("the owner's file")
    (exports(agent) / "out.csv").symlink_to(outside)
    export(agent, "real.csv")
    (exports(agent) / "in.csv").symlink_to(exports(agent) / "real.csv")
    for name in ("out.csv", "in.csv"):
        refused(agent, record(name)[0], ExitCode.REFUSED, "a symbolic link, not a regular file")


@pytest.mark.parametrize("which", ["exports", "session", "sessions"])
def test_a_symbolic_link_on_the_way_is_refused(home, brokerd, honcho, configure, tmp_path, which):
    configure(honcho.url, extra=ARTIFACTS)
    session(home)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "s1" / "exports").mkdir(parents=True)
    (elsewhere / "s1" / "exports" / "table.csv").write_text("x")
    os.chmod(elsewhere / "s1" / "exports", 0o700)
    target = {
        "exports": home / "sessions" / "s1" / "exports",
        "session": home / "sessions" / "s1",
        "sessions": home / "sessions",
    }[which]
    linked_to = {"exports": elsewhere / "s1" / "exports", "session": elsewhere / "s1", "sessions": elsewhere}[which]
    import shutil

    shutil.rmtree(target)
    target.symlink_to(linked_to)
    refused(home, record()[0], ExitCode.REFUSED, "is a symbolic link")


def test_a_fifo_is_refused_unopened_never_waited_on(agent):
    os.mkfifo(exports(agent) / "pipe.csv")
    result = run_bxmem("artifact", "record", "--session", "s1", "--", "pipe.csv", "--summary", "x", timeout=30)
    refused(agent, result, ExitCode.REFUSED, "a named pipe (FIFO), not a regular file")


def test_a_device_a_socket_and_a_folder_are_refused(agent):
    names = []
    if os.geteuid() == 0:
        os.mknod(exports(agent) / "dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's
        names.append(("dev", "a character device"))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(exports(agent) / "sock"))
        names.append(("sock", "a socket"))
        (exports(agent) / "folder").mkdir()
        names.append(("folder", "a directory"))
        for name, kind in names:
            refused(agent, record(name)[0], ExitCode.REFUSED, f"is {kind}, not a regular file")


def test_a_hard_link_is_refused(agent, tmp_path):
    outside = tmp_path / "owners.key"
    outside.write_text("not for the agent")
    os.link(outside, exports(agent) / "copy.csv")
    refused(agent, record("copy.csv")[0], ExitCode.REFUSED, "has 2 links")


@pytest.mark.parametrize(
    "name", ["..", ".", "../s2/exports/x.csv", "a/b.csv", "/etc/passwd", "x\ny.csv", "\x1b[31m.csv", "a" * 256 + ".csv"]
)
def test_a_hostile_name_is_refused_before_anything_is_opened(agent, name):
    result = record(name)[0]
    refused(agent, result, ExitCode.USAGE, "the file name")


def test_a_name_with_a_newline_that_exists_is_still_refused(agent):
    (exports(agent) / "x\ny.csv").write_text("x")
    refused(agent, record("x\ny.csv")[0], ExitCode.USAGE, "line-break")


def test_nul_and_undecodable_bytes_in_a_name_are_refused(agent):
    (exports(agent) / os.fsdecode(b"\xff.csv")).write_text("x")
    config = config_module.load()
    for name in ("a\0b.csv", os.fsdecode(b"\xff.csv")):
        with pytest.raises(UsageError):
            artifact.record(config, "s1", name, summary="x")
    assert left_behind(agent) == {}


@pytest.mark.parametrize("bad", ["../s1", "s1/..", "", "s 1", "a" * 501])
def test_a_hostile_session_id_is_refused(agent, bad):
    export(agent)
    result = bxmem_inprocess("artifact", "record", "--session", bad, "--", "table.csv")
    refused(agent, result, ExitCode.USAGE, "--session")


def test_a_missing_file_folder_or_session_is_not_found(agent):
    refused(agent, record("nope.csv")[0], ExitCode.NOT_FOUND, "no file 'nope.csv'")
    refused(agent, record(session_name="s9")[0], ExitCode.NOT_FOUND, "does not exist")


def test_exports_open_to_others_is_refused(agent):
    export(agent)
    os.chmod(exports(agent), 0o777)
    refused(agent, record()[0], ExitCode.REFUSED, "no one else can write")
    os.chmod(exports(agent), 0o700)
    if os.geteuid() == 0:
        os.chown(exports(agent), 4242, 4242)
        refused(agent, record()[0], ExitCode.REFUSED, "owned by uid 4242")


def test_too_large_is_refused_before_a_byte_is_copied(home, brokerd, honcho, configure):
    configure(honcho.url, extra="\n[artifacts]\nmax_artifact_bytes = 10\n")
    session(home)
    export(home, data=b"x" * 11)
    refused(home, record()[0], ExitCode.REFUSED, "one artifact is at most 10")


def _during(monkeypatch, at: str, act) -> None:
    def checkpoint(step: str) -> None:
        if step == at:
            act()

    monkeypatch.setattr(artifact_ingest, "checkpoint", checkpoint)


def test_a_file_that_grows_while_read_is_refused(agent, monkeypatch):
    path = export(agent, data=b"a" * (3 << 20))

    def grow():
        with open(path, "ab") as f:
            f.write(b"more")

    _during(monkeypatch, "read", grow)
    refused(agent, record()[0], ExitCode.REFUSED, "grew while it was read")


def test_a_file_that_shrinks_while_read_is_refused(agent, monkeypatch):
    path = export(agent, data=b"a" * (3 << 20))
    _during(monkeypatch, "read", lambda: os.truncate(path, 10))
    refused(agent, record()[0], ExitCode.REFUSED, "changed while it was read")


def test_a_file_rewritten_in_place_is_refused(agent, monkeypatch):
    """Same size, same inode, other bytes: its mtime and ctime move."""
    path = export(agent, data=b"a" * 100)

    def rewrite():
        with open(path, "r+b") as f:
            f.write(b"b")

    _during(monkeypatch, "opened", rewrite)
    refused(agent, record()[0], ExitCode.REFUSED, "changed while it was read")


@pytest.mark.parametrize("swap", ["another file", "a symbolic link", "nothing"])
def test_a_file_swapped_while_read_is_refused(agent, monkeypatch, tmp_path, swap):
    path = export(agent, data=b"a" * 100)

    def replace():
        if swap == "another file":
            other = exports(agent) / "other"
            other.write_bytes(b"b" * 100)
            os.replace(other, path)
        elif swap == "a symbolic link":
            path.unlink()
            path.symlink_to(tmp_path)
        else:
            path.unlink()

    _during(monkeypatch, "opened", replace)
    refused(agent, record()[0], ExitCode.REFUSED, "while it was read")


def test_a_refusal_mid_stream_removes_its_temporary_file_and_reservation(agent, monkeypatch):
    path = export(agent, data=b"a" * (3 << 20))
    seen = []

    def grow():
        seen.append(sorted(p.name for p in (agent / "memory" / "artifacts" / "tmp").iterdir()))
        with open(path, "ab") as f:
            f.write(b"x")

    _during(monkeypatch, "read", grow)
    record()
    assert seen and seen[0][0].startswith(f"ingest.{os.getpid()}.") and seen[0][0].endswith(f".{3 << 20}.part")
    assert left_behind(agent) == {}


def test_quotas_refuse_and_count_what_is_being_written(home, brokerd, honcho, configure, monkeypatch):
    configure(honcho.url, extra="\n[artifacts]\nmax_total_bytes = 100\nmax_artifact_bytes = 60\nmax_cards = 2\n")
    session(home)
    export(home, "a", b"a" * 60)
    assert record("a")[0].returncode == 0
    export(home, "b", b"b" * 50)
    result = record("b")[0]
    assert result.returncode == ExitCode.REFUSED and "max_total_bytes" in result.stderr
    export(home, "c", b"c" * 30)
    assert record("c")[0].returncode == 0
    export(home, "d", b"d")
    result = record("d")[0]
    assert result.returncode == ExitCode.REFUSED and "max_cards" in result.stderr
    # A writer still copying holds its reservation: the quota counts it.
    from bxmem.store.artifacts import Store

    config = config_module.load()
    store = Store(config.paths.artifacts, config.paths.state)
    with store.lock():
        fd, temp = store.reserve(5, 100)
    os.close(fd)
    with store.lock(), pytest.raises(Refused, match="5 more being written"):
        store.reserve(6, 100)
    temp.unlink()


def test_a_dead_writers_reservation_is_recovered(agent):
    tmp = agent / "memory" / "artifacts" / "tmp"
    tmp.mkdir(parents=True)
    dead = tmp / "ingest.999999999.0123456789abcdef.1000.part"
    dead.write_bytes(b"partial")
    export(agent)
    assert record()[0].returncode == 0
    assert not dead.exists()


def test_errors_are_typed_for_the_core_too(agent):
    config = config_module.load()
    with pytest.raises(NotFound):
        artifact.record(config, "s1", "absent.csv", summary="x")


def test_a_file_is_streamed_in_bounded_pieces_never_read_whole(agent, monkeypatch):
    """Seed 002 27.1 / 34.1: every read of the export, and of an object when it is
    checked, asks for at most a piece (1 MiB), whatever the file's size."""
    export(agent, data=os.urandom(5 << 20) + b"tail")
    asked: list[int] = []
    real = os.read

    def read(fd: int, n: int) -> bytes:
        asked.append(n)
        return real(fd, n)

    monkeypatch.setattr(os, "read", read)
    result, doc = record()
    assert result.returncode == 0
    assert asked and max(asked) <= (1 << 20) + 1
    asked.clear()
    assert bxmem_inprocess("artifact", "resolve", doc["artifact_id"]).returncode == 0
    assert asked and max(asked) <= (1 << 20) + 1
