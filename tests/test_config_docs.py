"""The configuration the README and docs/config.md show is the configuration the code reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from bxmem.config.schema import ArtifactsSection, HonchoSection, RawConfig, ReadSection, SendSection, validate
from bxmem.errors import ConfigInvalid
from bxmem.store.paths import resolve_paths

ROOT = Path(__file__).resolve().parents[1]
DOCS = {"README.md": ROOT / "README.md", "docs/config.md": ROOT / "docs" / "config.md"}


def toml_blocks(path: Path) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", path.read_text(), flags=re.DOTALL)


@pytest.mark.parametrize("name", DOCS)
def test_every_documented_example_is_a_valid_config(name, tmp_path):
    blocks = toml_blocks(DOCS[name])
    assert blocks, f"{name} shows no bxmem.toml"
    for block in blocks:
        raw = tomllib.loads(block)
        validate(raw, tmp_path / "bxmem.toml")  # extra="forbid": a key the code does not know raises
        assert set(raw) >= {"paths", "honcho"}, f"{name}: the example leaves out a section"
        assert set(raw["paths"]) == {"home", "run"}, f"{name}: [paths] home and run are both shown"
        assert raw["honcho"].get("read"), f"{name}: [[honcho.read]] is not shown"
        assert {"agent", "workspace", "trust", "class"} <= set(raw["honcho"]["read"][0])


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## `{re.escape(heading)}`\n(.*?)(?=^## |\Z)", text, flags=re.DOTALL | re.MULTILINE)
    assert match, f"docs/config.md has no section {heading}"
    return match.group(1)


def test_docs_config_describes_every_key_the_schema_accepts():
    text = DOCS["docs/config.md"].read_text()
    tables: dict[str, type[BaseModel]] = {
        "[honcho]": HonchoSection,
        "[[honcho.read]]": ReadSection,
        "[send]": SendSection,
        "[artifacts]": ArtifactsSection,
    }
    for heading, model in tables.items():
        section = _section(text, heading)
        for name, field in model.model_fields.items():
            key = field.alias or name
            assert f"| `{key}` |" in section, f"docs/config.md {heading} does not describe `{key}`"
    paths = _section(text, "[paths]")
    for key in ("home", "run"):
        assert f"| `{key}` |" in paths
    assert set(RawConfig.model_fields) == {"paths", "honcho", "secrets", "send", "artifacts"}, (
        "a new section: document it"
    )
    # [paths] accepts exactly what docs/config.md lists (the schema's check names the rest unknown).
    with pytest.raises(ConfigInvalid, match="unknown key 'state'"):
        validate({"paths": {"state": "/x"}}, Path("bxmem.toml"))


def test_the_documented_home_precedence_is_the_code_s(monkeypatch, tmp_path):
    monkeypatch.setenv("BOXMAKER_HOME", str(tmp_path / "from-env"))
    raw = {"paths": {"home": str(tmp_path / "from-file")}}
    assert resolve_paths(raw).home == tmp_path / "from-env"  # the environment wins
    monkeypatch.delenv("BOXMAKER_HOME")
    assert resolve_paths(raw).home == tmp_path / "from-file"
    # ...and both documents say so (the README once said the file came first).
    for name, path in DOCS.items():
        assert re.search(
            r"\$BOXMAKER_HOME[^\n]*\(the environment wins\)|`\$BOXMAKER_HOME`, when set, wins", path.read_text()
        ), f"{name} does not say that $BOXMAKER_HOME wins over [paths] home"
        assert "else $BOXMAKER_HOME" not in path.read_text()


def test_the_plain_config_classes_take_exactly_the_schemas_fields():
    """One list of Honcho fields per layer: config/loader.py's plain classes are built
    from the schema's model_dump, so a field added to one and not the other fails here."""
    from bxmem.config import loader as config

    assert set(config.HonchoSettings.__slots__) == set(HonchoSection.model_fields)
    assert set(config.ReadSource.__slots__) == set(ReadSection.model_fields)


@pytest.mark.parametrize("name", DOCS)
def test_every_documented_example_has_a_key_for_every_workspace_or_none(name, tmp_path):
    """A partial key set is what config check and sync warn about: every example config in
    the docs has a key for every workspace, or none."""
    for block in toml_blocks(DOCS[name]):
        data = validate(tomllib.loads(block), tmp_path / "bxmem.toml")
        every = {"honcho_trusted", "honcho_untrusted", "honcho_fleet"}
        every |= {f"honcho_read_{source['agent']}" for source in data["honcho"]["read"]}
        assert set(data["secrets"]) in (set(), every), f"{name}: keys for {sorted(data['secrets'])} only"
