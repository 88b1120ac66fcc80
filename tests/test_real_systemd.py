"""The units under a real systemd, against a real Honcho (opt-in, root only, minutes per suite).

Skipped unless set:

    BXMEM_SYSTEMD_RIG="bookworm trixie"   # Debian suites to boot (systemd 252, 257)
    BXMEM_SYSTEMD_RIG_HONCHO=http://127.0.0.1:8000   # a real Honcho
    BXMEM_SYSTEMD_RIG_ADMIN_JWT=/tmp/honcho-rig/admin.jwt   # its admin JWT, when auth is on (the rig mints keys)

Runs scripts/systemd-rig/run.sh (this repository's own: it needs nothing beside the
checkout but root, debootstrap and systemd-container, which it installs, and Debian's
archive) for each suite: the README's own install, setup (bxmem init, doctor,
units install), upgrade, system-unit and uninstall blocks, the sandbox probed from inside each unit, what reaches Honcho, the
journal of an idle minute and of an outage, what bxmem doctor catches (one fault at a
time), bxmem metrics through promtool when the host has it. Every check is a PASS or FAIL line; this
test passes when the rig reports no FAIL.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = (os.environ.get("BXMEM_SYSTEMD_RIG") or "").split()
HONCHO = os.environ.get("BXMEM_SYSTEMD_RIG_HONCHO")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SUITES or not HONCHO, reason="no systemd rig asked for (BXMEM_SYSTEMD_RIG, _HONCHO)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the systemd rig boots a container: root only"),
]


@pytest.mark.parametrize("suite", SUITES)
def test_the_units_run_as_the_readme_says_under_a_real_systemd(suite):
    env = {
        **os.environ,
        "SDRIG_SUITE": suite,
        "HONCHO_URL": HONCHO or "",
        "SDRIG_ADMIN_JWT": os.environ.get("BXMEM_SYSTEMD_RIG_ADMIN_JWT", ""),
    }
    run = subprocess.run(
        [str(ROOT / "scripts" / "systemd-rig" / "run.sh"), str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    lines = run.stdout.splitlines()
    failed = [line for line in lines if line.startswith("FAIL")]
    summary = [line for line in lines if line.startswith("SUMMARY")]
    assert run.returncode == 0 and not failed and summary, "\n".join(failed or lines[-20:])
    assert sum(line.startswith("PASS") for line in lines) >= 60, summary
