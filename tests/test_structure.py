"""The shape of the code: the layers' import contracts, no import cycle, no module
over its size (330 logical lines), every deferred import saying which budget needs it, and a module
table in docs/design.md that names every module.

Read from the source with `ast`, not by importing: an import inside a function
runs later, but it is as much a dependency as one at the top, and a ring held
together by them works only as long as nothing calls them in the wrong order.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from source_tree import MODULES, PACKAGE, ROOT, forget, parents, parse, shown, verdict

# One worker parses the tree for all of them (under `--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("structure")

# A module's size in logical lines (statements and comment lines), which `ruff format`'s
# wrapping cannot change: 330 is the cap of 400 hand-wrapped lines it replaced (the
# longest module then, at 400 lines, held 324).
MAX_LOGICAL_LINES = 330


# --- the import graph: every import of every module, bxmem's and the rest ---


@dataclass(frozen=True)
class Import:
    """One module an import statement loads, where it stands and what it binds."""

    target: str  # absolute: "bxmem.store.ledger", "httpx", "os.path"
    bound: str  # the local name it binds ("" for a star import)
    line: int
    in_function: bool  # runs when the function is called, not when the module loads
    type_checking: bool  # under `if TYPE_CHECKING:`: never runs at all
    text: str  # the statement's first source line

    @property
    def top(self) -> str:
        return self.target.partition(".")[0]

    @property
    def at_load(self) -> bool:
        """Run when the module is imported."""
        return not self.in_function and not self.type_checking


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


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    while parent is not None:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
        parent = parents.get(parent)
    return False


def import_records(name: str, path: Path) -> list[Import]:
    """Every import in `name`'s source (top level, class, function, under TYPE_CHECKING),
    one record per module loaded; relative imports resolved against the package."""
    tree, lines = parse(path)
    held_by = parents(path)
    # What a relative import is relative to: the package holding this module.
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            # `import a.b` loads a.b and binds a; `import a.b as c` binds c.
            targets = [(alias.name, alias.asname or alias.name.partition(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
            targets = [
                (
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base,
                    "" if alias.name == "*" else alias.asname or alias.name,
                )
                for alias in node.names
            ]
        else:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        in_function, type_checking = _in_function(node, held_by), _type_checking_only(node, held_by)
        found += [
            Import(target, bound, node.lineno, in_function, type_checking, lines[node.lineno - 1])
            for target, bound in targets
        ]
    return sorted(found, key=lambda record: (record.line, record.target))


def imports_of(name: str, path: Path) -> set[str]:
    """The bxmem modules `name` imports anywhere in its source, type-only imports included."""
    return {
        record.target for record in import_records(name, path) if record.target in MODULES and record.target != name
    }


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


# --- the layers' import contracts ---

STDLIB = frozenset(sys.stdlib_module_names)


def _says(path: Path, record: Import, why: str) -> str:
    return f"{shown(path)}:{record.line}: {record.text.strip()}: {why}"


def in_layer(*packages: str) -> Callable[[str], bool]:
    return lambda module: any(module == package or module.startswith(package + ".") for package in packages)


def outside(*packages: str) -> Callable[[str], bool]:
    inside = in_layer(*packages)
    return lambda module: not inside(module)


def start_loads_stdlib_and_start(name: str, path: Path) -> list[str]:
    """What the idle check and the lean path load before they know what to do: the
    standard library, bxmem itself and start/; anything else is a deferred import."""
    return [
        _says(
            path,
            record,
            f"{record.target} is loaded with the module (only the standard library and "
            "bxmem.start at load time; defer it, with its budget)",
        )
        for record in import_records(name, path)
        if record.at_load
        and record.top not in STDLIB
        and record.target != "bxmem"
        and not in_layer("bxmem.start")(record.target)
    ]


# Modules whose only use is I/O, the clock, randomness from the system or other
# processes: the pure layers decide from what they are given, so none of them belongs there.
IO_MODULES = frozenset(
    {
        "os",
        "io",
        "time",
        "socket",
        "sqlite3",
        "subprocess",
        "shutil",
        "tempfile",
        "glob",
        "fcntl",
        "select",
        "selectors",
        "signal",
        "mmap",
        "threading",
        "multiprocessing",
        "asyncio",
        "concurrent",
        "logging",
        "secrets",
        "uuid",
        "ssl",
        "http",
        "urllib",
        "zoneinfo",
        "platform",
        "getpass",
        "pwd",
        "grp",
        "resource",
    }
)
# Modules whose types the pure layers may name, as long as nothing of them runs there: a
# Path is a fine parameter type, Path.read_text() is I/O; a random.Random the caller
# seeded is how jitter stays testable, random.random() is not.
TYPES_ONLY = frozenset({"pathlib", "random"})
CLOCK_ATTRIBUTES = frozenset({"now", "utcnow", "today"})
IO_BUILTINS = frozenset({"open", "print", "input"})


PURE = ("bxmem.formats", "bxmem.trust", "bxmem.retrieval")  # the pure layers, lowest first


def imports_only_stdlib_and(*below: str) -> Callable[[str, Path], list[str]]:
    """The pure layers are the bottom: a rule that needs a store's or a command's type (even
    only for type checking) has the layers upside down; formats know nothing of trust, and
    the trust rules nothing of recall's text."""
    allowed = in_layer(*below)

    def check(name: str, path: Path) -> list[str]:
        return [
            _says(path, record, f"{record.target} is neither the standard library nor {' or '.join(below)}")
            for record in import_records(name, path)
            if record.top not in STDLIB and not allowed(record.target)
        ]

    return check


