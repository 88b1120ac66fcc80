"""Docs kept honest: generated CLI reference, runbook entries, README, systemd units."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bxmem.log import RUNBOOK_ENTRIES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def test_cli_reference_is_generated_from_the_current_help():
    import importlib.util
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("gen_cli_docs", str(ROOT / "scripts" / "gen-cli-docs"))
    spec = importlib.util.spec_from_loader("gen_cli_docs", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert (ROOT / "docs" / "cli.md").read_text() == module.render(), "run scripts/gen-cli-docs"


def test_every_runbook_entry_exists_and_says_what_to_do():
    for entry in RUNBOOK_ENTRIES:
        text = (ROOT / "runbook" / f"{entry}.md").read_text()
        for heading in ("## What you see", "## What it means", "## What to do"):
            assert heading in text, (entry, heading)
    assert {p.stem for p in (ROOT / "runbook").glob("*.md")} == set(RUNBOOK_ENTRIES)
    # One source: the top-level runbook/ (a wheel's copy is made by the build, scripts/build_shipped.py).
    assert not (ROOT / "bxmem" / "runbook").exists(), "runbook entries belong in the top-level runbook/"


def test_every_runbook_reference_in_code_names_an_entry():
    named = set()
    for path in (ROOT / "bxmem").rglob("*.py"):
        text = path.read_text()
        named |= set(re.findall(r'runbook\("([a-z-]+)"\)', text))
        named |= set(re.findall(r'runbook = "([a-z-]+)"', text))
        named |= set(re.findall(r"\(runbook ([a-z-]+)\)", text))
        named |= set(re.findall(r"bxmem runbook ([a-z-]+)", text))
    assert named and named <= set(RUNBOOK_ENTRIES), named - set(RUNBOOK_ENTRIES)


def test_a_runbook_citation_is_a_command_that_prints_the_entry(capsys):
    """Log lines, errors and sync's attention lines end with one form, naming a
    command the owner can run wherever bxmem is installed (every install carries the entries)."""
    from bxmem.cli.app import run_cli
    from bxmem.errors import ConfigInvalid
    from bxmem.log import runbook

    assert runbook("honcho-unreachable") == " (see: bxmem runbook honcho-unreachable)"
    assert ConfigInvalid("bxmem.toml: x").one_line() == "bxmem.toml: x (see: bxmem runbook honcho-config-invalid)"
    for entry in RUNBOOK_ENTRIES:
        assert run_cli(["runbook", entry]) == 0
        assert capsys.readouterr().out == (ROOT / "runbook" / f"{entry}.md").read_text()
    assert run_cli(["runbook"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"The runbook: `bxmem runbook NAME` prints an entry (the files: {ROOT / 'runbook'})."
    assert [line.split()[0] for line in lines[1:]] == list(RUNBOOK_ENTRIES)
    assert run_cli(["runbook", "honcho-down"]) == 5
    assert capsys.readouterr().err.startswith("bxmem: error: no runbook entry 'honcho-down'")


def test_readme_opens_with_the_two_commands_and_names_every_command():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```sh", 1)[1].split("```", 1)[0]
    assert "./dev demo" in first_block and "./dev test" in first_block
    import typer

    from bxmem.cli.app import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name in group.commands:
        assert f"`bxmem {name}" in readme, name
    ci = (ROOT / ".ci" / "run").read_text()
    # CI runs the checkers and every tier, not just the README's fast one.
    assert "./dev lint" in ci and "./dev test --all" in ci


def _units(tmp_path: Path) -> Path:
    tmp_path = tmp_path / "units"
    tmp_path.mkdir()
    for unit in (ROOT / "systemd").iterdir():
        text = unit.read_text().replace("%h/.local/bin/bxmem", "/usr/bin/true").replace("%h", "/home/owner")
        (tmp_path / unit.name).write_text(text)
    return tmp_path


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_units_verify_clean_and_are_hardened(tmp_path):
    units = _units(tmp_path)
    names = sorted(str(p) for p in units.iterdir())
    verify = subprocess.run(["systemd-analyze", "verify", *names], capture_output=True, text=True)
    assert verify.returncode == 0 and not verify.stderr.strip(), verify.stderr
    for service in units.glob("*.service"):
        out = subprocess.run(
            ["systemd-analyze", "security", "--offline=true", str(service)], capture_output=True, text=True
        ).stdout
        exposure = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
        assert exposure, out
        level = float(exposure.group(1))
        assert level <= 2.0, (service.name, level)


def test_send_unit_outlasts_a_send_run():
    """Every request of a run ends by RUN_DEADLINE_S (tests/test_honcho_bounds.py holds it, a
    trickling answer too); the unit leaves as much again for start-up, loading and saving."""
    from bxmem.commands.send import runner as send_runner
    from bxmem.honcho import api as honcho

    text = (ROOT / "systemd" / "bxmem-send.service").read_text()
    found = re.search(r"TimeoutStartSec=(\d+)", text)
    assert found, text
    timeout = int(found.group(1))
    assert (
        send_runner.RUN_BUDGET_S + honcho.request_deadline_s() > send_runner.RUN_DEADLINE_S > send_runner.RUN_BUDGET_S
    )
    assert timeout >= 2 * send_runner.RUN_DEADLINE_S


def test_units_accept_exactly_the_exits_that_lose_nothing():
    """3 (degraded: work waits) and 4 (attention: bxmem logged why, sync shows it) are not
    failures of a timer run; every other non-zero exit is, so systemd marks the unit failed."""
    from bxmem.errors import COMMAND_EXITS

    for job in ("decide", "mirror", "send"):
        text = (ROOT / "systemd" / f"bxmem-{job}.service").read_text()
        accepted = {
            int(code) for line in re.findall(r"^SuccessExitStatus=(.*)$", text, flags=re.M) for code in line.split()
        }
        assert {3, 4} & set(COMMAND_EXITS[job]) <= accepted <= {3, 4}, (job, accepted)


def test_agent_tools_lists_exactly_the_codes_recall_and_ask_can_return():
    """The host-facing table in docs/agent-tools.md is the exit-code table's rows for
    recall and ask together, no more and no less."""
    from bxmem.errors import COMMAND_EXITS

    text = (ROOT / "docs" / "agent-tools.md").read_text()
    start = text.index("### Exit codes")
    section = text[start : text.index("\n## ", start)]
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", section, flags=re.M)}
    assert documented == set(COMMAND_EXITS["recall"]) | set(COMMAND_EXITS["ask"])


def test_the_owner_reads_what_goes_nowhere_means_on_the_host():
    """The README says what "goes nowhere" means on the host: a secret session is sent to no
    Honcho workspace, while recall on the host returns its turns (a turn holding a key
    included), labelled secret."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "is sent to no Honcho workspace. It does not leave the host, but it stays on it" in readme
    assert "and a turn holding a key (the key included), back to the agent, labelled `secret`" in readme
    design = (ROOT / "docs" / "design.md").read_text()
    threats = " ".join(design[design.index("## Threat model") :].split())
    assert "on the host, nothing is withheld from this agent by class." in threats
    assert "the key's text included, labelled `secret`" in threats


def test_agent_tools_section_8_lists_every_code_the_artifact_tools_can_return():
    """The host reads each code the artifact tools may end with from section 8's table."""
    from bxmem.errors import COMMAND_EXITS

    text = (ROOT / "docs" / "agent-tools.md").read_text()
    section = text[text.index("## 8. The artifact tools") :]
    rows = re.findall(r"^\| ([0-9][0-9, ]*)[ ,|]", section, flags=re.M)
    documented = {int(code) for row in rows for code in re.findall(r"\d+", row)}
    assert set(COMMAND_EXITS["artifact record"]) | set(COMMAND_EXITS["artifact resolve"]) <= documented
