"""The layers of masterd and noded stay apart (issue 10, item 8): checked on
the import statements of the source, so a new cross-import fails here."""

from __future__ import annotations

import ast
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
    root = PACKAGE.joinpath(*package.split(".")[1:])
    files = [root] if root.suffix == ".py" else sorted(root.rglob("*.py"))
    return [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in files
        for name in sorted(_imports(path))
        if name == forbidden or name.startswith(forbidden + ".")
    ]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("corral.cmdlib", "corral.master.resources"),
        ("corral.master.resources", "corral.cmdlib"),
        ("corral.services", "corral.cmdlib"),
        ("corral.services", "corral.master.resources"),
        ("corral.hooks.py", "corral.cmdlib"),
        ("corral.services.context.py", "corral.cmdlib"),
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


def test_the_check_sees_imports() -> None:
    # Guard against a checker that finds nothing: cmdlib does import the services.
    assert _offenders("corral.cmdlib", "corral.services")
    assert _offenders("corral.tools", "corral.cli")  # a tool of the command-line layer
