"""Looking for a value that must not have reached the disk."""

from __future__ import annotations

from pathlib import Path


def files_holding(root: Path, value: str) -> list[str]:
    """The files under ``root`` (symlinks not followed) whose bytes contain ``value``."""
    needle = value.encode()
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes()
    )
