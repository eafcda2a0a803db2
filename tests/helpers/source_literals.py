"""Where names of a table are spelled in Corral's source: the check behind the
"no literal outside the table" tests (disk templates, hypervisors)."""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

CORRAL = Path(__file__).resolve().parents[2] / "corral"


def literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def spelled_outside(
    names: Collection[str],
    allowed: Collection[Path],
    other_uses: Collection[tuple[Path, str]] = (),
) -> list[str]:
    """``file:line: name`` for each of ``names`` spelled in a module of Corral
    outside ``allowed`` (a whole module) and ``other_uses`` (one name in one
    module: the same spelling in another namespace)."""
    return [
        f"{path.relative_to(CORRAL.parent)}:{line}: {value!r}"
        for path in sorted(CORRAL.rglob("*.py"))
        if path not in allowed
        for line, value in literals(path)
        if value in names and (path, value) not in other_uses
    ]
