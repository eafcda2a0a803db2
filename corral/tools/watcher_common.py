"""What the parts of ganeti-watcher share: its log and how it runs a job."""

from __future__ import annotations

import logging
import time
from typing import Any

from corral.cli import common
from corral.luxi.client import Client

log = logging.getLogger("ganeti-watcher")

# Ganeti's OPCODE_REASON_SRC_WATCHER: the jobs' reason trail names the watcher.
REASON_SOURCE = "gnt:watcher"


def reason(why: str) -> list[list[Any]]:
    """The reason trail of one of the watcher's opcodes."""
    return [[REASON_SOURCE, why, time.time_ns()]]


def submit(client: Client, op: dict[str, Any], why: str) -> Any:
    """Run one opcode as a job, with the watcher's reason, and wait for its result."""
    op["reason"] = reason(why)
    return common.poll_job(client, client.submit_job([op]), feedback=None)[0]
