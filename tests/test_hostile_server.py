"""Every command against a hostile Honcho (tests/hostile_honcho.py): each route it
calls answered with each attack in turn, the command run as the console script
in a subprocess under an address-space limit (tests/hostile_child.py, timeouts
shortened). Each run must:

* end within its command's documented bound (send: its run deadline; recall: its
  source deadline; ask: its --deadline; audit: its whole-command deadline; sync: its
  check's), at the shortened timeouts, with bench/hostile.py's start-up allowance on top;
* stay within bench/hostile.py's peak RSS target (the child's own VmHWM, see hostile_child.py);
* print no traceback, and exit with a code from the documented table;
* send each key only with requests for its own workspace, and nothing to the
  host a redirect names;
* lose nothing from the outbox: every item is still pending, or failed with a
  reason, or sent with ids Honcho really holds; never marked sent otherwise.

The table of worst times and peaks at the real timeouts is bench/hostile.py's
(`./dev bench hostile`, docs/performance.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import CAPTURED, ROOT, ledger_events, register_secret, validate_output
from hostile_child import SHORT
from hostile_honcho import FORGED_DATE, FORGED_TEXT, KEYS, MODES, Attack, Trap, arm, build_home, disarm

from bench import hostile
from bxmem.errors import COMMAND_EXITS

pytestmark = pytest.mark.slow

RSS_CAP_KB = hostile.RSS_TARGET_MB * 1024  # the documented peak, docs/performance.md
AS_LIMIT = 2 << 30  # a guard, so a regression cannot take the machine with it
# The documented start-up allowance; here only the CLI's imports count against it, not the interpreter's start.
STARTUP_S = hostile.STARTUP_S

GENERIC = [m for m in MODES if m != "typed"]
for _key in KEYS.values():
    register_secret(_key)  # checked after every test: in no output and no file of the home
BOUND_S = {  # with SHORT: what each command's documented bound comes to
    "send": SHORT["bxmem.commands.send.runner.RUN_DEADLINE_S"],
    "recall": SHORT["bxmem.commands.recall.HONCHO_TIMEOUT_S"],
    "ask": 5.0,  # --deadline 5
    "audit": SHORT["bxmem.commands.audit.DEADLINE_S"],
    "sync": SHORT["bxmem.commands.live_checks.HONCHO_TIMEOUT_S"]
    + 0.5
    + 2.0,  # Honcho's and brokerd's checks run at once
    "demo": 2 * SHORT["bxmem.commands.send.runner.RUN_DEADLINE_S"]
    + SHORT["bxmem.commands.recall.HONCHO_TIMEOUT_S"]
    + 3.5,
}


# --- the forged answers of each route --------------------------------------------------------

FORGED_ID_VALUES = (12345, "..", "a/b", "\x1b[2J", "x" * 513)
FORGED_MESSAGE = {
    "id": "..",
    "content": f"the backups {FORGED_TEXT}",
    "peer_id": "\x1b[31m\n",
    "session_id": "../x",
    "metadata": "bxmem_item=turn:s:1",
    "created_at": FORGED_DATE,
}


def _page(items):
    return {"items": items, "total": 10**9, "page": 1, "size": 100, "pages": 10**7}


def typed_bodies(route: str) -> list[object]:
    """Wrong types and forged ids in every field bxmem reads from this route's answer."""
    created = [
        lambda sent, forged=forged: [{"id": forged} for _ in (sent.get("messages") or sent.get("conclusions"))]
        for forged in FORGED_ID_VALUES
    ]
    bodies: dict[str, list[object]] = {
        "PUT ": [{"configuration": "on"}, {"configuration": {"reasoning": "yes"}}, [], "x"],
        "POST /v3/workspaces$": [{"configuration": ["x"]}, {"configuration": {"reasoning": [1]}}, 5],
        "/peers$": [{"id": ".."}, "x"],
        "/sessions$": [{"id": ".."}, []],
        "/messages$": [*created, [], {"id": "A1"}],
        "/conclusions$": [*created, [{"id": 12345}]],
        "/messages/list$": [
            _page([FORGED_MESSAGE]),
            _page([{**FORGED_MESSAGE, "id": "A1"}]),
            {"items": "x"},
            {"items": [], "pages": "2"},
        ],
        "/conclusions/list$": [
            _page([{"id": "..", "content": 5}]),
            _page([{"id": "A1", "content": "x", "observer_id": [1]}]),
        ],
        "DELETE ": [{"id": ".."}, "x"],
        "/search$": [[FORGED_MESSAGE], [{**FORGED_MESSAGE, "content": 5}], {"items": []}],
        "/conclusions/query$": [
            [
                {
                    "content": f"backups {FORGED_TEXT}",
                    "observer_id": "..",
                    "session_id": "\x1b[2J",
                    "created_at": FORGED_DATE,
                }
            ],
            [{"content": "backups", "session_id": 5}],
            [5],
        ],
        "/peers/list$": [_page([{"id": ".."}]), _page([{"id": "\x1b[31m"}, {"id": "kyle"}]), {"items": 5}],
        "/chat$": [{"content": FORGED_TEXT * 1000}, {"content": 5}, {"content": ["x"]}, []],
        "/sessions/list$": [_page([{"id": ".."}]), _page([{"id": "s"}]), {"items": [{"id": 5}]}],
        "/health$": [{"status": FORGED_TEXT}, []],
        ".": [],  # every route at once: the generic attacks only
    }
    return bodies[route]


