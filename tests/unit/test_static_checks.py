"""The whole code base, tests and benchmarks included, is ``mypy --strict``
and ``ruff`` clean (CI runs this; the checkers come with the test extras)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_mypy_strict() -> None:
    result = run(str(BIN / "mypy"))  # its packages: pyproject.toml
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_strict_packaging() -> None:
    # packaging/ holds scripts, not a package: named here, not in pyproject's list
    result = run(str(BIN / "mypy"), "--strict", "packaging/build_deb.py")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_ruff() -> None:
    for argv in (["check", "."], ["format", "--check", "."]):
        result = run(str(BIN / "ruff"), *argv)
        assert result.returncode == 0, result.stdout + result.stderr
