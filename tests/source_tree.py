"""bxmem's modules as the structure tests read them (tests/test_structure.py, tests/test_owners.py):
each file parsed once a process, and one verdict for a rule checked over every module.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bxmem"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@cache
def parse(path: Path) -> tuple[ast.Module, tuple[str, ...]]:
    """The file's tree and its lines."""
    source = path.read_text()
    return ast.parse(source, filename=str(path)), tuple(source.splitlines())


@cache
def parents(path: Path) -> dict[ast.AST, ast.AST]:
    """Each node of the file's tree -> the node holding it."""
    tree = parse(path)[0]
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def forget() -> None:
    """Drop every parse: a self-test rewrites its probe file at the same path."""
    parse.cache_clear()
    parents.cache_clear()


def shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def verdict(found: Mapping[str, list[str]], listed: Mapping[str, str], rule: str) -> list[str]:
    """A rule checked over every module, against the modules listed as breaking it today:
    `found` maps each module the rule holds to its breaches (one line each, naming file:line);
    `listed` maps a module to why it breaks the rule. What fails: every breach of a module not
    listed, and every listed module that breaks nothing now ("stale entry") or is not one
    the rule holds."""
    lines = [problem for name, problems in found.items() if name not in listed for problem in problems]
    lines += [
        f"{name}: stale entry for {rule} ({why}): it breaks nothing now, remove the entry"
        for name, why in listed.items()
        if name in found and not found[name]
    ]
    lines += [
        f"{name}: stale entry for {rule} ({why}): no module the rule holds"
        for name, why in listed.items()
        if name not in found
    ]
    return list(dict.fromkeys(lines))  # one line for `from m import a, b`
