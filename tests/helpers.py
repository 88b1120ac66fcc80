"""What the tests share besides fixtures (those are in conftest.py): the CLI run as
a process or in this process, the test home's files read back, and the checks
every output goes through (no key in it; --json validated against its schema).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

PLANTED_ENV_KEY = "env-key-that-must-never-be-sent-0f3a"
ROOT = Path(__file__).resolve().parents[1]
# Every key a test configures is registered here; no output and no file of
# the home may ever contain one (checked after every test).
SECRETS_IN_PLAY: set[str] = {PLANTED_ENV_KEY}
CAPTURED: list[str] = []

# hypothesis: `./dev test` sets "fast" (a tenth of each property's examples),
# `./dev test --all` and CI "ci" (every one); pytest run by hand draws them all.
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")


def examples(full: int) -> int:
    """How many examples a property that asks for `full` draws in this profile."""
    return full if HYPOTHESIS_PROFILE == "ci" else max(10, full // 10)


def register_secret(value: str) -> str:
    SECRETS_IN_PLAY.add(value)
    return value


def honcho_config(url: str, *, extra: str = "", batch: int | None = None) -> str:
    text = (
        f'[honcho]\nurl = "{url}"\nagent = "boxmaker0"\nowner = "kyle"\n'
        'trusted = "bm0-trusted"\nuntrusted = "bm0-untrusted"\nfleet = "fleet"\n'
    )
    if batch is not None:
        text += f"\n[send]\nbatch = {batch}\n"
    return text + extra


def write_log(home: Path, session: str, lines: list[dict], mode: str = "a") -> Path:
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / f"{session}.jsonl"
    with open(path, mode) as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return path


# --- the output contract: every recall and ask --json output the suite produces is validated ---

SCHEMAS = ROOT / "bxmem" / "schemas"
VALIDATED: list[str] = []  # which kinds were checked, for the test that checks the checking


def validate_output(kind: str, data: dict) -> dict:
    _validator(kind).validate(data)
    VALIDATED.append(kind)
    return data


@functools.cache
def _validator(kind: str):
    """Built once per kind: the suite validates thousands of outputs against four schemas."""
    import jsonschema

    schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def run_bxmem(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """The real CLI, as a subprocess, in the test's environment."""
    result = subprocess.run(
        [sys.executable, "-m", "bxmem", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        cwd=ROOT,
    )
    CAPTURED.extend((result.stdout, result.stderr))
    check_json_output(args, result.stdout)
    return result


def check_json_output(args: tuple[str, ...], stdout: str) -> None:
    """With --json, stdout is one JSON document, whatever happened: the command's own,
    validated against its schema (the command's first word names it), or an error document."""
    if "--json" not in (args[: args.index("--")] if "--" in args else args):
        return
    document = json.loads(stdout)  # one document, nothing before or after it
    words = [a for a in _without_option_values(args) if not a.startswith("-")]
    if isinstance(document, dict) and document.get("schema") == "bxmem.error/1":
        validate_output("error", document)
    elif words[:1] == ["artifact"] and len(words) > 1 and (SCHEMAS / f"artifact-{words[1]}.schema.json").exists():
        validate_output(f"artifact-{words[1]}", document)
    elif words and (SCHEMAS / f"{words[0]}.schema.json").exists():
        validate_output(words[0], document)
        if words[0] == "sync" and "requeued" in document:
            validate_output("outbox", document["requeued"])
    else:
        raise AssertionError(f"--json output of {' '.join(args)} has no schema to validate it against")


def _without_option_values(args: tuple[str, ...]) -> list[str]:
    """The words of a command line without the values of the global options that take one."""
    out, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word == "--config":
            skip = True
        else:
            out.append(word)
    return out


def bxmem_inprocess(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process, through the same error boundary (cli.run_cli), for
    tests that are about a command's output or exit code and not about the idle
    fast path or the lean path (bxmem_main runs those too). About a second faster
    per call than a subprocess on these machines. Same result shape as run_bxmem;
    outputs are checked for keys and --json outputs validated the same way."""
    from bxmem.cli.app import run_cli

    return _in_this_process(run_cli, list(args), args, env)


def bxmem_main(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The console script's main in this process: the idle fast path, the lean
    path and the CLI, as `bxmem ARGS` chooses between them. For what is not about
    the process itself (import budgets, kills, the console script's exit: run_bxmem)."""
    from bxmem.start.entry import main

    return _in_this_process(main, ["bxmem", *args], args, env)


def _in_this_process(run, argv: list[str], args: tuple[str, ...], env: dict | None) -> subprocess.CompletedProcess:
    import contextlib
    import io
    import logging

    from bxmem.log import log

    saved_env = {name: os.environ.get(name) for name in (env or {})}
    saved_log = (log.handlers[:], log.propagate, log.level)  # the commands' log.setup rebinds them
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env or {})
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = run(argv)
    finally:
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        log.handlers[:], log.propagate = saved_log[0], saved_log[1]
        log.setLevel(saved_log[2] or logging.NOTSET)
    result = subprocess.CompletedProcess(["bxmem", *args], code, stdout.getvalue(), stderr.getvalue())
    CAPTURED.extend((result.stdout, result.stderr))
    check_json_output(args, result.stdout)
    return result


def sample_sent(home: Path, brokerd, honcho, configure):
    """The demo's sample home (bxmem.demo.sample), decided, mirrored and sent to the fake
    Honcho: everything there. Returns the fake."""
    from bxmem.commands import decide, mirror
    from bxmem.commands.send import job as send
    from bxmem.config import loader
    from bxmem.demo import sample

    sample.write_home(home)
    sample.write_journal(home)
    brokerd.states.update(sample.broker_states())
    configure(honcho.url)
    decide.run(loader.load())
    mirror.run(loader.load())
    for _ in range(3):
        send.run(loader.load())
    return honcho


def ledger_events(home: Path) -> list[dict]:
    path = home / "memory" / "honcho.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]


def decisions(home: Path) -> dict[str, dict]:
    return {e["item"]: e for e in ledger_events(home) if e["ev"] == "decided"}
