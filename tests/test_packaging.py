"""What `pipx install .` installs: a wheel built from the tracked files holds every
file of the package, its data files and its licence, and nothing the metadata
promises is missing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The --json output contract: data files that ship only through package-data.
SCHEMAS = {"bxmem/schemas/recall.schema.json", "bxmem/schemas/ask.schema.json"}


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode == 0:
        return [name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]
    skip = {".venv", ".git", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(ROOT).parts) and not p.name.endswith(".egg-info")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[zipfile.ZipFile, list[str]]:
    """A wheel built, as pip would, from a copy of the tracked files (plus the probe)."""
    source = tmp_path_factory.mktemp("source")
    files = tracked_files()
    for name in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check", "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
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
            assert any(Path(name).is_relative_to(base) and Path(name).relative_to(base).match(pattern) for name in files), (
                f"package-data {package}: {pattern!r} matches no file"
            )


@pytest.mark.slow  # builds a wheel with pip
def test_the_wheel_holds_every_file_of_the_package(wheel):
    whl, files = wheel
    names = set(whl.namelist())
    package = [name for name in files if name.startswith("bxmem/")]
    missing = sorted(set(package) - names)
    assert not missing, f"tracked under bxmem/ but not in the wheel: {missing}"
    assert {"bxmem/demo/sample.py", "bxmem/demo/brokerd.py", *SCHEMAS} <= names
    # Nothing from the repository beyond the package: the tests (and the AGPL fixture) stay out.
    assert not [n for n in names if not n.startswith(("bxmem/", "bxmem-"))]


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
    unreleased = text.find("\n## Unreleased\n")
    assert 0 <= unreleased < release.start(), "'## Unreleased' belongs above the latest release"
    # A first release is described as what it does, not against a version that never shipped.
    section = text[release.end():].split("\n## ", 1)[0]
    assert not re.search(r"\(was |\bwas \d", section), "the release section compares against an unshipped version"
