"""The suite's test data is in the repository and is what its provenance says."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import fake_honcho

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
OPENAPI_FIXTURE = FIXTURES / "honcho-3.0.12-openapi.json"


def test_the_default_openapi_document_is_the_one_in_the_repository():
    # Read in a fresh interpreter without BXMEM_OPENAPI: the default, not whatever this run was given.
    env = {k: v for k, v in os.environ.items() if k != "BXMEM_OPENAPI"}
    out = subprocess.run(
        [sys.executable, "-c", "import fake_honcho; print(fake_honcho.OPENAPI)"],
        cwd=ROOT / "tests",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out) == OPENAPI_FIXTURE
    assert Path(out).is_relative_to(ROOT)


def test_the_openapi_fixture_matches_its_provenance():
    provenance = (FIXTURES / "README.md").read_text()
    stated = re.search(r"sha256 \| `([0-9a-f]{64})`", provenance)
    assert stated, "tests/fixtures/README.md gives no sha256 for the OpenAPI document"
    assert hashlib.sha256(OPENAPI_FIXTURE.read_bytes()).hexdigest() == stated.group(1)
    doc = json.loads(OPENAPI_FIXTURE.read_text())
    assert doc["info"]["version"] == "3.0.12" and "3.0.12" in provenance
    assert doc["info"]["license"]["identifier"] == "AGPL-3.0-only"
    assert "GNU AFFERO GENERAL PUBLIC LICENSE" in (FIXTURES / "honcho-3.0.12-LICENSE").read_text()
    assert "ddbb90e36f2d148c7982f6ed85b09d31cabf5944" in provenance


def test_the_workspace_chat_excerpt_matches_its_provenance():
    provenance = (FIXTURES / "README.md").read_text()
    stated = re.search(r"sha256 of the excerpt \| `([0-9a-f]{64})`", provenance)
    assert stated and hashlib.sha256(fake_honcho.LATER_OPENAPI.read_bytes()).hexdigest() == stated.group(1)
    doc = json.loads(fake_honcho.LATER_OPENAPI.read_text())
    assert list(doc["paths"]) == ["/v3/workspaces/{workspace_id}/chat"]
    assert "261d885c5cd9c415441a16c2b3504c4f359a7ee1" in provenance
    checker = fake_honcho.OpenAPIChecker(fake_honcho.LATER_OPENAPI)
    assert (
        checker.check(
            "POST", "/v3/workspaces/w/chat", {}, {"query": "hi", "reasoning_level": "minimal", "stream": False}
        )
        == []
    )
    assert checker.check("POST", "/v3/workspaces/w/chat", {}, {"query": "hi", "reasoning_level": "none"})
    assert checker.check("POST", "/v3/workspaces/w/chat", {}, {"query": ""})


def test_nothing_in_the_repository_reads_outside_it():
    # The suite once read ../shared/honcho/openapi.json, so a bare clone failed 114 tests.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if tracked.returncode != 0:  # not a git checkout (an unpacked sdist): look at the usual places
        files = [p for d in ("tests", "bench", "scripts", ".ci") for p in (ROOT / d).rglob("*") if p.is_file()]
        files += [ROOT / "dev"]
    else:
        files = [ROOT / line for line in tracked.stdout.splitlines()]
    code = [
        p
        for p in files
        if p.suffix in ("", ".py", ".sh")
        and p.is_file()
        and "fixtures" not in p.parts
        and p.name != Path(__file__).name
    ]
    reads = []
    for path in code:
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"""parents\[2\]|\.\./shared|["']shared["']|/work/""", line):
                reads.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not reads, reads
    assert fake_honcho.OPENAPI.exists()
