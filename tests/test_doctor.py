"""`bxmem doctor` catches each thing an owner would otherwise check by hand: a wrong
key, a key minted for another workspace, a key file of the wrong mode, brokerd
down, Honcho down, a unit not enabled, a clock ten minutes off; it says what it
could not check, creates nothing in Honcho, and stays within its bound.

The units are a stand-in `systemctl` on PATH answering `show` as systemd 252 does
(the real-systemd rig runs the real one); Honcho is tests/fake_honcho.py, which
answers GET probes of POST routes with 405 and the queue status route as 3.0.12.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import bxmem_inprocess, register_secret
from runbook_lines import cites

TRUSTED_KEY = register_secret("doctor-trusted-key-1e6a")
UNTRUSTED_KEY = register_secret("doctor-untrusted-key-77c0")
FLEET_KEY = register_secret("doctor-fleet-key-3b9d")
KEYS = {"bm0-trusted": TRUSTED_KEY, "bm0-untrusted": UNTRUSTED_KEY, "fleet": FLEET_KEY}
SECRET_OF = {"bm0-trusted": "honcho_trusted", "bm0-untrusted": "honcho_untrusted", "fleet": "honcho_fleet"}


def jwt_for(workspace: str) -> str:
    """A key shaped as Honcho mints them (a JWT naming its workspace); the signature is not looked at."""
    part = base64.urlsafe_b64encode(json.dumps({"w": workspace, "t": 1}).encode()).decode().rstrip("=")
    return register_secret(f"eyJhbGciOiJIUzI1NiJ9.{part}.c2lnbmF0dXJl{workspace[-4:]}")


def write_keys(tmp_path: Path, values: dict[str, str], mode: int = 0o600) -> str:
    folder = tmp_path / "keys"
    folder.mkdir(exist_ok=True)
    text = ""
    for ws, value in values.items():
        path = folder / f"{ws}.key"
        path.write_text(value + "\n")
        os.chmod(path, mode)
        text += f'\n[secrets.{SECRET_OF[ws]}]\nfile = "{path}"\n'
    return text


def healthy_units(manager: str = "user") -> dict:
    units = {}
    for job in ("decide", "mirror", "send"):
        units[f"bxmem-{job}.timer"] = {
            "LoadState": "loaded",
            "UnitFileState": "enabled",
            "ActiveState": "active",
            "SubState": "waiting",
            "LastTriggerUSec": "Wed 2026-12-02 04:00:00 UTC",
        }
        units[f"bxmem-{job}.service"] = {
            "LoadState": "loaded",
            "UnitFileState": "static",
            "ActiveState": "inactive",
            "SubState": "dead",
            "Result": "success",
            "ExecMainStatus": "0",
            "ExecMainExitTimestamp": "Wed 2026-12-02 04:00:01 UTC",
        }
        units[f"bxmem-{job}.path"] = {"LoadState": "loaded", "UnitFileState": "enabled", "ActiveState": "active"}
    return {manager: units}


SYSTEMCTL = """
import json, sys
state = json.load(open(STATE))
manager = "user" if "--user" in sys.argv else "system"
if manager in state["unreachable"]:
    sys.stderr.write(state["unreachable"][manager] + "\\n")
    sys.exit(1)
at = sys.argv.index("--property")
props, names = sys.argv[at + 1].split(","), sys.argv[at + 2:]
blocks = []
for name in names:
    unit = state["units"].get(manager, {}).get(name) or {"LoadState": "not-found", "ActiveState": "inactive"}
    unit = {"Id": name, **unit}
    blocks.append("\\n".join(f"{p}={unit.get(p, '')}" for p in props))
