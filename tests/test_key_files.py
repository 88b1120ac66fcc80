"""Hostile key files: every command reads them with one reader (config.read_key)
and gets one verdict; a refused file stops only its own workspace, never hangs
a command, never cuts a key and never turns into a global outage."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import bxmem_inprocess, ledger_events, register_secret, run_bxmem, write_log
from runbook_lines import cites

from bxmem.commands import decide
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.config.loader import MAX_KEY_BYTES, Workspace, read_key
from bxmem.demo.sample import turn_lines
from bxmem.errors import ConfigInvalid, KeyFileInvalid

GOOD_KEY = register_secret("good-key-7c1e9a04b2")
OTHER_UID = 54321  # no such user is needed: chown as root gives the file to another uid


def workspace(path: Path) -> Workspace:
    return Workspace("trusted", "bm0-trusted", "honcho_trusted", path)


def write_key(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(KeyFileInvalid) as caught:
        read_key(workspace(path))
    line = caught.value.one_line()
    assert "\n" not in line and f"secrets.honcho_trusted: key file {path} " in line
    return caught.value.problem


def read_in_thread(path: Path, seconds: float = 5.0) -> BaseException | object:
    """read_key on a thread: a reader that blocks (a FIFO opened for reading
    waits for a writer) fails the test instead of hanging it."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(read_key(workspace(path)))
        except BaseException as exc:  # handed back to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"read_key did not return within {seconds} s: it blocked on {path}"
    return outcome[0]


# --- what a key file may be ---------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"k",
        b"k\n",
        b"k\r\n",
        GOOD_KEY.encode(),
        bytes(range(0x21, 0x7F)),
        b"x" * MAX_KEY_BYTES,
        b"x" * (MAX_KEY_BYTES - 1) + b"\n",
    ],
)
def test_one_line_of_printable_ascii_is_a_key(tmp_path, data):
    key = read_key(workspace(write_key(tmp_path / "k", data)))
    assert key is not None and key.reveal() == data.rstrip(b"\r\n").decode()


def test_mode_400_is_as_good_as_600(tmp_path):
    assert read_key(workspace(write_key(tmp_path / "k", b"k\n", 0o400))) is not None


def test_a_fifo_is_refused_at_once_and_never_opened(tmp_path):
    """A key file is checked before it is opened: a FIFO is refused at once, never waited on
    for a writer."""
    path = tmp_path / "fifo.key"
    os.mkfifo(path, 0o600)
    outcome = read_in_thread(path)
    assert isinstance(outcome, KeyFileInvalid), outcome
    assert outcome.problem == "is a named pipe (FIFO), not a regular file"


def test_a_unix_socket_a_directory_and_devices_are_refused_by_kind(tmp_path):
    sock_path = tmp_path / "s.key"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        assert refusal(sock_path) == "is a socket, not a regular file"
    finally:
        server.close()
    folder = tmp_path / "dir.key"
    folder.mkdir(mode=0o700)
    assert refusal(folder) == "is a directory, not a regular file"
    for device in ("/dev/zero", "/dev/null", "/dev/urandom"):
        outcome = read_in_thread(Path(device))
        assert isinstance(outcome, KeyFileInvalid) and outcome.problem == "is a character device, not a regular file"


def test_a_symbolic_link_is_refused_and_names_its_target(tmp_path):
    real = write_key(tmp_path / "real.key", b"k\n")
    link = tmp_path / "link.key"
    link.symlink_to(real)
    with pytest.raises(KeyFileInvalid) as caught:
        read_key(workspace(link))
    assert caught.value.problem == "is a symbolic link; bxmem reads only a regular file as a key, never through a link"
    assert caught.value.one_line().endswith(f"name the file itself ({real})" + cites("honcho-config-invalid"))


def test_a_file_owned_by_another_user_is_refused(tmp_path):
    """A key file owned by another user is refused."""
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root (CI runs as root)")
    path = write_key(tmp_path / "k", b"k\n")
    os.chown(path, OTHER_UID, -1)
    assert refusal(path) == f"is owned by uid {OTHER_UID}, not by uid 0 that bxmem runs as (chown it)"


@pytest.mark.parametrize(
    "mode, can",
    [
        (0o640, "read"),
        (0o604, "read"),
        (0o620, "write"),
        (0o602, "write"),
        (0o610, "run"),
        (0o666, "read and write"),
        (0o677, "read and write and run"),
    ],
)
def test_any_group_or_other_bit_is_refused(tmp_path, mode, can):
    path = write_key(tmp_path / "k", b"k\n", mode)
    assert refusal(path) == f"has mode {mode:04o}: group or others can {can} it (chmod 600 it)"


