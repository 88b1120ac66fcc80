"""The shape of the code: no import cycle, no module over 400 lines, a module
table in docs/design.md that names every module.

Read from the source with `ast`, not by importing: an import inside a function
runs later, but it is as much a dependency as one at the top, and a ring held
together by them works only as long as nothing calls them in the wrong order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bxmem"
MAX_LINES = 400



def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """An import under `if TYPE_CHECKING:` never runs, so it is no dependency at run time."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and child in parent.body:
            test = parent.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                return True
        child, parent = parent, parents.get(parent)
    return False


def imports_of(name: str, path: Path) -> set[str]:
    """The bxmem modules `name` imports anywhere in its source (top level, function, class)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    # What a relative import is relative to: the package holding this module.
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        if _type_checking_only(node, parents):
            continue
        found.update(target for target in targets if target in MODULES and target != name)
    return found


def import_graph() -> dict[str, set[str]]:
    return {name: imports_of(name, path) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module
    (Tarjan's algorithm, then a shortest path back to the start inside the component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)

    found = []
    for component in components:
        if len(component) < 2:
            continue
        start = min(component)
        # Breadth-first from start's successors back to start, inside the component.
        paths = {target: [start, target] for target in sorted(graph[start] & component)}
        frontier = list(paths)
        while start not in paths:
            next_frontier = []
            for node in frontier:
                for target in sorted(graph[node] & component):
                    if target not in paths:
                        paths[target] = [*paths[node], target]
                        next_frontier.append(target)
            frontier = next_frontier
        found.append(paths[start])
    return found


def describe(cycle: list[str]) -> str:
    return " -> ".join(cycle)


def report(found: list[list[str]], graph: dict[str, set[str]]) -> str:
    """Each cycle, then every module of its ring with the imports that keep it there."""
    lines = []
    for cycle in found:
        ring = _ring(cycle[0], graph)
        lines.append(f"cycle: {describe(cycle)}")
        lines.append(f"  the ring it is part of ({len(ring)} modules):")
        lines += [f"    {module} -> {', '.join(sorted(graph[module] & ring))}" for module in sorted(ring)]
    return "\n".join(lines)


def _ring(start: str, graph: dict[str, set[str]]) -> set[str]:
    """The modules that both reach start and are reached from it."""

    def reach(edges: dict[str, set[str]]) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for target in edges[todo.pop()]:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    reverse: dict[str, set[str]] = {node: set() for node in graph}
    for node, targets in graph.items():
        for target in targets:
            reverse[target].add(node)
    return reach(graph) & reach(reverse)


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """The walker counts imports inside functions, relative ones, and `from pkg import mod`,
    and skips those under TYPE_CHECKING: checked on the real sources it reads."""
    graph = import_graph()
    # bxmem/demo/run.py: `from ..errors import UsageError` and `from . import sample`
    assert {"bxmem.errors", "bxmem.demo.sample", "bxmem.demo.brokerd"} <= graph["bxmem.demo.run"]
    # start/entry.py imports only inside main(): a function-level import must count
    assert "bxmem.start.idle" in graph["bxmem.start.entry"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    """No cycle among bxmem's modules, counting imports inside functions: a cycle
    works only as long as every import in it stays inside a function."""
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + report(found, graph)


@pytest.mark.parametrize("path", list(MODULES.values()), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_module_over_400_lines(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines (at most {MAX_LINES}): split it"


def test_design_md_names_every_module():
    """docs/design.md's module table must name every module in bxmem/ (it went stale before)."""
    text = (ROOT / "docs" / "design.md").read_text()
    table = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([\w/]+(?:\.py|/))`", table))
    missing = []
    for path in MODULES.values():
        relative = path.relative_to(PACKAGE).as_posix()
        if path.name == "__main__.py" or (path.name == "__init__.py" and _only_a_marker(path)):
            continue  # `python -m bxmem` and package markers: no job of their own
        package_dir = relative.split("/")[0] + "/" if "/" in relative else None
        if relative not in named and package_dir not in named:
            missing.append(relative)
    assert not missing, f"docs/design.md's module table does not name: {missing}"


def _only_a_marker(path: Path) -> bool:
    """A package's __init__.py with no function or class: it marks the package, nothing more."""
    tree = ast.parse(path.read_text())
    return not any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in ast.walk(tree))


# --- dead code: a module-level name nothing reads ---

# Listed one by one, each a strict xfail (issue 14 item 9): removing the name
# makes its entry XPASS, which forces the entry out.
READERS = [
    *sorted(PACKAGE.rglob("*.py")),
    *sorted((ROOT / "tests").glob("*.py")),
    *sorted((ROOT / "eval").glob("*.py")),
    ROOT / "bench" / "run",
    ROOT / "scripts" / "crash-suite",
    ROOT / "scripts" / "gen-cli-docs",
]


def _defined(tree: ast.Module) -> set[str]:
    """Module-level constants, classes and undecorated functions (a decorated one,
    such as a typer command, is read by its decorator)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.decorator_list:
            names.add(node.name)
    return {name for name in names if not (name.startswith("__") and name.endswith("__"))}


def _reads_by_module(parsed: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """For each bxmem module, the names of it that some file reads: by name inside the
    module itself; elsewhere imported from it, as an attribute of a name bound to it, or
    as a string in a file that binds it (monkeypatch.setattr(module, "NAME", ...))."""
    reads: dict[str, set[str]] = {name: set() for name in MODULES}
    own = {path: name for name, path in MODULES.items()}
    for reader, tree in parsed.items():
        nodes = list(ast.walk(tree))
        if reader in own:
            reads[own[reader]] |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            reads[own[reader]] |= {n.attr for n in nodes if isinstance(n, ast.Attribute)}
        package = ""
        if reader in own:
            package = own[reader] if reader.name == "__init__.py" else own[reader].rpartition(".")[0]
        aliases: dict[str, str] = {}  # a local name -> the bxmem module it is bound to
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
                for alias in node.names:
                    if f"{base}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif base in MODULES:
                        reads[base].add(alias.name)
            elif isinstance(node, ast.Import):
                aliases |= {alias.asname: alias.name for alias in node.names if alias.name in MODULES and alias.asname}
        if not aliases:
            continue
        strings = {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        for module in set(aliases.values()):
            reads[module] |= strings
        for node in nodes:
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                reads[aliases[node.value.id]].add(node.attr)
    return reads


def _dead_params():
    for name, path in MODULES.items():
        yield pytest.param(name, path, id=path.relative_to(ROOT).as_posix())


@pytest.fixture(scope="module")
def parsed() -> dict[Path, ast.Module]:
    return {reader: ast.parse(reader.read_text(), filename=str(reader)) for reader in READERS}


@pytest.fixture(scope="module")
def reads(parsed) -> dict[str, set[str]]:
    return _reads_by_module(parsed)


@pytest.mark.parametrize(("name", "path"), list(_dead_params()))
def test_every_module_level_name_is_read_somewhere(name: str, path: Path, parsed, reads):
    defined = _defined(parsed[path])
    assert defined <= reads[name], f"{path.relative_to(ROOT)} defines what nothing reads: {sorted(defined - reads[name])}"
