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
        ("corral.master.services", "corral.cmdlib"),
        ("corral.master.services", "corral.master.resources"),
        ("corral.hooks.py", "corral.cmdlib"),
        ("corral.master.context.py", "corral.cmdlib"),
        ("corral.node.hypervisor", "corral.node.handlers"),
        # The RPC layer is shared by master and node: it imports neither side.
        ("corral.rpc", "corral.node"),
        ("corral.rpc", "corral.master"),
        ("corral.rpc", "corral.cmdlib"),
    ],
)
def test_layer_does_not_import(package: str, forbidden: str) -> None:
    assert _offenders(package, forbidden) == []


def test_the_check_sees_imports() -> None:
    # Guard against a checker that finds nothing: cmdlib does import the services.
    assert _offenders("corral.cmdlib", "corral.master.services")
