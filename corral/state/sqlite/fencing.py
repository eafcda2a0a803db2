"""Fence tokens in a SQLite store: the newest writer's token, kept in ``meta``."""

from __future__ import annotations

import sqlite3

from corral.state.ports import deposed


def check_fence(db: sqlite3.Connection, fence: int, what: str) -> None:
    """Inside a write transaction: refuse ``fence`` if a newer one wrote
    before, else remember it as the newest."""
    row = db.execute("SELECT value FROM meta WHERE key = 'fence'").fetchone()
    newest = int(row[0]) if row else 0
    if fence < newest:
        raise deposed(what, newest, fence)
    if fence > newest:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('fence', ?)", (fence,))
