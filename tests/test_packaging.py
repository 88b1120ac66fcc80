"""What `pipx install .` installs: a wheel built from the tracked files holds every
file of the package, its data files (the top-level runbook/ and systemd/ among
them) and its licence, and nothing the metadata promises is missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The --json output contract: data files that ship only through package-data.
SCHEMAS = {
    f"bxmem/schemas/{name}.schema.json"
    for name in (
        "recall",
        "ask",
        "decide",
        "mirror",
        "send",
        "doctor",
        "undo",
        "sync",
        "audit",
        "outbox",
        "config",
        "error",
    )
}
# The top-level folders the build step copies into the package (scripts/build_shipped.py).
SHIPPED = {"runbook": "*.md", "systemd": "bxmem-*"}


def shipped_files() -> dict[str, str]:
    """Each tracked file of a shipped folder, by the name it has in the wheel."""
    tracked = tracked_files()
    return {
        f"bxmem/{name}": name
        for name in tracked
        if "/" in name and name.split("/")[0] in SHIPPED and Path(name).match(SHIPPED[name.split("/")[0]])
    }


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode == 0:
        return [name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]
    skip = {".venv", ".git", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}
    return [
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*")
        if p.is_file() and not skip & set(p.relative_to(ROOT).parts) and not p.name.endswith(".egg-info")
    ]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Iterator[tuple[zipfile.ZipFile, list[str]]]:
    """A wheel built, as pip would, from a copy of the tracked files (plus the probe)."""
    source = tmp_path_factory.mktemp("source")
    files = tracked_files()
    for name in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (path,) = out.glob("bxmem-*.whl")
    with zipfile.ZipFile(path) as whl:
        yield whl, files


@pytest.mark.slow  # builds a wheel with pip
def test_every_package_data_glob_matches_a_real_file(wheel):
    _whl, files = wheel
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]
    assert globs, "pyproject lists no package-data"
    for package, patterns in globs.items():
        base = Path(package.replace(".", "/"))
        for pattern in patterns:
            # The old "sample/*" named a folder that never existed (the sample is demo/sample.py).
            assert any(
                Path(name).is_relative_to(base) and Path(name).relative_to(base).match(pattern) for name in files
            ), f"package-data {package}: {pattern!r} matches no file"


@pytest.mark.slow  # builds a wheel with pip
def test_the_wheel_holds_every_file_of_the_package(wheel):
    whl, files = wheel
    names = set(whl.namelist())
    package = [name for name in files if name.startswith("bxmem/")]
    missing = sorted(set(package) - names)
    assert not missing, f"tracked under bxmem/ but not in the wheel: {missing}"
    assert {"bxmem/demo/sample.py", "bxmem/demo/brokerd.py", *SCHEMAS} <= names
    # runbook/ and systemd/ are sourced at the top of the checkout and ship under bxmem/, byte for byte.
    shipped = shipped_files()
    assert {"bxmem/runbook/honcho-unreachable.md", "bxmem/systemd/bxmem-send.service"} <= set(shipped)
    assert sorted(set(shipped) - names) == [], "a runbook entry or unit template is missing from the wheel"
    for packaged, source in shipped.items():
        assert whl.read(packaged) == (ROOT / source).read_bytes(), packaged
    assert not [n for n in names if n.startswith(("bxmem/runbook/", "bxmem/systemd/")) and n not in shipped]
    # Nothing from the repository beyond the package: the tests (and the AGPL fixture) stay out.
    assert not [n for n in names if not n.startswith(("bxmem/", "bxmem-"))]


@pytest.mark.slow  # builds a wheel with pip
def test_an_installed_wheel_reads_its_own_runbook_and_units_with_no_checkout_beside_it(wheel, tmp_path):
    """Unpacked where no checkout is (as pipx puts it in a venv of its own): the runbook
    and the unit templates are the package's copies."""
    whl, _files = wheel
    site = tmp_path / "site"
    whl.extractall(site)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from bxmem.start.locations import shipped; "
        "from bxmem import runbooks; print(shipped('runbook')); print(shipped('systemd')); "
        "print(runbooks.text('honcho-unreachable').splitlines()[0])"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(site)], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [str(site / "bxmem" / "runbook"), str(site / "bxmem" / "systemd"), "# honcho-unreachable"]


