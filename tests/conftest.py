"""Every test runs in its own Boxmaker home with its own config file.

A HONCHO_API_KEY is planted in the environment of every test: bxmem must
never read it, and the fake Honcho checks that it is never sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_honcho import OPENAPI, FakeHoncho, OpenAPIChecker

from bxmem.demo.brokerd import StubBrokerd

PLANTED_ENV_KEY = "env-key-that-must-never-be-sent-0f3a"
ROOT = Path(__file__).resolve().parents[1]
# Every key a test configures is registered here; no output and no file of
# the home may ever contain one (checked after every test).
SECRETS_IN_PLAY: set[str] = {PLANTED_ENV_KEY}
CAPTURED: list[str] = []


def register_secret(value: str) -> str:
    SECRETS_IN_PLAY.add(value)
    return value


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("BOXMAKER_HOME", str(home))
    # A named config file must exist (a missing one stops every command): an
    # empty one is local-only. Tests that configure Honcho overwrite it.
    (tmp_path / "bxmem.toml").touch()
    monkeypatch.setenv("BXMEM_CONFIG", str(tmp_path / "bxmem.toml"))
    monkeypatch.setenv("HONCHO_API_KEY", PLANTED_ENV_KEY)
    monkeypatch.setenv("HONCHO_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    CAPTURED.clear()
    yield home
    leaks = [output[:80] for output in CAPTURED for secret in SECRETS_IN_PLAY if secret in output]
    for path in home.rglob("*"):
        if path.is_file() and not path.is_socket():
            data = path.read_bytes()
            leaks += [str(path) for secret in SECRETS_IN_PLAY if secret.encode() in data]
    assert not leaks, f"a key reached an output or a file: {leaks[:3]}"


@pytest.fixture(scope="session")
def openapi_checker() -> OpenAPIChecker:
    assert OPENAPI.exists(), f"the Honcho OpenAPI document is missing: {OPENAPI}"
    return OpenAPIChecker(OPENAPI)


@pytest.fixture
def honcho(openapi_checker: OpenAPIChecker):
    fake = FakeHoncho(checker=openapi_checker).start()
    yield fake
    fake.stop()
    assert not fake.violations, f"requests that do not match the OpenAPI document: {fake.violations[:5]}"
    for request in fake.requests:
        assert PLANTED_ENV_KEY not in json.dumps(request.headers), "a key from the environment was sent"


@pytest.fixture
def brokerd(home: Path):
    stub = StubBrokerd(home / "run" / "memory-broker" / "state.sock").start()
    yield stub
    stub.stop()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return tmp_path / "bxmem.toml"


def honcho_config(url: str, *, extra: str = "", batch: int | None = None) -> str:
    text = (
        f'[honcho]\nurl = "{url}"\nagent = "boxmaker0"\nowner = "kyle"\n'
        'trusted = "bm0-trusted"\nuntrusted = "bm0-untrusted"\nfleet = "fleet"\n'
    )
    if batch is not None:
        text += f"\n[send]\nbatch = {batch}\n"
    return text + extra


@pytest.fixture
def configure(config_file: Path):
    """Write bxmem.toml pointing at a Honcho URL (or local-only with None)."""

    def write(url: str | None, **kwargs) -> Path:
        config_file.write_text(honcho_config(url, **kwargs) if url else "")
        return config_file

    return write


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
    import jsonschema

    schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    VALIDATED.append(kind)
    return data


@pytest.fixture(autouse=True)
def bxmem_logger():
    """Each test starts with the bxmem logger as a fresh process has it and leaves
    it so: an in-process run's log.setup() binds a handler to that test's
    captured stderr, which a later test would otherwise still write to."""
    import logging

    from bxmem.log import log

    saved = (log.handlers[:], log.propagate, log.level)
    log.handlers[:], log.propagate, log.level = [], True, logging.NOTSET
    yield
    log.handlers[:], log.propagate = saved[0], saved[1]
    log.setLevel(saved[2])


@pytest.fixture(autouse=True)
def output_contract(monkeypatch: pytest.MonkeyPatch):
    """In-process: every RecallResult and AskResult made is rendered and validated.
    Subprocesses: run_bxmem validates their --json stdout."""
    from bxmem.commands import ask as ask_module
    from bxmem.commands import recall as recall_module

    for module, kind, entry in ((recall_module, "recall", "recall"), (ask_module, "ask", "ask")):
        original = getattr(module, entry)

        def checked(*args, _original=original, _module=module, _kind=kind, **kwargs):
            result = _original(*args, **kwargs)
            validate_output(_kind, _module.render_json(result))
            return result

        monkeypatch.setattr(module, entry, checked)
    yield


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
    """With --json, stdout is one JSON document, whatever happened: the command's own
    (recall, ask and send validated against their schemas) or an error document."""
    if "--json" not in (args[: args.index("--")] if "--" in args else args):
        return
    document = json.loads(stdout)  # one document, nothing before or after it
    words = [a for a in args if not a.startswith("-")]
    if isinstance(document, dict) and document.get("schema") == "bxmem.error/1":
        validate_output("error", document)
    elif words and words[0] in ("recall", "ask", "send"):
        validate_output(words[0], document)


def bxmem_inprocess(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process, through the same error boundary (cli.run_cli), for
    tests that are about a command's output or exit code and not about the idle
    fast path or the lean path (use run_bxmem for those, and for kills). About
    a second faster per call than a subprocess on these machines. Same result
    shape as run_bxmem; outputs are checked for keys and --json outputs
    validated the same way."""
    import contextlib
    import io
    import logging

    from bxmem.cli.app import run_cli
    from bxmem.log import log

    saved_env = {name: os.environ.get(name) for name in (env or {})}
    saved_log = (log.handlers[:], log.propagate, log.level)  # run_cli's log.setup rebinds them
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env or {})
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = run_cli(list(args))
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


def ledger_events(home: Path) -> list[dict]:
    path = home / "memory" / "honcho.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]


def decisions(home: Path) -> dict[str, dict]:
    return {e["item"]: e for e in ledger_events(home) if e["ev"] == "decided"}
