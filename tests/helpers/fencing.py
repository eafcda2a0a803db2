"""Fence tokens in tests: the running master's, a new master's, and the
windows a node's log shows (corral.rpc.fencing, corral.node.fencing).

The rule for tests' helpers that call a node themselves beside a running
masterd (calls that change the node): they act for that master and send its
lease's token (:func:`master_token`; :class:`tests.helpers.noded.Noded` does
it for the nodes of a cluster).  A node no master
has called takes calls without a token (tests of a node alone).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3

from corral.paths import Paths
from corral.state.ports import NO_FENCE, Lease
from corral.state.sqlite.kv import SqliteMastership

# noded's line when a newer token comes into force (corral.node.fencing).
_CHANGE = re.compile(r"Fence token (\d+) in force \(was (\d+)\)")


def master_token(paths: Paths) -> int:
    """The fence token of the newest master of the cluster whose master's root
    is ``paths`` (NO_FENCE: there was none)."""
    # Read-only and at once: helpers call it inside and outside event loops.
    with contextlib.closing(sqlite3.connect(f"file:{paths.state_db}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT token FROM lease WHERE id = 1").fetchone()
    return NO_FENCE if row is None else int(row[0])


async def take_over(paths: Paths, holder: str = "new-master", ttl: float = 600.0) -> Lease:
    """Acquire the mastership of ``paths``' cluster as a new master would: a
    token newer than every earlier master's (the masterd that held it is
    deposed, and learns it at its next renewal)."""
    mastership = SqliteMastership(paths.state_db)
    try:
        return await mastership.acquire(holder, ttl)
    finally:
        await mastership.close()


def token_changes(log_text: str) -> list[tuple[int, int]]:
    """``(previous, new)`` of each fence token change in a node's log, in order."""
    return [(int(was), int(token)) for token, was in _CHANGE.findall(log_text)]
