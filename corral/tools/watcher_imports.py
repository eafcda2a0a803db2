"""ganeti-watcher's clean-up of moves from other clusters that never finished
(the 2.2 design: "ganeti-watcher should remove instances pending a move from
another cluster after a certain amount of time").

In Corral a pending remote import is the job that runs it: an
OP_INSTANCE_CREATE in mode ``remote-import`` holds the new instance's locks
and its intent record (the instance and its disks exist for that job only)
from the moment it logs its ``remote-import`` entry until the source's disks
are in.  Its own time-out covers a source that never connects; this one
covers the rest (a source that stalls, a mover that went away mid-transfer).
Such a job is stale once nothing happened in it for the time-out: neither its
start nor any entry of its log (a transfer logs its progress every few
seconds) is younger.  The watcher then cancels it (``gnt-job cancel
--kill``): the job undoes the import under its own locks, so the instance,
its disks and the per-move keys go as for any failed import.  Removing the
instance by another job would wait on the very locks the import holds.

The default time-out is the life of the move's certificates (Ganeti's
``-days 1``): past it, no source can start sending any more.
"""

from __future__ import annotations

import time
from typing import Any

from corral import constants as C
from corral import errors
from corral.luxi.client import Client
from corral.tools.watcher_common import log

DEFAULT_TIMEOUT = C.RIE_CERT_VALIDITY
_FIELDS = ["id", "ops", "start_ts", "oplog"]


def remove_stale_imports(client: Client, timeout: float) -> list[int]:
    """Cancel the remote imports idle for ``timeout`` seconds; their job ids."""
    rows = client.query("job", _FIELDS, ["=", "status", C.JOB_STATUS_RUNNING])["data"]
    now = time.time()
    removed = []
    for row in rows:
        job_id, ops, start, oplog = (cell[1] for cell in row)
        names = [op.get("instance_name") for op in ops if _is_remote_import(op)]
        if not names or start is None:
            continue
        idle = now - _last_activity(start, oplog)
        if idle < timeout:
            continue
        if _cancel(client, int(job_id), ", ".join(map(str, names)), idle):
            removed.append(int(job_id))
    return removed


def _is_remote_import(op: Any) -> bool:
    return (
        isinstance(op, dict)
        and op.get("OP_ID") == "OP_INSTANCE_CREATE"
        and op.get("mode") == "remote-import"
    )


def _seconds(stamp: Any) -> float:
    """A job timestamp (``[seconds, microseconds]``) in seconds."""
    return float(stamp[0]) + float(stamp[1]) / 1e6


def _last_activity(start: Any, oplog: list[list[Any]]) -> float:
    """When the job last did something: its start or its newest log entry."""
    stamps = [_seconds(start)] + [_seconds(entry[1]) for entries in oplog for entry in entries]
    return max(stamps)


def _cancel(client: Client, job_id: int, names: str, idle: float) -> bool:
    try:
        ok, message = client.call("CancelJob", job_id, True)
    except errors.GenericError as err:
        ok, message = False, str(err)
    if not ok:
        # Finished meanwhile, or refused: nothing pending is left behind by it.
        log.warning("Could not remove pending import of %s (job %s): %s", names, job_id, message)
        return False
    log.info(
        "Removed pending remote import of instance %s: job %s idle for %.0f s, cancelled",
        names,
        job_id,
        idle,
    )
    return True