def test_a_key_over_the_bound_is_refused_never_cut(tmp_path):
    """A key file over MAX_KEY_BYTES is refused whole: no prefix of it (the first 64 KiB, say)
    is ever sent as the key."""
    for size in (MAX_KEY_BYTES + 1, 65_536, 70_000):
        path = write_key(tmp_path / "k", b"x" * size)
        assert refusal(path) == f"is {size} bytes; a key file holds one key of at most {MAX_KEY_BYTES} bytes"


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"ab\x00cd", "has a control character (0x00) at byte 2; a key is one line of printable ASCII"),
        (b"ab\x1b[31mcd\n", "has a control character (0x1b) at byte 2; a key is one line of printable ASCII"),
        (b"abcd\x7f", "has a control character (0x7f) at byte 4; a key is one line of printable ASCII"),
        (b"ab cd", "has a space at byte 2; a key is one line of printable ASCII"),
        (b" abcd\n", "has a space at byte 0; a key is one line of printable ASCII"),
        (b"abcd \n", "has a space at byte 4; a key is one line of printable ASCII"),
        (b"ab\tcd", "has a tab at byte 2; a key is one line of printable ASCII"),
        (b"caf\xc3\xa9", "has a byte that is not ASCII at byte 3; a key is one line of printable ASCII"),
        (b"\xef\xbb\xbfkey\n", "has a byte that is not ASCII at byte 0; a key is one line of printable ASCII"),
        (b"one\ntwo\n", "holds more than one line (a line break at byte 3); a key file holds one key on one line"),
        (b"key\n\n", "holds more than one line (a line break at byte 3); a key file holds one key on one line"),
        (b"ke\ry", "holds more than one line (a line break at byte 2); a key file holds one key on one line"),
        (b"", "is empty"),
        (b"\n", "holds no key, only a line break"),
    ],
)
def test_anything_but_one_line_of_printable_ascii_is_refused(tmp_path, data, problem):
    """A key is one line of printable ASCII: NUL, ESC, DEL or a second line is refused, never
    put in a header that would fail every request of the run as an outage."""
    assert refusal(write_key(tmp_path / "k", data)) == problem


def test_a_file_replaced_between_the_look_and_the_open_is_refused(tmp_path, monkeypatch):
    path = write_key(tmp_path / "k", b"k\n")
    decoy = os.lstat(write_key(tmp_path / "decoy", b"d\n"))
    monkeypatch.setattr(config_module.os, "lstat", lambda _p: decoy)
    assert refusal(path) == "was replaced while it was read; run again"


def test_a_missing_or_unreadable_file_is_one_line(tmp_path):
    assert refusal(tmp_path / "missing.key") == "cannot be read: No such file or directory"
    assert refusal(tmp_path / "no-folder" / "k") == "cannot be read: No such file or directory"


def test_no_refusal_shows_the_key(tmp_path):
    secret = register_secret("hidden-part-0d9e2b")
    for data in (f"{secret}\x1b".encode(), f"{secret} tail".encode(), f"{secret}\n{secret}".encode()):
        with pytest.raises(KeyFileInvalid) as caught:
            read_key(workspace(write_key(tmp_path / "k", data)))
        assert secret not in caught.value.one_line()


# --- core dumps -----------------------------------------------------------------------------


def test_a_process_holding_a_key_cannot_be_dumped_or_read_by_its_user(tmp_path):
    """PR_SET_DUMPABLE 0 from the moment a key is read; nothing of ctypes is loaded by a
    process that reads no key."""
    path = write_key(tmp_path / "k", b"k\n")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from bxmem.config.loader import Workspace, read_key\n"
        "read_key(Workspace('fleet', 'f', 'honcho_fleet', None))\n"
        "print('ctypes without a key:', 'ctypes' in sys.modules)\n"
        "import ctypes\n"
        "prctl = ctypes.CDLL(None).prctl\n"
        "print('dumpable before:', prctl(3, 0, 0, 0, 0))\n"
        "read_key(Workspace('fleet', 'f', 'honcho_fleet', Path(sys.argv[1])))\n"
        "print('dumpable after:', prctl(3, 0, 0, 0, 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["ctypes without a key: False", "dumpable before: 1", "dumpable after: 0"]


# --- every command, one verdict; only that workspace stops -----------------------------------


