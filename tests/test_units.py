"""The systemd units as shipped: what a real systemd 252 and 257 were found to need
(scripts/systemd-rig runs them; tests/test_real_systemd.py), held here without one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICES = sorted((ROOT / "systemd").glob("*.service"))


def directives(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if re.match(r"^[A-Za-z]+=", line):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def comments_before(path: Path, directive: str) -> str:
    """The comment block right above a directive (what a reader sees next to it)."""
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(directive + "="))
    block = []
    for line in reversed(lines[:at]):
        if line.startswith("#"):
            block.append(line)
        elif re.match(r"^[A-Za-z]+=", line) and block == []:
            continue  # a directive of the same group between the comment and this one
        else:
            break
    return " ".join(reversed(block))


def test_there_are_the_three_jobs_and_metrics():
    assert [p.name for p in SERVICES] == [
        "bxmem-decide.service",
        "bxmem-metrics.service",
        "bxmem-mirror.service",
        "bxmem-send.service",
    ]


@pytest.mark.parametrize("service", SERVICES, ids=lambda p: p.stem)
def test_the_sandbox_is_built_in_a_user_namespace_so_a_user_manager_can_start_it(service):
    """systemd 252's user manager fails CapabilityBoundingSet= and PrivateDevices= with
    218/CAPABILITIES unless PrivateUsers=yes asks for the user namespace first."""
    d = directives(service)
    assert d.get("PrivateUsers") == ["yes"]
    assert d.get("CapabilityBoundingSet") == [""] and d.get("PrivateDevices") == ["yes"]


@pytest.mark.parametrize("service", SERVICES, ids=lambda p: p.stem)
def test_a_filtered_system_call_fails_with_eperm_instead_of_killing_the_run(service):
    d = directives(service)
    assert "~@privileged @resources" in d["SystemCallFilter"]
    assert d.get("SystemCallErrorNumber") == ["EPERM"]


@pytest.mark.parametrize("service", SERVICES, ids=lambda p: p.stem)
def test_no_core_dump_of_a_run(service):
    assert directives(service).get("LimitCORE") == ["0"]


@pytest.mark.parametrize("service", SERVICES, ids=lambda p: p.stem)
def test_the_journal_keeps_notices_and_above_and_counts_unprefixed_lines_as_errors(service):
    """The manager's per-run info lines are dropped; bxmem runs --quiet, so its own
    lines are notices and above with their priority; a line without one is an error."""
    d = directives(service)
    assert d.get("LogLevelMax") == ["notice"] and d.get("SyslogLevel") == ["err"]
    assert d["ExecStart"][0].split()[1:3] == ["--quiet", service.stem.removeprefix("bxmem-")]


@pytest.mark.parametrize("service", SERVICES, ids=lambda p: p.stem)
def test_directives_a_user_manager_ignores_say_so_beside_them(service):
    d = directives(service)
    for directive in ("ProtectProc", "ProcSubset", "IPAddressDeny"):
        if directive in d:
            assert "system manager" in comments_before(service, directive), directive


def readme_host_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Running it on a host") : text.index("## Development")]


def rig_blocks() -> list[str]:
    script = (ROOT / "scripts" / "systemd-rig" / "run.sh").read_text()
    blocks = re.search(r'^BLOCKS="([^"]+)"$', script, flags=re.M)
    assert blocks, "scripts/systemd-rig/run.sh sets no BLOCKS"
    return blocks.group(1).split()


def test_every_command_of_the_readme_host_section_is_one_the_rig_runs():
    """scripts/systemd-rig runs the README's blocks by their markers: none of the
    section's shell blocks goes unmarked, and the rig runs every marked one."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "readme_blocks", ROOT / "scripts" / "systemd-rig" / "readme_blocks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    section = readme_host_section()
    marked = module.blocks(section)
    assert section.count("```sh") == len(marked), "a shell block in 'Running it on a host' has no systemd-rig marker"
    assert sorted(marked) == sorted(rig_blocks())
    assert module.blocks((ROOT / "README.md").read_text()) == marked  # no marked block outside the section


def test_the_readme_sets_a_host_up_with_init_doctor_and_units_install():
    """The owner's way from a fresh install to running units, as the rig runs it: no
    unit copied or edited by hand (bxmem units generates them: tests/test_units_install.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "readme_blocks", ROOT / "scripts" / "systemd-rig" / "readme_blocks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    blocks = module.blocks(readme_host_section())
    assert [blocks[name].split()[:2] for name in ("init", "doctor", "units")] == [
        ["bxmem", "init"],
        ["bxmem", "doctor"],
        ["bxmem", "units"],
    ]
    names = list(blocks)
    assert names.index("init") < names.index("doctor") < names.index("units")
    assert blocks["upgrade"].splitlines() == [
        "systemctl --user stop 'bxmem-*.timer' 'bxmem-*.path'",
        "pipx install --force .",
        "bxmem units install",
    ]
    assert "systemd/" not in "".join(blocks.values())  # nothing read from the checkout's unit templates
