"""Every test runs in its own Boxmaker home with its own config file.

A HONCHO_API_KEY is planted in the environment of every test: bxmem must
never read it, and the fake Honcho checks that it is never sent. The helpers
the tests import are in helpers.py; this file holds the fixtures only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_honcho import OPENAPI, FakeHoncho, OpenAPIChecker
from helpers import CAPTURED, HYPOTHESIS_PROFILE, PLANTED_ENV_KEY, SECRETS_IN_PLAY, honcho_config, validate_output
from hypothesis import settings

from bxmem.demo.brokerd import StubBrokerd

# No deadline in either: the workers share the cores, so an example's time says
# nothing about the code (speed is measured in bench/, not here).
settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("fast", max_examples=10, deadline=None)
settings.load_profile(HYPOTHESIS_PROFILE)


# The files whose tests share one costly setup (test_structure.py parses every module of
# bxmem in a module-scoped fixture and caches): each run whole by one pytest-xdist worker,
# not set up again in every worker.
SHARED_SETUP = ("test_structure.py",)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's --dist load (one test at a time to the next free worker, ./dev test's),
    but a file of SHARED_SETUP as one unit. Its own --dist loadgroup would do it with an
    xdist_group mark, but it renames the tests in a way pytest 9 no longer sees."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.partition("::")[0]
            return file if Path(file).name in SHARED_SETUP else nodeid

    return SharedSetupScheduling(config, log)


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


@pytest.fixture
def configure(config_file: Path):
    """Write bxmem.toml pointing at a Honcho URL (or local-only with None)."""

    def write(url: str | None, **kwargs) -> Path:
        config_file.write_text(honcho_config(url, **kwargs) if url else "")
        return config_file

    return write


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


@pytest.fixture(autouse=True, scope="session")
def typer_command_built_once():
    """cli.app.run_cli has typer build its click command on every call, which a
    process makes once; the in-process tests make thousands, at about 85 ms each.
    Built once per typer app here, the same command every call."""
    import typer.main

    real = typer.main.get_command
    built: dict[int, tuple[object, object]] = {}  # id -> (the app, kept alive so its id stays its own; its command)

    def get_command(typer_instance):
        if id(typer_instance) not in built:
            built[id(typer_instance)] = (typer_instance, real(typer_instance))
        return built[id(typer_instance)][1]

    typer.main.get_command = get_command
    yield
    typer.main.get_command = real
