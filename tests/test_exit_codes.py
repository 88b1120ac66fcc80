"""One exit-code table (bxmem/errors.py, rendered into docs/cli.md), and every
command held to it: by what its code names and raises, and by running it
(issue 12, item 11)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
import typer
from helpers import bxmem_main, run_bxmem, write_log

from bxmem import errors
from bxmem.cli.app import app
from bxmem.demo.sample import turn_lines
from bxmem.errors import COMMAND_EXITS, MEANINGS, ExitCode

ROOT = Path(__file__).resolve().parents[1]

# The arguments each command needs to get past its own command line.
ARGS = {
    "undo": ["e1"],
    "recall": ["backups"],
    "ask": ["what changed?"],
    "schema": ["ask"],
    "artifact record": ["--session", "s", "--", "table.csv"],
    "artifact resolve": ["art_" + "a" * 52],
    "artifact export": ["art_" + "a" * 52, "--to", "/nonexistent/out"],
    "artifact rm": ["art_" + "a" * 52],
}


def leaf_commands() -> list[str]:
    found = []

    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs is None:
            found.append(" ".join(path))
            return
        for name, sub in subs.items():
            walk(sub, path + [name])

    walk(typer.main.get_command(app), [])
    return sorted(found)


def argv(command: str, *extra: str) -> list[str]:
    return [*command.split(), *ARGS.get(command, []), *extra]


def test_every_command_has_a_row_and_every_code_a_meaning():
    assert sorted(COMMAND_EXITS) == leaf_commands()
    assert set(MEANINGS) == {value for _name, value in ExitCode.members()}
    for codes in COMMAND_EXITS.values():
        assert set(codes) <= set(MEANINGS)
    docs = (ROOT / "docs" / "cli.md").read_text()
    for command, codes in COMMAND_EXITS.items():
        assert f"| `bxmem {command}` | {', '.join(str(c) for c in sorted(codes))} |" in docs


CLI_MODULES = {
    "cli": "cli/app",
    "cli_owner": "cli/owner",
    "cli_agent": "cli/agent",
    "cli_host": "cli/host",
    "cli_artifacts": "cli/artifacts",
}
GROUPS = {
    "app": "",
    "config_app": "config ",
    "index_app": "index ",
    "outbox_app": "outbox ",
    "units_app": "units ",
    "artifact_app": "artifact ",
}


def _declared(tree: ast.Module) -> dict[str, str]:
    """Each command a module declares, by name -> its function's name: `@GROUP.command(...)`
    on a function, or `GROUP.command("name", ...)(function)`."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and isinstance(decorator.func, ast.Attribute)
                    and decorator.func.attr == "command"
                ):
                    assert isinstance(decorator.func.value, ast.Name), ast.unparse(decorator)
                    name = ast.literal_eval(decorator.args[0]) if decorator.args else node.name
                    found[GROUPS[decorator.func.value.id] + name] = node.name
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Call)
            and isinstance(node.func.func, ast.Attribute)
            and node.func.func.attr == "command"
            and node.args
            and isinstance(node.args[0], ast.Attribute | ast.Name)
        ):
            assert isinstance(node.func.func.value, ast.Name), ast.unparse(node)
            group = GROUPS[node.func.func.value.id]
            function = node.args[0].attr if isinstance(node.args[0], ast.Attribute) else node.args[0].id
            found[group + ast.literal_eval(node.func.args[0])] = function
    return found


def _functions() -> dict[str, list[ast.FunctionDef]]:
    """Each command's own code: its function in cli/ (app.py, owner.py, agent.py, host.py),
    and for the timer jobs and recall the functions both paths run (commands/lean_commands.py), with
    the job report's exit_code."""
    reports = {"decide": "decide", "mirror": "mirror", "send": "send_report"}
    files = {
        **CLI_MODULES,
        "jobs": "commands/lean_commands",
        "decide": "commands/decide",
        "mirror": "commands/mirror",
        "send_report": "commands/send/report",
    }
    trees = {name: ast.parse((ROOT / "bxmem" / f"{files[name]}.py").read_text()) for name in files}
    defs = {
        (mod, node.name): node
        for mod, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
    }
    functions = {name: node for (mod, name), node in defs.items() if mod in CLI_MODULES}
    out: dict[str, list[ast.FunctionDef]] = {}
    for mod in CLI_MODULES:
        for command, function in _declared(trees[mod]).items():
            out[command] = [functions[function]]
    for job, module in reports.items():
        out[job] += [defs[("jobs", job)], defs[("jobs", "finish")]]
        out[job] += [
            node for node in ast.walk(trees[module]) if isinstance(node, ast.FunctionDef) and node.name == "exit_code"
        ]
    out["recall"].append(defs[("jobs", "recall")])
    return out


def test_each_command_names_and_raises_only_codes_in_its_row():
    functions = _functions()
    assert sorted(functions) == leaf_commands()
    for command, nodes in functions.items():
        used = set()
        for node in nodes:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "ExitCode":
                    used.add(getattr(ExitCode, sub.attr))
                if isinstance(sub, ast.Raise) and isinstance(sub.exc, ast.Call) and isinstance(sub.exc.func, ast.Name):
                    cls = getattr(errors, sub.exc.func.id, None)
                    if isinstance(cls, type) and issubclass(cls, errors.BxmemError):
                        used.add(cls.exit_code)
        assert used <= set(COMMAND_EXITS[command]), (command, used - set(COMMAND_EXITS[command]))


@pytest.fixture
def turns(home):
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    return home