@pytest.fixture
def two_sessions(home, brokerd):
    write_log(home, "clean", turn_lines(1, "hello", "hi"))
    write_log(home, "tainted", turn_lines(1, "fetch", "ok", results=[{"untrusted": True, "class": "public"}]))


def secrets(**files: Path) -> str:
    return "".join(f'\n[secrets.{name}]\nfile = "{path}"\n' for name, path in files.items())


def test_config_check_on_a_fifo_answers_at_once(tmp_path, honcho, configure):
    """`config check` (as send, sync and ask) refuses a FIFO as a key file at once, with
    one line, never waiting on it."""
    fifo = tmp_path / "t.key"
    os.mkfifo(fifo, 0o600)
    configure(honcho.url, extra=secrets(honcho_trusted=fifo))
    try:
        result = run_bxmem("config", "check", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("bxmem config check hung on a FIFO key file")
    assert result.returncode == 78
    assert result.stderr.strip().splitlines() == [
        f"bxmem: error: secrets.honcho_trusted: key file {fifo} is a named pipe (FIFO), not a regular file"
        + cites("honcho-config-invalid")
    ]


def test_a_bad_key_stops_its_workspace_only_never_a_global_outage(home, tmp_path, honcho, configure, two_sessions):
    """A trusted key holding ESC stops its own workspace only: never a request failed as
    "Honcho unreachable ... LocalProtocolError", never every workspace in one backoff,
    and sync never calls the key "ok"."""
    honcho.keys["bm0-trusted"] = GOOD_KEY
    bad = write_key(tmp_path / "t.key", f"{GOOD_KEY}\x1b".encode())
    configure(honcho.url, extra=secrets(honcho_trusted=bad))
    decide.run(config_module.load())
    first = bxmem_inprocess("send", "--json")
    assert first.returncode == 3, first.stderr
    report = json.loads(first.stdout)
    assert report["stopped"] == ["bm0-trusted"] and report["outage"] is None
    assert "unreachable" not in first.stderr
    problem = "has a control character (0x1b) at byte 19; a key is one line of printable ASCII"
    assert first.stderr.strip().splitlines() == [
        f"bxmem send: error: secrets.honcho_trusted: key file {bad} {problem}; sends to bm0-trusted stop until "
        "secrets.honcho_trusted changes, the other workspaces go on" + cites("honcho-key-refused")
    ]
    assert honcho.messages_in("bm0-untrusted") and not honcho.messages_in("bm0-trusted")
    assert not any("bm0-trusted" in r.path for r in honcho.requests)  # never sent with a broken header
    refused = [e for e in ledger_events(home) if e["ev"] == "key_refused"]
    assert [(e["ws"], e["status"], e["problem"]) for e in refused] == [
        ("bm0-trusted", None, str(KeyFileInvalid("honcho_trusted", bad, problem)))
    ]

    # sync gives the same verdict, checked now, and what send recorded
    status = bxmem_inprocess("sync")
    assert status.returncode == 4
    assert (
        f"key for bm0-trusted: send would refuse it: secrets.honcho_trusted: key file {bad} {problem}" in status.stdout
    )
    assert "key for bm0-trusted refused by bxmem since " in status.stdout
    assert (
        f"attention: secrets.honcho_trusted: key file {bad} {problem}: sends to bm0-trusted stop until it is fixed"
        + cites("honcho-key-refused")
    ) in status.stdout

    # logged once: the next run does not try again, nor warn again (-q, as the units run it:
    # nothing); its own output still says the workspace is stopped, and why, every run
    calls = len(honcho.requests)
    assert bxmem_inprocess("-q", "send").stderr == ""
    again = bxmem_inprocess("send")
    assert len(honcho.requests) == calls and again.returncode == 3
    assert again.stderr.strip().splitlines() == [
        f"bxmem send: sends to bm0-trusted stopped since {refused[0]['ts']}: bxmem refused its key file: "
        f"secrets.honcho_trusted: key file {bad} {problem}; its items wait until secrets.honcho_trusted changes"
        + cites("honcho-key-refused")
    ]
    still = json.loads(bxmem_inprocess("send", "--json").stdout)
    assert still["stopped"] == ["bm0-trusted"] and still["keys_refused"][0]["problem"] == refused[0]["problem"]

    # the owner fixes the file: the workspace resumes and drains, nothing lost
    write_key(bad, f"{GOOD_KEY}\n".encode())
    fixed = bxmem_inprocess("send", "--json")
    assert fixed.returncode == 0, fixed.stderr
    assert "resuming" in fixed.stderr
    assert [m["metadata"]["bxmem_item"] for m in honcho.messages_in("bm0-trusted")] == ["turn:clean:1"] * 2
    assert [e["ev"] for e in ledger_events(home) if e["ev"].startswith("key_")] == ["key_refused", "key_resumed"]


def test_a_key_refused_for_its_owner_resumes_after_a_chown(home, tmp_path, honcho, configure, two_sessions):
    """A chown changes nothing a key file's fingerprint held before (inode, size,
    mtime, mode), so a workspace stopped for its owner never woke up."""
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root (CI runs as root)")
    path = write_key(tmp_path / "u.key", f"{GOOD_KEY}\n".encode())
    honcho.keys["bm0-untrusted"] = GOOD_KEY
    os.chown(path, OTHER_UID, -1)
    configure(honcho.url, extra=secrets(honcho_untrusted=path))
    decide.run(config_module.load())
    assert json.loads(bxmem_inprocess("send", "--json").stdout)["stopped"] == ["bm0-untrusted"]
    os.chown(path, 0, -1)
    resumed = bxmem_inprocess("send", "--json")
    assert resumed.returncode == 0 and "resuming" in resumed.stderr
    assert honcho.messages_in("bm0-untrusted")


def test_a_bad_key_for_another_agents_workspace_does_not_stop_send(home, tmp_path, honcho, config_file, two_sessions):
    """send writes only to the agent's own workspaces; before, any bad key file stopped every send with exit 78."""
    from helpers import honcho_config

    bad = write_key(tmp_path / "r.key", b"k\n", 0o644)
    config_file.write_text(
        honcho_config(honcho.url)
        + '[[honcho.read]]\nagent = "boxmaker1"\nworkspace = "bm1-trusted"\n'
        + secrets(honcho_read_boxmaker1=bad)
    )
    decide.run(config_module.load())
    result = bxmem_inprocess("send", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stopped"] == []
    status = bxmem_inprocess("sync")
    assert (
        f"attention: secrets.honcho_read_boxmaker1: key file {bad} has mode 0644: group or others can read it "
        "(chmod 600 it): recall and ask cannot read bm1-trusted until it is fixed" + cites("honcho-key-refused")
    ) in status.stdout


def test_recall_and_ask_name_the_refused_key_and_answer_from_the_rest(home, tmp_path, honcho, configure, two_sessions):
    fifo = tmp_path / "f.key"
    os.mkfifo(fifo, 0o600)
    configure(honcho.url, extra=secrets(honcho_fleet=fifo))
    decide.run(config_module.load())
    send.run(config_module.load())
    recalled = bxmem_inprocess("recall", "--json", "hello")
    data = json.loads(recalled.stdout)
    assert recalled.returncode == 0 and data["hits"]
    reason = "its key file is refused: is a named pipe (FIFO), not a regular file"
    assert data["unavailable"] == [{"source": "fleet", "reason": reason}]
    asked = bxmem_inprocess("ask", "--json", "-w", "fleet", "hello?")
    assert asked.returncode == 7
    assert json.loads(asked.stdout)["unavailable"] == [{"name": "fleet", "workspace": "fleet", "reason": reason}]


def test_send_never_reads_a_key_it_refused_until_the_file_changes(
    home, tmp_path, honcho, configure, two_sessions, monkeypatch
):
    bad = write_key(tmp_path / "t.key", b"k\n", 0o640)
    configure(honcho.url, extra=secrets(honcho_trusted=bad))
    decide.run(config_module.load())
    send.run(config_module.load())
    reads: list[Path] = []
    original = config_module._read_key_file

    def read_key_file(path, secret):
        reads.append(path)
        return original(path, secret)

    monkeypatch.setattr(config_module, "_read_key_file", read_key_file)
    send.run(config_module.load())
    assert reads == []  # stopped: its file is not read again, so the refusal is not logged again
    assert stat.S_IMODE(os.stat(bad).st_mode) == 0o640


def test_the_old_exit_78_remains_for_config_check(tmp_path, honcho, configure):
    bad = write_key(tmp_path / "t.key", b"k\n", 0o644)
    configure(honcho.url, extra=secrets(honcho_trusted=bad))
    with pytest.raises(ConfigInvalid):
        read_key(config_module.load().workspace("trusted"))
    result = bxmem_inprocess("config", "check")
    assert result.returncode == 78 and "group or others can read it" in result.stderr
