"""One owner per outside thing: the files bxmem reads and writes are reached
only through the module that owns them, so each rule about a file (never
block on a FIFO, never follow a link, whole appends, the marshal seal) is
written once.

- commands/ and the pure layers (formats/, trust/, retrieval/) open, list and
  read no file themselves: the logs through sources/loopd.py, the journal
  through sources/journal.py, bxmem's own state through store/.
- Sealed marshal data is read by start/marshal_seal.py alone (`unmarshal`): a file
  whose seal does not match never reaches marshal.
- An append to the ledger or the journal is written by store/append.py alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_tree import PACKAGE, parse, shown, verdict

# The structure tests share one parse of the tree, on one worker (under `--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("structure")

# Calls that open, list or read a file, by the name they are called with.
FILE_CALLS = {
    "open",
    "io.open",
    "os.open",
    "os.fdopen",
    "os.scandir",
    "os.listdir",
    "os.stat",
    "os.lstat",
    "open_file",
    "open_fd",
    "open_regular",
    "open_ledger",
}
FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "iterdir", "glob", "rglob", "stat", "exists"}


def _modules(*folders: str) -> list[Path]:
    missing = [folder for folder in folders if not (PACKAGE / folder).is_dir()]
    assert not missing, f"no such package: {missing}"  # a renamed package must not empty a check
    return sorted(path for folder in folders for path in (PACKAGE / folder).rglob("*.py"))


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return "?"


def _calls(path: Path) -> list[tuple[int, str]]:
    """(line, what is called) for every call in the module."""
    return [(node.lineno, _name(node.func)) for node in ast.walk(parse(path)[0]) if isinstance(node, ast.Call)]


def _file_calls(path: Path) -> list[str]:
    return [
        f"{shown(path)}:{line}: {name}"
        for line, name in _calls(path)
        if name in FILE_CALLS or name.rsplit(".", 1)[-1] in FILE_METHODS
    ]


def test_the_checks_see_a_file_call():
    """The checks below are not vacuous: a module that opens files is seen doing it."""
    assert any(name.endswith(": open_file") for name in _file_calls(PACKAGE / "sources" / "journal.py"))
    assert any(name.endswith(": os.open") for name in _file_calls(PACKAGE / "store" / "files.py"))
    assert any(name.endswith(": os.lstat") for name in _file_calls(PACKAGE / "store" / "ledger.py"))


def test_commands_and_pure_layers_reach_files_only_through_their_owners():
    """Every module of commands/ and the pure layers; the message names each call, file:line."""
    found = {shown(path): _file_calls(path) for path in _modules("commands", "formats", "trust", "retrieval")}
    problems = verdict(found, {}, "file calls")
    assert not problems, "\n".join(problems)


def test_the_owner_check_reports_every_call_with_its_line(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\ndef f(p):\n    os.listdir(p)\n    return p.read_text(), open(p)\n")
    assert verdict({"probe": _file_calls(probe)}, {}, "file calls") == [
        "probe.py:3: os.listdir",
        "probe.py:4: p.read_text",
        "probe.py:4: open",
    ]


def test_sealed_marshal_is_read_in_one_place():
    readers = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in _modules(".")
        for line, name in _calls(path)
        if name == "marshal.loads"
    ]
    assert [reader.split(":")[0] for reader in readers] == ["start/marshal_seal.py"], readers


def test_appends_to_the_ledger_and_the_journal_are_written_in_one_place():
    """append_whole (the torn-line repair, the cut-back on a failed write) is called
    by store/append.py alone; the ledger and the journal append through append_locked."""
    callers = sorted(
        {
            path.relative_to(PACKAGE).as_posix()
            for path in _modules(".")
            for _line, name in _calls(path)
            if name.rsplit(".", 1)[-1] == "append_whole"
        }
    )
    assert callers == ["store/append.py"]
    lockers = sorted(
        {
            path.relative_to(PACKAGE).as_posix()
            for path in _modules(".")
            for _line, name in _calls(path)
            if name.rsplit(".", 1)[-1] == "append_locked"
        }
    )
    assert lockers == ["sources/journal.py", "store/ledger.py"]