def check(command: str, result, expected: int | None = None) -> None:
    assert result.returncode in COMMAND_EXITS[command], (command, result.returncode, result.stderr)
    if expected is not None:
        assert result.returncode == expected, (command, result.returncode, result.stderr)


def a_user_of_its_own(tmp_path: Path) -> dict:
    """HOME and the XDG folders in the test's own folder, and a systemctl that does
    nothing: `units` writes the units, and asks systemctl, where they say."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "systemctl").write_text("#!/bin/sh\nexit 0\n")
    (fake / "systemctl").chmod(0o755)
    return {
        "HOME": str(tmp_path / "user"),
        "XDG_CONFIG_HOME": str(tmp_path / "user" / ".config"),
        "XDG_STATE_HOME": str(tmp_path / "user" / "state"),
        "PATH": f"{fake}:{os.environ['PATH']}",
    }


@pytest.mark.parametrize("command", sorted(COMMAND_EXITS))
def test_every_command_keeps_to_its_row_local_only_and_on_mistakes(turns, tmp_path, command, monkeypatch):
    if command.startswith("units"):
        for name, value in a_user_of_its_own(tmp_path).items():
            monkeypatch.setenv(name, value)
    if command == "demo":
        check(command, bxmem_main("demo", "--honcho", "ftp://not-a-url"), ExitCode.USAGE)
    elif command == "init":  # a named configuration that is missing is the one it writes
        named = tmp_path / "missing.toml"
        check(command, bxmem_main("init", "--local-only", env={"BXMEM_CONFIG": str(named)}), ExitCode.OK)
        assert named.exists()
        check(command, bxmem_main("init", "--local-only"), ExitCode.REFUSED)  # one is there
    else:
        check(
            command, bxmem_main(*argv(command), env={"BXMEM_CONFIG": str(tmp_path / "missing.toml")}), ExitCode.CONFIG
        )
        check(command, bxmem_main(*argv(command)))  # local-only
    mistake = bxmem_main(*argv(command, "--no-such-option"))
    check(command, mistake, ExitCode.USAGE)
    # One line, as every other error: click's own was a usage block, a hint and a blank line.
    assert mistake.stderr.startswith("bxmem: error: ") and len(mistake.stderr.splitlines()) == 1, mistake.stderr


def test_local_only_ask_and_audit_are_refused_not_bugs_or_usage(home):
    for command in ("ask", "audit"):
        result = bxmem_main(*argv(command))
        check(command, result, ExitCode.REFUSED)
        assert "local-only" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_each_code_a_command_can_reach_is_in_its_row(turns, configure, tmp_path):
    """The codes beyond the common ones, each reached for real."""
    configure("http://127.0.0.1:9")  # nothing listens there; no brokerd either
    check("decide", bxmem_main("decide"), ExitCode.DEGRADED)  # brokerd cannot answer
    check("sync", bxmem_main("sync"), ExitCode.ATTENTION)  # turns wait on brokerd
    check("audit", bxmem_main("audit"), ExitCode.UNAVAILABLE)
    check("recall", bxmem_main("recall", ""), ExitCode.USAGE)
    check("undo", bxmem_main("undo", "no-such-edit"), ExitCode.NOT_FOUND)
    check("mirror", bxmem_main("mirror"), ExitCode.OK)
    key = tmp_path / "k"
    key.write_text("k\n")
    os.chmod(key, 0o644)
    configure("http://127.0.0.1:9", extra=f'[secrets.honcho_fleet]\nfile = "{key}"\n')
    check("send", bxmem_main("send"), ExitCode.DEGRADED)  # that workspace stops, the others go on
    check("sync", bxmem_main("sync"), ExitCode.ATTENTION)
    check("config check", bxmem_main("config", "check"), ExitCode.CONFIG)


def test_send_and_audit_against_a_server_that_went_away(turns, brokerd, honcho, configure):
    configure(honcho.url)
    bxmem_main("decide")
    check("send", bxmem_main("send"), ExitCode.OK)
    check("audit", bxmem_main("audit"), ExitCode.OK)
    honcho.messages.pop()  # one message the ledger records as sent is gone
    check("audit", bxmem_main("audit"), ExitCode.ATTENTION)
    write_log(turns, "s", turn_lines(2, "more", "yes"))
    bxmem_main("decide")
    honcho.stop()
    check("send", bxmem_main("send"), ExitCode.DEGRADED)
    check("ask", bxmem_main("ask", "what?"), ExitCode.UNAVAILABLE)


# Each way into bxmem as a process once: the timer jobs' idle and lean path, the
# lean recall, the typer CLI, and each failing before a command runs.
PROCESS_RUNS = [
    (["decide"], ExitCode.OK),
    (["decide"], ExitCode.OK),  # the second run is answered idle
    (["recall", ""], ExitCode.USAGE),
    (["sync", "--no-such-option"], ExitCode.USAGE),
    (["undo", "no-such-edit"], ExitCode.NOT_FOUND),
    (["--config", "/nonexistent/bxmem.toml", "send"], ExitCode.CONFIG),
    (["--config", "/nonexistent/bxmem.toml", "sync"], ExitCode.CONFIG),
]


def test_each_entry_path_exits_with_its_code_as_a_process(turns, brokerd):
    for args, expected in PROCESS_RUNS:
        result = run_bxmem(*args)
        assert result.returncode == expected, (args, result.returncode, result.stderr)
        assert len(result.stderr.strip().splitlines()) <= 1 or expected == ExitCode.OK, result.stderr
