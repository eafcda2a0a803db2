"""The layers of masterd and noded stay apart (issue 10, item 8), and no two
packages of corral import each other, even through others (issue 21): checked
on the import statements of the source, so a new cross-import fails here."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

import corral

PACKAGE = Path(corral.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (top level, functions and TYPE_CHECKING blocks)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def _offenders(package: str, forbidden: str) -> list[str]:
    # A module is named with its suffix ("corral.hooks.py"), a package without.
    root = PACKAGE.joinpath(*package.removesuffix(".py").split(".")[1:])
    files = [root.with_suffix(".py")] if package.endswith(".py") else sorted(root.rglob("*.py"))
    return [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in files
        for name in sorted(_imports(path))
        if name == forbidden or name.startswith(forbidden + ".")
    ]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        # Logical units, hooks and exports use the shared services, never masterd.
        ("corral.cmdlib", "corral.master"),
        ("corral.hooks.py", "corral.master"),
        ("corral.exports", "corral.master"),
        ("corral.master.resources", "corral.cmdlib"),
        ("corral.hooks.py", "corral.cmdlib"),
        # Services import neither logical units nor masterd.
        ("corral.services", "corral.cmdlib"),
        ("corral.services", "corral.master"),
        ("corral.node.hypervisor", "corral.node.handlers"),
        # Node code and the HTTP plumbing do not import daemon entry points.
        ("corral.node", "corral.daemons"),
        ("corral.http", "corral.daemons"),
        ("corral.process", "corral.daemons"),
        # RAPI talks to masterd over luxi, never to node code.
        ("corral.rapi", "corral.node"),
        # The RPC layer is shared by master and node: it imports neither side.
        ("corral.rpc", "corral.node"),
        ("corral.rpc", "corral.master"),
        ("corral.rpc", "corral.cmdlib"),
    ],
)
def test_layer_does_not_import(package: str, forbidden: str) -> None:
    assert _offenders(package, forbidden) == []


# The command-line layer: the gnt-* commands, the tools and the test bed.
CLI_LAYER = ("cli", "tools", "testbed.py")


def test_nothing_below_the_command_line_imports_it() -> None:
    below = [p for p in sorted(PACKAGE.iterdir()) if p.name not in CLI_LAYER]
    offenders = [
        found
        for path in below
        if path.suffix == ".py" or (path / "__init__.py").exists()
        for found in _offenders(f"corral.{path.name}", "corral.cli")
    ]
    assert offenders == []


def _package(module: str) -> str | None:
    """The package of corral (a subpackage or a module of its top level) that
    ``module`` is in, or None for a module outside corral."""
    parts = module.split(".")
    if parts[0] != "corral" or len(parts) < 2 or parts[1].startswith("__"):
        return None
    name = parts[1]
    found = (PACKAGE / name / "__init__.py").exists() or (PACKAGE / f"{name}.py").exists()
    return name if found else None


def _package_imports() -> dict[tuple[str, str], str]:
    """Each (importer, imported) pair of corral's packages, with one import
    that makes it (for the message)."""
    edges: dict[tuple[str, str], str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _package("corral." + path.relative_to(PACKAGE).parts[0].removesuffix(".py"))
        for name in sorted(_imports(path)):
            target = _package(name)
            if source is not None and target not in (None, source):
                edges.setdefault((source, target), f"{path.relative_to(PACKAGE)} imports {name}")
    return edges


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph``, its first node repeated last; [] if it has none."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node not in done:
            for target in sorted(graph.get(node, ())):
                if found := visit(target, [*path, node]):
                    return found
            done.add(node)
        return []

    for node in sorted(graph):
        if found := visit(node, []):
            return found
    return []


def test_no_package_import_cycle() -> None:
    edges = _package_imports()
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    cycle = _cycle(graph)
    shown = [f"{a} -> {b}: {edges[a, b]}" for a, b in itertools.pairwise(cycle)]
    assert cycle == [], "packages importing each other:\n" + "\n".join(shown)


def test_the_check_sees_imports() -> None:
    # Guard against a checker that finds nothing: cmdlib does import the services.
    assert _offenders("corral.cmdlib", "corral.services")
    assert _offenders("corral.tools", "corral.cli")  # a tool of the command-line layer
    assert _offenders("corral.hooks.py", "corral.rpc")  # a module, not a package
    edges = _package_imports()
    assert ("cmdlib", "services") in edges and ("storage", "objects") in edges
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