@pytest.mark.slow  # builds a wheel with pip
def test_the_wheel_carries_the_licence_its_metadata_names(wheel):
    whl, _files = wheel
    (metadata,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
    text = whl.read(metadata).decode()
    assert "License-Expression: MIT" in text
    assert "Author: bxmem contributors" in text
    assert "Requires-Python: >=3.11" in text
    licence = [n for n in whl.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert licence, "the wheel has no LICENSE"
    body = whl.read(licence[0]).decode()
    assert body.startswith("MIT License") and "Copyright (c) 2026 bxmem contributors" in body
    assert body == (ROOT / "LICENSE").read_text()


def test_the_changelog_has_a_release_section_for_the_packaged_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    version = PYPROJECT["project"]["version"]
    release = re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, flags=re.MULTILINE)
    assert release, f"CHANGELOG.md has no '## [{version}] - YYYY-MM-DD' section"
    unreleased = text.find("\n## [Unreleased]\n")
    assert 0 <= unreleased < release.start(), "'## [Unreleased]' belongs above the latest release"
    # A first release is described as what it does, not against a version that never shipped.
    section = text[release.end() :].split("\n## ", 1)[0]
    assert not re.search(r"\(was |\bwas \d", section), "the release section compares against an unshipped version"


@pytest.mark.slow  # a venv and an editable install with pip
def test_the_editable_install_dev_makes_is_a_plain_path_entry_without_a_warning_box(tmp_path):
    """./dev's first run: setuptools used to pick its import-hook strategy for the flat
    layout and print an "Editable installation" box; with package-dir said outright it
    writes one .pth line naming the checkout."""
    source = tmp_path / "source"
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--disable-pip-version-check",
            "-e",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert "Editable installation" not in installed.stderr and "*****" not in installed.stderr, installed.stderr
    (site,) = venv.glob("lib/python3*/site-packages")
    assert not list(site.glob("__editable___bxmem*finder.py")), "an import hook, not a path entry"
    (pth,) = site.glob("__editable__.bxmem-*.pth")
    assert pth.read_text().split() == [str(source.resolve())]
    # The runbook and the unit templates are read from the checkout's top level, their source:
    # nothing is copied into the tree.
    probe = "from bxmem.start.locations import shipped; print(shipped('runbook')); print(shipped('systemd'))"
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [str(source.resolve() / "runbook"), str(source.resolve() / "systemd")]
    assert not (source / "bxmem" / "runbook").exists() and not (source / "bxmem" / "systemd").exists()


def test_dev_says_what_its_first_run_is_doing_and_later_runs_say_nothing(tmp_path):
    """./dev bootstraps .venv with a stand-in python that records what it is asked to do."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy2(ROOT / "dev", checkout / "dev")
    shutil.copy2(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    calls = tmp_path / "calls"
    stand_in = tmp_path / "python3"
    # `python3 -m venv DIR` makes DIR/bin/python (this script again) and DIR/bin/bxmem;
    # every other call (pip) is recorded and succeeds.
    stand_in.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
if [ "$1 $2" = "-m venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && printf '#!/bin/sh\\necho "bxmem $*"\\n' > "$3/bin/bxmem"
    chmod +x "$3/bin/bxmem"
fi
[ "$1" = --version ] && echo "Python 3.11.7"
exit 0
""")
    stand_in.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "PYTHON": str(stand_in)}
    first = subprocess.run(
        [str(checkout / "dev"), "bxmem", "--version"], capture_output=True, text=True, env=env, check=True
    )
    assert first.stderr.splitlines() == [
        "./dev: creating the virtual environment .venv (Python 3.11.7)",
        "./dev: installing bxmem (editable) with its test and lint tools into .venv: pip, 20-60 s",
        "./dev: .venv is ready",
    ]
    assert first.stdout == "bxmem --version\n"
    assert "-m pip install --quiet --disable-pip-version-check -e .[test,lint]" in calls.read_text()
    again = subprocess.run(
        [str(checkout / "dev"), "bxmem", "--version"], capture_output=True, text=True, env=env, check=True
    )
    assert again.stderr == "" and again.stdout == "bxmem --version\n"