# Each command's routes, the setup that makes it call them, and the command line.
ROUTES = {  # ".": every route at once, so a command that goes on asking meets its own deadline (slow)
    "send": {
        "fresh": ["PUT ", "POST /v3/workspaces$", "/peers$", "/sessions$", "/messages$", "/conclusions$", "."],
        "settled": ["/messages$", "/messages/list$", "/conclusions/list$", "DELETE ", "."],
    },
    "recall": {"settled": ["/search$", "/conclusions/query$", "."]},
    "ask": {"settled": ["/peers/list$", "/chat$", "."]},
    "audit": {"settled": ["/sessions/list$", "/messages/list$", "/conclusions/list$", "."]},
    "sync": {"settled": ["/health$"]},
}
ARGS = {
    "send": ["send"],
    "recall": ["recall", "--json", "backups"],
    "ask": ["ask", "--json", "--deadline", "5", "-w", "own", "-w", "boxmaker1", "where are the backups?"],
    "audit": ["audit", "--json"],
    "sync": ["sync", "--json"],
}


# The runs known to break a documented bound, each a strict xfail: the run that keeps it
# again makes its entry XPASS, which forces the entry out.
OVER_BOUND = {
    "recall-settled-.-huge-chunked": "recall, every source answering without end, peaks at 133-147 MB "
    "(over the documented 120 MB) with the sources' deadlines shortened to 1 s",
}


def scenarios():
    for command, setups in ROUTES.items():
        for setup, routes in setups.items():
            for route in routes:
                for mode in GENERIC:
                    name = f"{command}-{setup}-{route.strip()}-{mode}"
                    marks = [pytest.mark.xfail(strict=True, reason=OVER_BOUND[name])] if name in OVER_BOUND else []
                    yield pytest.param(command, setup, route, mode, None, id=name, marks=marks)
                for n, body in enumerate(typed_bodies(route)):
                    yield pytest.param(
                        command, setup, route, "typed", body, id=f"{command}-{setup}-{route.strip()}-typed{n}"
                    )


# --- the homes ------------------------------------------------------------------------------------


@pytest.fixture
def trap():
    t = Trap()
    yield t
    t.stop()


# --- running and checking one command -----------------------------------------------------------


def run_child(
    args: list[str], env: dict[str, str], kill_after: float
) -> tuple[subprocess.CompletedProcess, float, int]:
    """The command in a subprocess: its result, how long it ran once the interpreter was up, and its
    peak RSS (kB, its own VmHWM)."""
    peak_file = Path(tempfile.mkdtemp(prefix="bxmem-peak-")) / "peak"
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "hostile_child.py"), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env, "BXMEM_TEST_AS_BYTES": str(AS_LIMIT), "BXMEM_TEST_PEAK_FILE": str(peak_file)},
    )
    try:
        try:
            out, err = proc.communicate(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"bxmem {' '.join(args)} still running after {kill_after:g} s: {err[-500:]}")
        assert peak_file.exists(), f"bxmem {' '.join(args)} left without recording its peak RSS: {err[-500:]}"
        peak_kb, ran_s = peak_file.read_text(encoding="ascii").split()
        rss, took = int(peak_kb), float(ran_s)
        assert took <= time.monotonic() - started
    finally:
        shutil.rmtree(peak_file.parent, ignore_errors=True)
    CAPTURED.extend((out, err))
    return subprocess.CompletedProcess(args, proc.returncode, out, err), took, rss


def check_keys(honcho, trap) -> None:
    """Each key only with its own workspace's requests, nothing to a redirect's host,
    and every path made of Honcho ids (never `..`, `.`, an escape) and route words."""
    assert trap.requests == [], "a redirect was followed"
    owner = {f"Bearer {key}": ws for ws, key in KEYS.items()}
    for request in honcho.requests:
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,512}", part) for part in request.path.split("/")[1:]), request.path
        auth = request.headers.get("authorization")
        if request.path == "/health":
            assert auth is None
            continue
        parts = request.path.split("/")
        ws = parts[3] if len(parts) > 3 else (request.body or {}).get("id")
        assert auth is not None and owner.get(auth) == ws, (request.method, request.path)