def _annotation_nodes(tree: ast.AST) -> set[ast.AST]:
    """Every node inside an annotation: with `from __future__ import annotations` none runs."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {inner for root in roots for inner in ast.walk(root)}


def pure_does_no_io_and_reads_no_clock(name: str, path: Path) -> list[str]:
    """No I/O, no clock, no randomness of its own: importing a module of IO_MODULES at run
    time (a type under TYPE_CHECKING is fine); pathlib or random used for anything but an
    annotation (so an rng comes seeded from the caller, a path is only passed through);
    `datetime.now()`, `utcnow()`, `date.today()`; a call of `open`, `print` or `input`.
    `datetime` itself stays: converting a timestamp the caller read is arithmetic."""
    tree, lines = parse(path)
    records = import_records(name, path)
    problems = [
        _says(path, record, f"{record.top} is I/O or the clock")
        for record in records
        if not record.type_checking and record.top in IO_MODULES
    ]
    annotations = _annotation_nodes(tree)
    types_only = {
        record.bound: record
        for record in records
        if not record.type_checking and record.top in TYPES_ONLY and record.bound
    }
    clocks = {record.bound for record in records if record.top == "datetime" and record.bound}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id in types_only
            and node not in annotations
        ):
            record = types_only[node.id]
            problems.append(
                f"{shown(path)}:{node.lineno}: {lines[node.lineno - 1].strip()}: {node.id} "
                f"(from {record.target}, line {record.line}) used at run time, not only as a type"
            )
        if isinstance(node, ast.Attribute) and node.attr in CLOCK_ATTRIBUTES and node not in annotations:
            value = node.value
            while isinstance(value, ast.Attribute):
                value = value.value
            if isinstance(value, ast.Name) and value.id in clocks:
                problems.append(f"{shown(path)}:{node.lineno}: {lines[node.lineno - 1].strip()}: reads the clock")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_BUILTINS:
            problems.append(f"{shown(path)}:{node.lineno}: {lines[node.lineno - 1].strip()}: {node.func.id}() is I/O")
    return problems


def never_imports(*tops: str, what: str) -> Callable[[str, Path], list[str]]:
    """Anywhere in the module, deferred and type-only imports included: a type of the
    library in another layer ties that layer to it as much as a call does."""

    def check(name: str, path: Path) -> list[str]:
        return [
            _says(path, record, f"{record.top} belongs to {what} alone")
            for record in import_records(name, path)
            if record.top in tops
        ]

    return check


def never_imports_the_cli(name: str, path: Path) -> list[str]:
    """A command is a function the CLI and the lean path call (and the tests, directly):
    one that reaches back into the CLI cannot be run without it."""
    return [
        _says(path, record, "a command imports nothing of the CLI (bxmem.cli)")
        for record in import_records(name, path)
        if in_layer("bxmem.cli")(record.target)
    ]


def is_empty(name: str, path: Path) -> list[str]:
    """An `__init__.py` with code in it runs on every import of anything in its package
    (the idle path's included), and hides which module a name lives in."""
    size = path.stat().st_size
    return [f"{shown(path)}: {size} bytes (a package's __init__.py is empty)"] if size else []


@cache
def _cycles_of_the_tree() -> tuple[dict[str, set[str]], list[list[str]]]:
    graph = import_graph()
    return graph, cycles(graph)


def on_no_cycle(name: str, path: Path) -> list[str]:
    """Counting imports inside functions, which hold a cycle together only as long as each
    stays inside its function, and type-only ones: two modules that need each other's
    types cannot be read, tested or moved apart, though that cycle never runs."""
    graph, found = _cycles_of_the_tree()
    problems = []
    for cycle in found:
        ring = _ring(cycle[0], graph)
        if name in ring:
            problems += [
                _says(path, record, f"on the cycle {describe(cycle)}")
                for record in import_records(name, path)
                if record.target in ring and record.target != name
            ]
    return problems


@dataclass(frozen=True)
class Contract:
    name: str
    modules: str  # which modules it holds, said for a reader
    rule: str  # what they may or may not import
    applies: Callable[[str], bool]
    check: Callable[[str, Path], list[str]]  # the module's breaches, each naming its line and import


CONTRACTS = [
    Contract(
        "start-loads-only-stdlib",
        "bxmem.start.*",
        "at load time: the standard library, bxmem and bxmem.start only",
        in_layer("bxmem.start"),
        start_loads_stdlib_and_start,
    ),
    Contract(
        "formats-import-only-formats",
        "bxmem.formats.*",
        "the standard library and bxmem.formats only, type-only imports included",
        in_layer("bxmem.formats"),
        imports_only_stdlib_and("bxmem.formats"),
    ),
    Contract(
        "trust-imports-only-trust-and-formats",
        "bxmem.trust.*",
        "the standard library, bxmem.trust and bxmem.formats only, type-only imports included",
        in_layer("bxmem.trust"),
        imports_only_stdlib_and("bxmem.trust", "bxmem.formats"),
    ),
    Contract(
        "retrieval-imports-only-pure-layers",
        "bxmem.retrieval.*",
        "the standard library, bxmem.retrieval, bxmem.trust and bxmem.formats only, type-only imports included",
        in_layer("bxmem.retrieval"),
        imports_only_stdlib_and(*PURE),
    ),
    Contract(
        "pure-layers-do-no-io",
        "bxmem.formats.*, bxmem.trust.*, bxmem.retrieval.*",
        "no I/O, no clock, no randomness of their own (pure_does_no_io_and_reads_no_clock)",
        in_layer(*PURE),
        pure_does_no_io_and_reads_no_clock,
    ),
    Contract(
        "only-cli-imports-typer-rich",
        "every module outside bxmem.cli",
        "never typer, rich or click, not even deferred",
        outside("bxmem.cli"),
        never_imports("typer", "rich", "click", what="the CLI (bxmem.cli)"),
    ),
    Contract(
        "only-honcho-imports-httpx",
        "every module outside bxmem.honcho",
        "never httpx or httpcore, not even deferred",
        outside("bxmem.honcho"),
        never_imports("httpx", "httpcore", what="the Honcho client (bxmem.honcho)"),
    ),
    Contract(
        "only-config-schema-imports-pydantic",
        "every module but bxmem.config.schema",
        "never pydantic, not even deferred",
        outside("bxmem.config.schema"),
        never_imports("pydantic", "pydantic_core", what="the config schema (bxmem.config.schema)"),
    ),
    Contract(
        "commands-never-import-cli",
        "bxmem.commands.*",
        "nothing of bxmem.cli, not even deferred or for types",
        in_layer("bxmem.commands"),
        never_imports_the_cli,
    ),
    Contract(
        "init-is-empty", "every __init__.py", "0 bytes", lambda module: MODULES[module].name == "__init__.py", is_empty
    ),
    Contract(
        "no-import-cycle",
        "every module",
        "on no import cycle, type-only imports included",
        lambda module: True,
        on_no_cycle,
    ),
]

# What today's tree breaks, one (contract, module) at a time: each entry lets that module
# break that contract, and fails its test once the module keeps it ("stale entry").
BROKEN: dict[tuple[str, str], str] = {}


def contract_breaches(contract: Contract, modules: dict[str, Path]) -> list[str]:
    """Every breach of the contract by a module it holds and BROKEN does not list, and every stale entry."""
    found = {name: contract.check(name, path) for name, path in modules.items() if contract.applies(name)}
    listed = {name: why for (held, name), why in BROKEN.items() if held == contract.name}
    return verdict(found, listed, contract.name)


@pytest.mark.parametrize("contract", CONTRACTS, ids=[contract.name for contract in CONTRACTS])
def test_import_contract(contract: Contract):
    """Each contract, over every module it holds: the message names every breach, file:line and import."""
    problems = contract_breaches(contract, MODULES)
    assert not problems, f"{contract.name} ({contract.modules}: {contract.rule}):\n" + "\n".join(problems)


def test_a_rule_fails_on_an_unlisted_breach_and_on_a_stale_entry():
    """A breach the list does not name is reported, one line each; a listed breach is
    let through; a listed module that keeps the rule, or that the rule does not hold, fails."""
    found = {"bxmem.a": ["bxmem/a.py:3: x", "bxmem/a.py:3: x"], "bxmem.b": ["bxmem/b.py:1: y"], "bxmem.c": []}
    assert verdict(found, {}, "RULE") == ["bxmem/a.py:3: x", "bxmem/b.py:1: y"]
    assert verdict(found, {"bxmem.a": "why", "bxmem.b": "why"}, "RULE") == []
    assert verdict(
        found, {"bxmem.a": "why", "bxmem.b": "why", "bxmem.c": "split soon", "bxmem.gone": "old"}, "RULE"
    ) == [
        "bxmem.c: stale entry for RULE (split soon): it breaks nothing now, remove the entry",
        "bxmem.gone: stale entry for RULE (old): no module the rule holds",
    ]


def test_every_expected_failure_names_a_module_and_a_contract_it_holds():
    contracts = {contract.name: contract for contract in CONTRACTS}
    stale: list[tuple[str, str] | str] = [
        key
        for key in BROKEN
        if key[0] not in contracts or key[1] not in MODULES or not contracts[key[0]].applies(key[1])
    ]
    stale += [name for name in [*UNDEFERRED, *OVER_400] if name not in MODULES]
    assert not stale, stale


def test_every_contract_catches_what_it_forbids(tmp_path):
    """Each check, on a module written to break it (and on one that keeps it): a
    contract that cannot fail holds nothing."""
    cases = {
        "start-loads-only-stdlib": (
            "bxmem.start.probe",
            "import os\nimport httpx\n",
            "import httpx",
            "import os\ndef f():\n    import httpx  # deferred: idle\n",
        ),
        "formats-import-only-formats": (
            "bxmem.formats.probe",
            "from bxmem.trust.labels import higher_class\n",
            "from bxmem.trust.labels import higher_class",
            "import re\nfrom bxmem.formats import turn_ranges\n",
        ),
        "trust-imports-only-trust-and-formats": (
            "bxmem.trust.probe",
            "import re\nif TYPE_CHECKING:\n    from bxmem.retrieval.hits import Hit\n",
            "from bxmem.retrieval.hits import Hit",
            "import re\nfrom bxmem.trust.labels import higher_class\n",
        ),
        "retrieval-imports-only-pure-layers": (
            "bxmem.retrieval.probe",
            "import re\nif TYPE_CHECKING:\n    from bxmem.commands.recall import Hit\n",
            "from bxmem.commands.recall import Hit",
            "import re\nfrom bxmem.trust.labels import higher_class\n",
        ),
        "pure-layers-do-no-io": (
            "bxmem.trust.probe",
            "def f():\n    with open('x') as f:\n        pass\n",
            "open()",
            "import random\ndef f(rng: random.Random) -> float:\n    return rng.random()\n",
        ),
        "only-cli-imports-typer-rich": (
            "bxmem.commands.probe",
            "def f():\n    import rich.console\n",
            "import rich.console",
            "import re\n",
        ),
        "only-honcho-imports-httpx": (
            "bxmem.store.probe",
            "if TYPE_CHECKING:\n    import httpx\n",
            "import httpx",
            "import json\n",
        ),
        "only-config-schema-imports-pydantic": (
            "bxmem.config.probe",
            "from pydantic import BaseModel\n",
            "from pydantic import BaseModel",
            "import tomllib\n",
        ),
        "commands-never-import-cli": (
            "bxmem.commands.probe",
            "def f():\n    from bxmem.cli import output\n",
            "from bxmem.cli import output",
            "from bxmem.store import ledger\n",
        ),
    }
    more = {
        "pure-layers-do-no-io": [
            ("import time\n", "time is I/O or the clock"),
            ("from datetime import datetime\nT = datetime.now()\n", "reads the clock"),
            ("import datetime\nT = datetime.date.today()\n", "reads the clock"),
            ("import random\nJ = random.random()\n", "used at run time"),
            ("from pathlib import Path\ndef f(p: Path):\n    return Path(p).read_text()\n", "used at run time"),
            ("def f(x):\n    print(x)\n", "print() is I/O"),
        ],
    }
    contracts = {contract.name: contract for contract in CONTRACTS}
    assert set(cases) | {"init-is-empty", "no-import-cycle"} == set(contracts)
    for name, (module, breaking, named, keeping) in cases.items():
        for source, expected in [(breaking, named), *more.get(name, [])]:
            probe = tmp_path / "probe.py"
            probe.write_text(source)
            forget()
            problems = contracts[name].check(module, probe)
            assert problems and all(problem.startswith("probe.py:") for problem in problems), (name, source)
            assert any(expected in problem for problem in problems), (name, source, problems)
            # and its test, which runs the check over every module it holds, reports each line
            assert contract_breaches(contracts[name], {module: probe}) == list(dict.fromkeys(problems))
        probe.write_text(keeping)
        forget()
        assert contracts[name].check(module, probe) == [], (name, keeping)
        assert contract_breaches(contracts[name], {module: probe}) == []
    init = tmp_path / "__init__.py"
    init.write_text("")
    assert is_empty("bxmem.probe", init) == []
    init.write_text('"""A docstring is code here too."""\n')
    assert is_empty("bxmem.probe", init) == ["__init__.py: 36 bytes (a package's __init__.py is empty)"]
    forget()


def test_the_graph_sees_every_kind_of_import(tmp_path, monkeypatch):
    """The walker records imports at the top, inside functions and classes, relative ones,
    `from pkg import mod` and third-party ones, each with its line, and marks those under
    TYPE_CHECKING, which are no run-time dependency."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from __future__ import annotations\n"
        "import os.path as osp, httpx\n"
        "from ..errors import UsageError\n"
        "from . import sample\n"
        "if TYPE_CHECKING:\n"
        "    from bxmem.cli.output import JOBS\n"
        "class A:\n"
        "    import json\n"
        "def f():\n"
        "    from bxmem.start import idle  # deferred: idle\n"
    )
    records = import_records("bxmem.demo.probe", probe)
    forget()
    assert [(r.target, r.bound, r.line, r.in_function, r.type_checking) for r in records] == [
        ("httpx", "httpx", 2, False, False),
        ("os.path", "osp", 2, False, False),
        ("bxmem.errors", "UsageError", 3, False, False),
        ("bxmem.demo.sample", "sample", 4, False, False),
        ("bxmem.cli.output", "JOBS", 6, False, True),
        ("json", "json", 8, False, False),
        ("bxmem.start.idle", "idle", 10, True, False),
    ]
    assert records[-1].text == "    from bxmem.start import idle  # deferred: idle"
    graph = import_graph()
    # start/entry.py imports only inside main(): a function-level import must count
    assert "bxmem.start.idle" in graph["bxmem.start.entry"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# --- deferred imports: each says which import budget needs it ---

# The import budgets (tests/test_import_budget.py holds each): the idle check of the
# timer jobs, their lean run and recall's, `--help`, `bxmem tools`, and a command's
# heavy dependency that the commands sharing its module must not pay.
BUDGETS = frozenset({"idle", "lean", "help", "tools", "command"})
DEFERRED = re.compile(r"#\s*deferred:\s*(\S+)")
# What `python3 -c pass` has loaded already: deferring it saves nothing.
ALWAYS_LOADED = frozenset(
    {
        "sys",
        "builtins",
        "marshal",
        "os",
        "posix",
        "posixpath",
        "genericpath",
        "stat",
        "io",
        "abc",
        "codecs",
        "time",
        "_io",
        "_stat",
        "_abc",
        "_codecs",
    }
)


def deferred_problems(name: str, path: Path) -> list[str]:
    """Every import inside a function says `# deferred: <budget>` on its first line, with a
    budget of BUDGETS; none defers what is always loaded or what the module imports at its top."""
    records = import_records(name, path)
    at_top = {record.target for record in records if record.at_load}
    problems = []
    for record in records:
        if not record.in_function or record.type_checking:
            continue
        said = DEFERRED.search(record.text)
        if said is None:
            problems.append(_says(path, record, "an import inside a function says `# deferred: <budget>`"))
        elif said.group(1) not in BUDGETS:
            problems.append(
                _says(path, record, f"{said.group(1)!r} is no budget (one of {', '.join(sorted(BUDGETS))})")
            )
        if record.top in ALWAYS_LOADED or record.target in at_top:
            why = "always loaded" if record.top in ALWAYS_LOADED else "imported at the module's top already"
            problems.append(_says(path, record, f"{record.target} is {why}: import it at the top"))
    return problems


# Today's modules with imports inside functions that do not say their budget (or need
# none), each with why: fixing the module makes its entry stale, which fails the test.
UNDEFERRED: dict[str, str] = {}


def test_every_deferred_import_says_its_budget():
    problems = verdict(
        {name: deferred_problems(name, path) for name, path in MODULES.items()}, UNDEFERRED, "UNDEFERRED"
    )
    assert not problems, "\n".join(problems)


def test_the_deferred_check_catches_each_mistake(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json\n"
        "def f():\n"
        "    import httpx  # deferred: command\n"
        "    import typer\n"
        "    import rich  # deferred: speed\n"
        "    import sys  # deferred: idle\n"
        "    import json  # deferred: lean\n"
    )
    problems = deferred_problems("bxmem.commands.probe", probe)
    forget()
    assert problems == [
        "probe.py:4: import typer: an import inside a function says `# deferred: <budget>`",
        "probe.py:5: import rich  # deferred: speed: 'speed' is no budget (one of command, help, idle, lean, tools)",
        "probe.py:6: import sys  # deferred: idle: sys is always loaded: import it at the top",
        "probe.py:7: import json  # deferred: lean: json is imported at the module's top already: import it at the top",
    ]


# Today's modules over the cap, each until it is split (then its entry is stale, which fails the test).
OVER_400: dict[str, str] = {}


def size_problems(path: Path) -> list[str]:
    lines = logical_lines(path.read_text())
    if lines <= MAX_LOGICAL_LINES:
        return []
    return [f"{shown(path)}:1: {lines} logical lines (at most {MAX_LOGICAL_LINES}): split it"]


def test_no_module_over_400_lines():
    problems = verdict({name: size_problems(path) for name, path in MODULES.items()}, OVER_400, "OVER_400")
    assert not problems, "\n".join(problems)


def logical_lines(source: str) -> int:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return sum(
        1
        for token in tokens
        if token.type == tokenize.NEWLINE or (token.type == tokenize.COMMENT and token.line.lstrip().startswith("#"))
    )


def test_logical_lines_ignore_wrapping():
    one = "x = f(1, 2)  # why\n"
    wrapped = "x = f(\n    1,\n    2,\n)  # why\n"
    assert logical_lines(one) == logical_lines(wrapped) == 1
    assert logical_lines("# a comment\nif x:\n    y = 1\n") == 3


def design_table() -> dict[str, str]:
    """docs/design.md's module table: each package's row ("start/", "commands/send/", and
    "bxmem/" for the top level) -> the modules its last cell names."""
    text = (ROOT / "docs" / "design.md").read_text()
    table = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        key = re.match(r"`([\w/]+/)`", cells[0]) if cells else None
        if key:
            rows[key.group(1)] = cells[-1]
    return rows


def test_design_md_names_every_module():
    """docs/design.md's module table has a row for each package, naming each of its
    modules (it went stale before), and no module that is not there."""
    rows = design_table()
    packages = {
        "bxmem/" if path.parent == PACKAGE else path.parent.relative_to(PACKAGE).as_posix() + "/"
        for path in MODULES.values()
    }
    assert sorted(rows) == sorted(packages), "docs/design.md's module table: one row a package"
    missing, stale = [], []
    for package, cell in rows.items():
        folder = PACKAGE if package == "bxmem/" else PACKAGE / package
        named = set(re.findall(r"`(\w+\.py)`", cell))
        present = {path.name for path in folder.glob("*.py")} - {"__init__.py"}
        missing += [f"{package}{name}" for name in sorted(present - named)]
        stale += [f"{package}{name}" for name in sorted(named - present)]
    assert not missing, f"docs/design.md's module table does not name: {missing}"
    assert not stale, f"docs/design.md's module table names what is not there: {stale}"


# --- dead code: a module-level name nothing reads ---

# Today's modules with names nothing reads, each with why (issue 14 item 9): removing
# the names makes the entry stale, which fails the test.
UNREAD: dict[str, str] = {}
READERS = [
    *sorted(PACKAGE.rglob("*.py")),
    *sorted((ROOT / "tests").glob("*.py")),
    *sorted((ROOT / "eval").glob("*.py")),
    ROOT / "bench" / "run",
    ROOT / "scripts" / "crash-suite",
    ROOT / "scripts" / "gen-cli-docs",
]


def _defined(tree: ast.Module) -> dict[str, int]:
    """Module-level constants, classes and undecorated functions (a decorated one,
    such as a typer command, is read by its decorator), each with its line."""
    names: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {target.id: node.lineno for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.decorator_list:
            names[node.name] = node.lineno
    return {name: line for name, line in names.items() if not (name.startswith("__") and name.endswith("__"))}


def _reads_by_module(parsed: dict[Path, ast.Module], modules: dict[str, Path]) -> dict[str, set[str]]:
    """For each bxmem module, the names of it that some file reads: by name inside the
    module itself; elsewhere imported from it, as an attribute of a name bound to it, or
    as a string in a file that binds it (monkeypatch.setattr(module, "NAME", ...))."""
    reads: dict[str, set[str]] = {name: set() for name in modules}
    own = {path: name for name, path in modules.items()}
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
                    if f"{base}.{alias.name}" in modules:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif base in modules:
                        reads[base].add(alias.name)
            elif isinstance(node, ast.Import):
                aliases |= {alias.asname: alias.name for alias in node.names if alias.name in modules and alias.asname}
        if not aliases:
            continue
        strings = {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        for module in set(aliases.values()):
            reads[module] |= strings
        for node in nodes:
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                reads[aliases[node.value.id]].add(node.attr)
    return reads


def unread_names(modules: dict[str, Path], readers: list[Path]) -> dict[str, list[str]]:
    """Each module -> one line for each module-level name of it that no reader reads."""
    parsed = {reader: parse(reader)[0] for reader in readers}
    reads = _reads_by_module(parsed, modules)
    return {
        name: [
            f"{shown(path)}:{line}: {defined} is defined and nothing reads it"
            for defined, line in _defined(parsed[path]).items()
            if defined not in reads[name]
        ]
        for name, path in modules.items()
    }


def test_every_module_level_name_is_read_somewhere():
    problems = verdict(unread_names(MODULES, READERS), UNREAD, "UNREAD")
    assert not problems, "\n".join(problems)


def test_the_dead_code_check_sees_an_unread_name(tmp_path):
    """A name read only inside its module, one read by another file (imported, as an
    attribute, as a string where the module is bound) and a decorated function are read;
    the one left is reported, with its line."""
    probe, reader = tmp_path / "probe.py", tmp_path / "reader.py"
    probe.write_text("A = 1\nB = 2\nC: int = 3\nD = 4\nE = 5\ndef f():\n    return A\n@cache\ndef g():\n    pass\n")
    reader.write_text(
        'from bxmem.demo.probe import B\nfrom bxmem.demo import probe\nprobe.C\nsetattr(probe, "D", 1)\nprobe.f()\n'
    )
    modules = {"bxmem.demo.probe": probe}
    try:
        assert unread_names(modules, [probe, reader]) == {
            "bxmem.demo.probe": ["probe.py:5: E is defined and nothing reads it"]
        }
        reader.write_text("")
        forget()
        assert unread_names(modules, [probe, reader])["bxmem.demo.probe"] == [
            f"probe.py:{line}: {name} is defined and nothing reads it"
            for line, name in [(2, "B"), (3, "C"), (4, "D"), (5, "E"), (6, "f")]
        ]
    finally:
        forget()