print("\\n\\n".join(blocks))
"""


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """A stand-in systemctl first on PATH: set(units, unreachable) says what it answers."""
    folder = tmp_path / "bin"
    folder.mkdir()
    state = tmp_path / "systemctl.json"
    script = folder / "systemctl"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(SYSTEMCTL).replace("STATE", repr(str(state))))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    def answer(units: dict | None = None, unreachable: dict | None = None) -> None:
        state.write_text(
            json.dumps(
                {
                    "units": units if units is not None else healthy_units(),
                    "unreachable": unreachable or {"system": "System has not been booted with systemd"},
                }
            )
        )

    answer()
    return answer


@pytest.fixture
def setup(home, tmp_path, honcho, brokerd, configure, systemctl):
    """A home that passes every check: auth on, three right keys, brokerd up, units enabled."""
    honcho.keys.update(KEYS)
    configure(honcho.url, extra=write_keys(tmp_path, KEYS))
    (home / "logs").mkdir()
    return honcho


def doctor() -> tuple[int, dict, str]:
    result = bxmem_inprocess("doctor", "--json")  # validated against doctor.schema.json (helpers)
    text = bxmem_inprocess("doctor")
    return result.returncode, json.loads(result.stdout), text.stdout


def by(report: dict, check: str, subject: str | None = None) -> dict:
    (found,) = [c for c in report["checks"] if c["check"] == check and c["subject"] == subject]
    return found


def failed(report: dict) -> list[tuple[str, str | None, str | None]]:
    return [(c["check"], c["subject"], c["runbook"]) for c in report["checks"] if c["status"] == "failed"]


def test_a_sound_setup_passes_every_check_and_says_when(setup):
    code, report, text = doctor()
    assert code == 0 and report["counts"]["failed"] == 0, failed(report)
    kinds = [c["check"] for c in report["checks"]]
    for kind in (
        "config",
        "home",
        "key-file",
        "honcho",
        "clock",
        "version",
        "chat",
        "auth",
        "key",
        "queue",
        "brokerd",
        "units",
        "outbox",
    ):
        assert kind in kinds, kind
    assert [c["subject"] for c in report["checks"] if c["check"] == "key"] == ["bm0-trusted", "bm0-untrusted", "fleet"]
    assert by(report, "auth")["status"] == "ok"
    assert by(report, "version")["data"] == {"version": "3.0.12"}
    assert by(report, "chat")["data"] == {"workspace_chat": False, "peer_chat": True}
    assert by(report, "clock")["status"] == "ok" and abs(by(report, "clock")["data"]["offset_s"]) < 5
    assert [c["status"] for c in report["checks"] if c["check"] == "units"] == ["ok"] * 4
    for line in text.splitlines()[:-1]:  # each line says what it checked, and when
        assert line.startswith(("ok: ", "warning: ", "failed: ", "not checked: ")), line
        assert "(checked 20" in line, line
    assert text.splitlines()[-1].startswith(f"doctor: {len(report['checks'])} checks in ")
    for key in KEYS.values():
        assert key not in text


def test_doctor_creates_nothing_in_honcho(setup):
    doctor()
    assert setup.workspaces == {} and setup.peers == {} and setup.sessions == {}
    assert {r.method for r in setup.requests} == {"GET"}
    assert not setup.violations


def test_a_wrong_key_is_caught(setup, tmp_path, configure):
    wrong = register_secret("doctor-wrong-key-0000")
    configure(setup.url, extra=write_keys(tmp_path, {**KEYS, "bm0-untrusted": wrong}))
    code, report, text = doctor()
    assert code == 4 and failed(report) == [("key", "bm0-untrusted", "honcho-key-refused")]
    line = by(report, "key", "bm0-untrusted")["line"]
    assert line == "key for bm0-untrusted on Honcho: refused (HTTP 401): the key is wrong or expired"
    assert f"failed: {line} (checked " in text and text.count(cites("honcho-key-refused")) == 1


def test_a_key_minted_for_another_workspace_is_caught_and_named(setup, tmp_path, configure):
    other = jwt_for("bm0-elsewhere")
    configure(setup.url, extra=write_keys(tmp_path, {**KEYS, "fleet": other}))
    code, report, text = doctor()
    assert code == 4 and failed(report) == [("key", "fleet", "honcho-key-refused")]
    assert by(report, "key", "fleet")["line"].endswith(
        "refused (HTTP 401): the key was minted for workspace bm0-elsewhere"
    )
    assert other not in text


def test_a_key_file_of_the_wrong_mode_is_caught_and_not_sent(setup, tmp_path, configure):
    configure(
        setup.url,
        extra=write_keys(tmp_path, {"bm0-trusted": TRUSTED_KEY})
        + write_keys(tmp_path, {"bm0-untrusted": UNTRUSTED_KEY, "fleet": FLEET_KEY}, mode=0o644),
    )
    code, report, _text = doctor()
    assert code == 4
    assert failed(report) == [
        ("key-file", "bm0-untrusted", "honcho-key-refused"),
        ("key-file", "fleet", "honcho-key-refused"),
    ]
    assert "mode 0644: group or others can read it" in by(report, "key-file", "fleet")["line"]
    assert by(report, "key", "fleet")["status"] == "not-checked"
    sent = {r.headers.get("authorization") for r in setup.requests}
    assert f"Bearer {FLEET_KEY}" not in sent and f"Bearer {UNTRUSTED_KEY}" not in sent


def test_brokerd_down_is_caught(setup, brokerd):
    brokerd.stop()
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("brokerd", None, "broker-state-unavailable")]
    assert by(report, "brokerd")["line"].startswith("brokerd: cannot answer: ")


def test_honcho_down_is_caught_and_exits_7(setup):
    setup.stop()
    code, report, text = doctor()
    assert code == 7
    assert failed(report) == [("honcho", None, "honcho-unreachable")]
    assert by(report, "honcho")["line"].startswith(
        f"Honcho at {setup.url}: not answering: health check: connection failed"
    )
    assert by(report, "clock")["status"] == "not-checked"
    assert "not checked: keys on Honcho, its queue: Honcho did not answer" in text


@pytest.mark.parametrize(
    "state, problem",
    [
        (
            {"UnitFileState": "disabled", "ActiveState": "inactive"},
            "bxmem-send.timer is not enabled (UnitFileState=disabled): systemctl --user enable --now bxmem-send.timer",
        ),
        (
            {"ActiveState": "inactive"},
            "bxmem-send.timer is enabled but inactive: systemctl --user start bxmem-send.timer",
        ),
    ],
)
def test_a_unit_not_enabled_or_not_running_is_caught(setup, systemctl, state, problem):
    units = healthy_units()
    units["user"]["bxmem-send.timer"].update(state)
    systemctl(units)
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("units", "send", "units-not-running")]
    assert by(report, "units", "send")["line"] == f"units of send (user manager): {problem}"


def test_a_failed_last_run_is_caught_with_its_status(setup, systemctl):
    units = healthy_units()
    units["user"]["bxmem-decide.service"].update(Result="exit-code", ExecMainStatus="78")
    systemctl(units)
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("units", "decide", "honcho-config-invalid")]
    assert (
        "(Result=exit-code, status 78): journalctl --user -u bxmem-decide.service"
        in by(report, "units", "decide")["line"]
    )


def test_a_run_that_failed_before_bxmem_started_is_caught(setup, systemctl):
    units = healthy_units()
    units["user"]["bxmem-send.service"].update(Result="exit-code", ExecMainStatus="218", ExecMainExitTimestamp="")
    systemctl(units)
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("units", "send", "units-not-running")]
    assert "bxmem-send.service's last run failed (Result=exit-code, status 218)" in by(report, "units", "send")["line"]


def test_a_run_in_progress_is_not_called_never_run(setup, systemctl):
    # systemd clears ExecMainExitTimestamp when a run starts: a oneshot caught mid-run has
    # none, which is not "not run yet" (seen under real systemd by the systemd-rig).
    units = healthy_units()
    units["user"]["bxmem-mirror.service"].update(ActiveState="activating", SubState="start", ExecMainExitTimestamp="")
    systemctl(units)
    code, report, _text = doctor()
    line = by(report, "units", "mirror")["line"]
    assert code == 0 and "not run yet" not in line
    assert line == (
        "units of mirror (user manager): bxmem-mirror.timer enabled, waiting; bxmem-mirror.service "
        "running now (activating); bxmem-mirror.path enabled"
    )


def test_a_timer_missing_from_both_managers_is_caught_but_metrics_is_optional(setup, systemctl):
    units = healthy_units()
    del units["user"]["bxmem-mirror.timer"]
    systemctl(units, unreachable={"none": ""})  # both managers answer
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("units", "mirror", "units-not-running")]
    assert by(report, "units", "metrics")["status"] == "ok"


def test_units_installed_for_both_managers_are_caught(setup, systemctl):
    systemctl({**healthy_units("user"), **healthy_units("system")}, unreachable={"none": ""})
    code, report, _text = doctor()
    assert code == 4 and [f[1] for f in failed(report)] == ["decide", "mirror", "send"]
    assert "installed for both the user and the system manager" in by(report, "units", "send")["line"]


def test_units_are_not_checked_without_systemctl_or_a_manager(setup, systemctl, monkeypatch, tmp_path):
    systemctl(unreachable={"user": "Failed to connect to bus: No medium found", "system": "System has not been booted"})
    code, report, _text = doctor()
    assert code == 0 and by(report, "units")["status"] == "not-checked"
    assert by(report, "units")["line"] == (
        "units: systemctl --user: Failed to connect to bus: No medium found; "
        "systemctl --system: System has not been booted"
    )
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, report, _text = doctor()
    assert code == 0 and by(report, "units")["line"] == "units: systemctl is not on PATH"


@pytest.mark.parametrize("offset", [600, -600, 61])
def test_a_clock_off_by_minutes_is_caught(setup, offset):
    setup.clock_offset = offset  # Honcho's clock; the same as this host's being off the other way
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("clock", None, "clock-off")]
    clock = by(report, "clock")
    assert abs(clock["data"]["offset_s"] + offset) < 3
    side = "behind" if offset > 0 else "ahead of"
    assert (
        clock["line"].startswith("clock against Honcho's: this host's is ") and f" s {side} Honcho's" in clock["line"]
    )


def test_a_clock_within_the_limit_passes(setup):
    setup.clock_offset = 30
    code, report, _text = doctor()
    assert code == 0 and by(report, "clock")["status"] == "ok"


def test_auth_off_is_a_warning_and_a_missing_key_with_auth_on_a_failure(setup, tmp_path, configure):
    setup.keys.clear()  # the server takes any key
    code, report, text = doctor()
    assert (
        code == 0 and by(report, "auth")["status"] == "warning" and by(report, "auth")["runbook"] == "honcho-auth-off"
    )
    assert "(auth is off: any key would be)" in by(report, "key", "fleet")["line"]
    assert cites("honcho-auth-off") in text
    setup.keys.update(KEYS)
    configure(setup.url, extra=write_keys(tmp_path, {"bm0-trusted": TRUSTED_KEY, "bm0-untrusted": UNTRUSTED_KEY}))
    code, report, _text = doctor()
    assert code == 4 and ("key", "fleet", "honcho-key-refused") in failed(report)
    assert by(report, "key", "fleet")["line"].startswith(
        "no key for fleet: Honcho refuses requests without one (HTTP 401)"
    )
    assert by(report, "keys")["status"] == "warning"  # the partial key set, as config check says it


def test_workspace_chat_and_the_queue_are_reported(setup):
    setup.workspace_chat = True
    setup.queue["bm0-trusted"] = {"pending": 4, "in_progress": 0, "completed": 2}
    code, report, _text = doctor()
    assert code == 0 and by(report, "chat")["data"] == {"workspace_chat": True, "peer_chat": True}
    queue = by(report, "queue", "bm0-trusted")
    assert queue["data"] == {"pending": 4, "in_progress": 0, "completed": 2, "total": 6}
    assert queue["line"].startswith("Honcho's queue for bm0-trusted: 4 pending, 0 in progress, 2 completed since")
    assert "none in progress" in queue["line"]


def test_a_server_without_its_api_document_still_passes(setup):
    setup.openapi_published = False
    code, report, _text = doctor()
    assert code == 0 and by(report, "version")["line"] == "Honcho's version: not published (no /openapi.json)"


def test_a_config_file_others_can_change_is_caught(setup, config_file):
    os.chmod(config_file, 0o666)
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("config", None, "file-permissions")]
    assert "mode 666: group or others can change it (chmod go-w)" in by(report, "config")["line"]


def test_a_state_folder_open_to_others_is_caught(setup, home):
    bxmem_inprocess("decide")  # a job makes memory/bxmem/ (sync, which only reads, makes nothing)
    os.chmod(home / "memory" / "bxmem", 0o755)
    code, report, text = doctor()
    assert code == 4 and failed(report) == [("home", None, "file-permissions")]
    assert "memory/bxmem has mode 755, not 700" in by(report, "home")["line"]
    assert "memory/bxmem has mode 755, not 700" in text  # doctor changed nothing: the second run sees it too
    assert os.stat(home / "memory" / "bxmem").st_mode & 0o777 == 0o755


def test_what_needs_attention_in_the_outbox_fails_the_outbox_check(setup, home):
    from helpers import write_log

    from bxmem.commands import decide
    from bxmem.commands.send import job as send
    from bxmem.config import loader
    from bxmem.demo.sample import turn_lines

    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(loader.load())
    setup.inject("status", match=r"/messages$", status=422)
    send.run(loader.load())
    code, report, _text = doctor()
    assert code == 4 and failed(report) == [("outbox", None, "honcho-send-refused")]
    assert by(report, "outbox")["data"]["failed"] == 1
    assert "bxmem sync: needs attention: 1 failed item(s)" in by(report, "outbox")["line"]


def test_local_only_checks_what_is_there(home, brokerd, systemctl):
    (home / "logs").mkdir()
    code, report, text = doctor()
    assert not (home / "memory").exists()  # doctor made nothing
    assert code == 0 and report["mode"] == "local-only"
    assert by(report, "honcho")["status"] == "not-checked"
    assert "not checked: Honcho: local-only (no [honcho] section), nothing is sent" in text


def test_a_hanging_honcho_is_waited_for_only_within_the_bound(setup):
    from bxmem.commands.doctor import BOUND_S

    setup.inject("hang", match=".", times=100, seconds=30)
    started = time.monotonic()
    code, report, _text = doctor()
    took = time.monotonic() - started
    assert code == 7 and by(report, "honcho")["line"].endswith("not answering: no answer within 5 s")
    assert report["took_s"] < BOUND_S + 2 and took < 2 * (BOUND_S + 2)  # two runs: --json and the text


def test_docs_monitoring_describes_every_kind_of_check():
    schema = json.loads((Path(__file__).resolve().parents[1] / "bxmem" / "schemas" / "doctor.schema.json").read_text())
    kinds = schema["$defs"]["check"]["properties"]["check"]["enum"]
    doc = (Path(__file__).resolve().parents[1] / "docs" / "monitoring.md").read_text()
    assert [k for k in kinds if f"| `{k}` |" not in doc] == []