def check_outbox(home: Path, honcho) -> None:
    """Every decided item is pending, failed with a reason, or sent with ids Honcho holds."""
    events = ledger_events(home)
    held = {m["id"] for m in honcho.messages} | set(honcho.conclusions)
    for ev in events:
        if ev["ev"] == "failed":
            assert ev["reason"], ev
        if ev["ev"] == "sent":
            ids = list(ev.get("ids") or []) + [
                i
                for r in ev.get("results") or []
                for i in ([r["id"]] if r.get("id") else []) + list(r.get("ids") or [])
            ]
            deleted = {r.get("deleted") for r in ev.get("results") or []}
            assert all(i in held or i in deleted or _deleted(events, i) for i in ids), ev


def _deleted(events, conclusion_id) -> bool:
    return any(r.get("deleted") == conclusion_id for e in events if e["ev"] == "sent" for r in e.get("results") or [])


def check_run(command: str, result, took: float, rss: int, scenario: str) -> None:
    """No traceback, an exit code of the command's table, and within its bounds of wall time and peak RSS."""
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode in COMMAND_EXITS[command], (result.returncode, result.stderr[-500:])
    bound = BOUND_S[command] + STARTUP_S
    assert took <= bound, f"bxmem {command} ({scenario}) took {took:.2f} s, over its bound of {bound:g} s"
    assert rss <= RSS_CAP_KB, (
        f"bxmem {command} ({scenario}) peaked at {rss / 1024:.1f} MB, over {RSS_CAP_KB // 1024} MB"
    )


def test_peak_rss_is_the_commands_own_not_this_process():
    """A test process far over the cap (as the whole suite's grows) does not lend its peak to a child."""
    ballast = bytearray(RSS_CAP_KB * 1024 + (64 << 20))
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so resident
    result, _took, rss = run_child(["--version"], {}, kill_after=60)
    assert result.returncode == 0, result.stderr[-500:]
    assert 5 * 1024 < rss < RSS_CAP_KB // 2, rss
    del ballast


@pytest.mark.parametrize(("command", "setup", "route", "mode", "body"), list(scenarios()))
def test_a_command_against_a_hostile_honcho(home, tmp_path, honcho, trap, command, setup, route, mode, body):
    build_home(tmp_path, honcho, setup)
    honcho.requests.clear()
    attack = Attack(mode, route, body=body, store=route in ("/messages$", "/conclusions$"))
    arm(honcho, attack, trap)
    result, took, rss = run_child(ARGS[command], {}, kill_after=BOUND_S[command] + 60)
    disarm(honcho)
    check_run(command, result, took, rss, f"{route.strip()} {mode}")
    check_keys(honcho, trap)
    check_outbox(home, honcho)
    if command in ("recall", "ask") and result.stdout.strip():
        validate_output(command, json.loads(result.stdout))


@pytest.mark.parametrize("mode", GENERIC)
def test_demo_against_a_hostile_honcho_on_every_route(honcho, trap, mode):
    arm(honcho, Attack(mode, "."), trap)
    result, took, rss = run_child(["demo", "--honcho", honcho.url], {}, kill_after=BOUND_S["demo"] + 60)
    disarm(honcho)
    check_run("demo", result, took, rss, f"every route {mode}")
    assert trap.requests == []


def test_the_documented_bounds_are_the_commands_own_deadlines():
    """bench/hostile.py's table (docs/performance.md's row) is read from the deadlines the commands run with."""
    from bxmem.commands import ask, audit, recall
    from bxmem.commands.send import runner

    assert {command: hostile.BOUNDS[command] for command in ARGS} == {
        "send": runner.RUN_DEADLINE_S,
        "recall": recall.HONCHO_TIMEOUT_S,
        "ask": ask.DEADLINE_S,
        "audit": audit.DEADLINE_S,
        "sync": recall.HONCHO_TIMEOUT_S + 0.5,  # sync's checks wait half a second past the longest deadline
    }
    rows = (ROOT / "docs" / "performance.md").read_text().split("every command against a hostile Honcho", 1)[1]
    wall, rss = rows.splitlines()[:2]
    assert f"+ {hostile.STARTUP_S:g} s of start-up" in wall
    assert all(f"{command} {hostile.BOUNDS[command]:g} s" in wall for command in ARGS), wall
    assert f"≤ {hostile.RSS_TARGET_MB} MB" in rss, rss
