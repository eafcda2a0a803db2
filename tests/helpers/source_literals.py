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


def _identifier(node: ast.expr) -> str | None:
    """``X`` of an operand ``X`` or ``module.X``."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _names_in(node: ast.expr, names: Collection[str]) -> list[str]:
    """The constants of ``names`` an operand of a comparison is, or lists."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [name for item in items if (name := _identifier(item)) is not None and name in names]


def compared_outside(names: Collection[str], allowed: Collection[Path]) -> list[str]:
    """``file:line: name`` for each comparison (``==``, ``in``, ...) with one of
    the constants called ``names`` (``DT_FILE``, ``HT_KVM``) in a module of
    Corral outside ``allowed``: behaviour chosen by name, where the table's
    entry should say what sets it apart."""
    return [
        f"{path.relative_to(CORRAL.parent)}:{node.lineno}: {name}"
        for path in sorted(CORRAL.rglob("*.py"))
        if path not in allowed
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Compare)
        for operand in (node.left, *node.comparators)
        for name in _names_in(operand, names)
    ]
