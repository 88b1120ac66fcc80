"""What each start-up path loads: one table of command lines, each run in a fresh
interpreter on a home set up for it, and the modules it must not load.

Timers fire decide, mirror and send every few seconds and the agent calls recall
on every memory tool call, so what those runs import is most of what they cost
(docs/performance.md). The idle check may load builtins and bxmem's start/ only;
the lean runs nothing of the full CLI (typer, rich) nor pydantic (the
configuration comes from its validated cache), and nothing of HTTP where no
Honcho is asked; `--help` and `bxmem tools` nothing of HTTP, pydantic or SQLite.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bxmem.commands import decide, mirror
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines, write_journal

ROOT = Path(__file__).resolve().parents[1]
# Everything after `import sys` in a fresh interpreter, and the exit code: the
# command line runs as the console script runs it (start.entry.main).
PROBE = (
    "import sys\n"
    "before = set(sys.modules)\n"
    "from bxmem.start.entry import main\n"
    "try:\n"
    "    code = main(['bxmem', *sys.argv[2:]])\n"
    "except SystemExit as exit:\n"
    "    code = exit.code\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(repr((code, sorted(set(sys.modules) - before))))\n"
)

CLI = ("typer", "rich", "click")
HTTP = ("httpx", "httpcore", "h11", "ssl")
# What the idle check may load: compiled into the interpreter, or bxmem's start/;
# and __future__, a few lines that `from __future__ import annotations` loads.
IDLE_ALLOWED = frozenset({*sys.builtin_module_names, "__future__"})
# Each was once loaded on the lean recall path for nothing: datetime by the
# `sqlite3` package (its date adapters), socket for its enums, secrets for the
# nonce, logging for a logger recall never writes to, typing for annotations.
RECALL_SPARED = ("datetime", "sqlite3", "socket", "secrets", "logging", "typing")


# typer itself imports pydantic (typer/_adapters.py) as it builds a command's
# parameters, so every command typer runs pays for it; only a path around typer
# (start/lean_argv.py's) can spare `--help` and `tools` that.
@dataclass(frozen=True)
class Budget:
    name: str
    argv: tuple[str, ...]
    setup: Callable[[pytest.FixtureRequest], None]  # the home this run finds
    not_loaded: tuple[str, ...]  # top-level packages, or modules by their dotted name, it must not load
    path: str = "lean"  # "idle" (builtins and bxmem.start only), "lean" or "cli" (typer's)
    code: int = 0
    leak: str = ""  # a leak known today: the row is a strict xfail until it is gone


def load_config(request: pytest.FixtureRequest) -> None:
    """As on a host, where the first run after a change validated the file and cached it."""
    config_module.load()


def refused_honcho(request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("configure")("http://127.0.0.1:9")  # the common failure: Honcho down


def answering_honcho(request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("configure")(request.getfixturevalue("honcho").url)


def local_only(request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("configure")(None)


def a_new_turn(request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("brokerd")
    logs = request.getfixturevalue("home") / "logs"
    logs.mkdir(exist_ok=True)
    lines = turn_lines(1, "the restic backups", "run nightly")
    (logs / "s.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def a_new_edit(request: pytest.FixtureRequest) -> None:
    write_journal(request.getfixturevalue("home"))


def decided(request: pytest.FixtureRequest) -> None:
    decide.run(config_module.load())


def mirrored(request: pytest.FixtureRequest) -> None:
    mirror.run(config_module.load())


def sent(request: pytest.FixtureRequest) -> None:
    send.run(config_module.load())


def the_owners_way(request: pytest.FixtureRequest) -> None:
    """As the units run the jobs: neither BOXMAKER_HOME nor BXMEM_CONFIG set, the config at
    its default path naming the home in `[paths]`, as the README's sample does."""
    monkeypatch = request.getfixturevalue("monkeypatch")
    config_file: Path = request.getfixturevalue("config_file")
    xdg = config_file.parent / "xdg-config"
    (xdg / "boxmaker").mkdir(parents=True)
    text = f'# bxmem.toml\n[paths]\nhome = "{request.getfixturevalue("home")}"  # the Boxmaker home\n\n'
    (xdg / "boxmaker" / "bxmem.toml").write_text(text + config_file.read_text())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.delenv("BOXMAKER_HOME")
    monkeypatch.delenv("BXMEM_CONFIG")


def no_config_file(request: pytest.FixtureRequest) -> None:
    """Local-only with no config file at all: the home is the default one."""
    monkeypatch = request.getfixturevalue("monkeypatch")
    base = request.getfixturevalue("config_file").parent
    home = request.getfixturevalue("home")
    (base / "xdg-data").mkdir()
    # The home at the default path, a directory of its own (bxmem refuses a home that is a link);
    # the fixture's path leads to it, for the steps that write there.
    home.rename(base / "xdg-data" / "boxmaker")
    home.symlink_to(base / "xdg-data" / "boxmaker")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "xdg-data"))
    monkeypatch.delenv("BOXMAKER_HOME")
    monkeypatch.delenv("BXMEM_CONFIG")


def steps(*setups: Callable[[pytest.FixtureRequest], None]) -> Callable[[pytest.FixtureRequest], None]:
    def setup(request: pytest.FixtureRequest) -> None:
        for step in setups:
            step(request)

    return setup


def nothing(request: pytest.FixtureRequest) -> None:
    pass


