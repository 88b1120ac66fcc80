"""The bxmem units' state from `systemctl show`, for `bxmem doctor`. A manager that cannot be asked is "not
checked", with the reason: never a claim about units nobody looked at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

TIMEOUT_S = 5.0
MAX_OUTPUT = 64 << 10  # a few hundred bytes a unit; anything past this is not systemctl's answer
PROPERTIES = (
    "Id",
    "LoadState",
    "UnitFileState",
    "ActiveState",
    "SubState",
    "Result",
    "ExecMainStatus",
    "ExecMainExitTimestamp",
    "LastTriggerUSec",
)
MANAGERS = ("user", "system")


@dataclass
class Managers:
    """What each manager said: unit name -> its properties, for the managers reached;
    and, for each manager not reached, why (None when systemctl is not there at all)."""

    units: dict[str, dict[str, dict[str, str]]]  # manager -> unit -> property -> value
    unreached: dict[str, str]
    systemctl: str | None


def _parse(text: str) -> dict[str, dict[str, str]]:
    """`systemctl show`'s blocks (one a unit, a blank line between), by each block's Id."""
    units: dict[str, dict[str, str]] = {}
    for block in text.split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            units[props["Id"]] = props
    return units


def _show(systemctl: str, manager: str, names: list[str], timeout: float) -> dict[str, dict[str, str]]:
    """The units' properties in one manager; OSError (with the reason) when it cannot be asked."""
    try:
        done = subprocess.run(
            [systemctl, f"--{manager}", "--no-pager", "show", "--property", ",".join(PROPERTIES), *names],
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "SYSTEMD_PAGER": "", "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        raise OSError(f"systemctl --{manager} did not answer within {timeout:g} s") from None
    if done.returncode != 0:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise OSError(f"systemctl --{manager}: {first[:200]}")
    if len(done.stdout) > MAX_OUTPUT:
        raise OSError(f"systemctl --{manager} answered more than {MAX_OUTPUT:,} bytes")
    return _parse(done.stdout.decode("utf-8", "replace"))


def read(names: list[str], timeout: float = TIMEOUT_S) -> Managers:
    """Each manager's view of `names` (unit file names), both asked at once."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return Managers({}, {}, None)
    import threading  # deferred: command

    found: dict[str, dict] = {}
    unreached: dict[str, str] = {}

    def ask(manager: str) -> None:
        try:
            found[manager] = _show(systemctl, manager, names, timeout)
        except OSError as exc:
            unreached[manager] = str(exc)

    threads = [threading.Thread(target=ask, args=(manager,), daemon=True) for manager in MANAGERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 1.0)  # subprocess.run's own timeout ends each first
    late = f"did not answer within {timeout:g} s"
    return Managers(
        {m: found[m] for m in MANAGERS if m in found},
        {m: unreached.get(m, f"systemctl --{m} {late}") for m in MANAGERS if m not in found},
        systemctl,
    )
