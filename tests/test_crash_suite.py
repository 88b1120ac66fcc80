"""The short crash suite (the long one is `scripts/crash-suite --trials 1000`):
jobs SIGKILLed at random moments, and jobs meeting a full disk at random
points of their writes (injected, and on a real small tmpfs)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest
from helpers import ROOT

pytestmark = pytest.mark.slow  # many trials of real subprocesses: CI and ./dev test --all run it


def crash_suite(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "crash-suite"), *args], capture_output=True, text=True, timeout=1800
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_short_crash_suite_loses_doubles_and_misroutes_nothing():
    out = crash_suite("--trials", "8", "--seed", "7")
    assert "lost 0  duplicated 0  misrouted 0  waiting 0  bad exits 0" in out


def test_a_full_disk_at_any_point_of_any_job_s_writes_loses_doubles_and_misroutes_nothing():
    """Every job (decide, mirror, send, undo) with a random few KiB of disk left:
    each fails with one line and an exit code of its own, and once space is back
    nothing is lost, doubled or misrouted."""
    out = crash_suite("--fault", "enospc", "--trials", "12", "--seed", "3")
    assert "lost 0  duplicated 0  misrouted 0  waiting 0  bad exits 0" in out
    faults = int(out.split("faults ")[1].split()[0])
    assert faults >= 12, out  # the disk did fill, often


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", tmp], capture_output=True)
        if mounted.returncode == 0:
            subprocess.run(["umount", tmp], check=False)
        return mounted.returncode == 0


def test_a_real_full_tmpfs_the_index_included_loses_doubles_and_misroutes_nothing():
    if not _can_mount_tmpfs():
        pytest.skip("mounting a tmpfs needs root (CI and this machine run as root)")
    out = crash_suite("--fault", "tmpfs", "--trials", "8", "--seed", "5")
    assert "lost 0  duplicated 0  misrouted 0  waiting 0  bad exits 0" in out


def test_the_owner_s_hands_on_the_ledger_and_state_files_lose_double_and_misroute_nothing():
    """Between the jobs (some killed), the ledger rewritten in place (an older copy copied
    back over it, sorted, reversed, two lines swapped), an older copy of a state file put
    back, or a state file changed in place at any byte (tests/inplace.py): every reader
    notices, folds again or rebuilds, and nothing is lost, doubled or misrouted."""
    out = crash_suite("--fault", "rewrite", "--trials", "12", "--seed", "11")
    assert "lost 0  duplicated 0  misrouted 0  waiting 0  bad exits 0" in out
    assert int(out.split("faults ")[1].split()[0]) >= 12, out  # the hands did rewrite, often
    assert int(out.split("changed in place ")[1].split(")")[0]) >= 6, out  # state files among them


def test_any_clock_step_at_any_point_of_any_job_keeps_nothing_waiting_past_its_bound():
    """Each job on a wall clock stepped by up to two days, forward or back, Honcho down for
    part of it; the finish on the right clock never moves its clock on, so a backoff or an
    in-doubt time stored under the wrong one must not hold anything back."""
    out = crash_suite("--fault", "clock", "--trials", "8", "--seed", "5")
    assert "lost 0  duplicated 0  misrouted 0  waiting 0  bad exits 0" in out
