"""The short crash suite (the long one is `scripts/crash-suite --trials 1000`)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # SIGKILLs jobs over many trials: CI and ./dev test --all run it


def test_short_crash_suite_loses_doubles_and_misroutes_nothing():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "crash-suite"), "--trials", "8", "--seed", "7"],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lost 0  duplicated 0  misrouted 0  waiting 0" in result.stdout