BUDGETS = [
    Budget("idle decide", ("decide",), steps(refused_honcho, a_new_turn, decided), CLI + HTTP, path="idle"),
    Budget("idle mirror", ("mirror",), steps(refused_honcho, a_new_edit, mirrored), CLI + HTTP, path="idle"),
    Budget("idle send", ("send",), steps(answering_honcho, a_new_turn, decided, sent), CLI + HTTP, path="idle"),
    # As the units run them: the home found through the config file at its default path.
    Budget(
        "idle send, the owner's way",
        ("--quiet", "send"),
        steps(answering_honcho, the_owners_way, a_new_turn, decided, sent),
        CLI + HTTP,
        path="idle",
    ),
    Budget(
        "idle decide, local-only, the owner's way",
        ("--quiet", "decide"),
        steps(local_only, the_owners_way, a_new_turn, decided),
        CLI + HTTP,
        path="idle",
    ),
    Budget(
        "idle mirror, no config file",
        ("--quiet", "mirror"),
        steps(no_config_file, a_new_edit, mirrored),
        CLI + HTTP,
        path="idle",
    ),
    Budget(
        "lean recall, local only",
        ("recall", "restic backups", "--json"),
        steps(local_only, a_new_turn, decided, load_config),
        CLI + HTTP + ("pydantic", *RECALL_SPARED),
    ),
    Budget(
        "lean recall, Honcho refused",
        ("recall", "restic backups", "--json"),
        steps(refused_honcho, a_new_turn, decided, load_config),
        CLI + HTTP + ("pydantic", *RECALL_SPARED),
    ),
    Budget(
        "lean recall, Honcho answering",
        ("recall", "restic backups", "--json"),
        steps(answering_honcho, a_new_turn, decided, load_config),
        CLI + ("pydantic",),
    ),
    Budget(
        "lean decide with a new turn",
        ("decide",),
        steps(refused_honcho, decided, load_config, a_new_turn),
        CLI + HTTP + ("pydantic",),
    ),
    Budget(
        "lean mirror with a new edit",
        ("mirror",),
        steps(refused_honcho, mirrored, load_config, a_new_edit),
        CLI + HTTP + ("pydantic",),
    ),
    Budget(
        "lean send with a turn to send",
        ("send",),
        steps(answering_honcho, a_new_turn, decided, load_config),
        CLI + ("pydantic",),
    ),
    # No [honcho]: the first run of each job validates the file (pydantic), and
    # still loads nothing of HTTP to say nothing is sent.
    Budget("first local-only send", ("--quiet", "send"), steps(local_only, a_new_turn), CLI + HTTP),
    Budget("first local-only decide", ("--quiet", "decide"), steps(local_only, a_new_turn), CLI + HTTP),
    Budget("first local-only mirror", ("--quiet", "mirror"), steps(local_only, a_new_edit), CLI + HTTP),
    Budget("bxmem --help", ("--help",), nothing, HTTP + ("rich", "pydantic", "sqlite3"), path="cli"),
    # typer itself loads pydantic to coerce a command's parameters (typer/_adapters.py), so on
    # typer's paths the budget holds bxmem's own use of it, the configuration's schema: help
    # reads no configuration. tools does (its definitions name the configured workspaces).
    Budget(
        "bxmem decide --help",
        ("decide", "--help"),
        nothing,
        HTTP + ("rich", "bxmem.config.schema", "sqlite3"),
        path="cli",
    ),
    Budget("bxmem tools", ("tools",), nothing, HTTP + ("rich", "sqlite3"), path="cli"),
]


def loaded_by(argv: tuple[str, ...], tmp_path: Path) -> tuple[int, list[str]]:
    """The exit code and every module the command line loaded, in a fresh interpreter."""
    out = tmp_path / "loaded.txt"
    subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *argv],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )
    code, loaded = ast.literal_eval(out.read_text())
    return code, loaded


def over_budget(budget: Budget, loaded: list[str]) -> list[str]:
    tops = {name.partition(".")[0] for name in loaded}
    found = sorted(name for name in budget.not_loaded if name in tops or name in loaded)
    if budget.path == "idle":
        found += [
            name
            for name in loaded
            if name not in IDLE_ALLOWED and name != "bxmem" and not name.startswith("bxmem.start")
        ]
    return found


@pytest.mark.parametrize(
    "budget",
    [
        pytest.param(
            budget, id=budget.name, marks=[pytest.mark.xfail(strict=True, reason=budget.leak)] if budget.leak else []
        )
        for budget in BUDGETS
    ],
)
def test_each_start_up_path_loads_only_what_it_uses(budget: Budget, request, tmp_path):
    budget.setup(request)
    code, loaded = loaded_by(budget.argv, tmp_path)
    assert code == budget.code, (budget.name, code)
    # The run took the path the row is about: the idle check's answer, the lean run, or typer's.
    took = "cli" if "bxmem.cli.app" in loaded else "lean" if "bxmem.start.lean_path" in loaded else "idle"
    assert took == budget.path, (budget.name, took)
    assert over_budget(budget, loaded) == [], f"{budget.name} loaded {over_budget(budget, loaded)}"


def test_the_budget_catches_a_module_it_forbids():
    """The check itself, on loaded sets it must refuse: a budget that cannot fail holds nothing."""
    lean = next(budget for budget in BUDGETS if budget.name == "lean decide with a new turn")
    idle = next(budget for budget in BUDGETS if budget.name == "idle decide")
    assert over_budget(lean, ["bxmem", "json", "rich.console", "rich"]) == ["rich"]
    assert over_budget(lean, ["bxmem", "json", "sqlite3"]) == []
    help_ = next(budget for budget in BUDGETS if budget.name == "bxmem decide --help")
    assert over_budget(help_, ["bxmem", "pydantic", "bxmem.config.schema"]) == ["bxmem.config.schema"]
    assert over_budget(idle, ["bxmem", "bxmem.start.idle", "marshal", "json", "bxmem.store.files"]) == [
        "json",
        "bxmem.store.files",
    ]
