"""The per-group state file of the watcher: restart and cleanup attempts per
instance, the last boot id per node (Ganeti 3.0.2's watcher state, same file
and format, so that Ganeti's tools and QA read and reset it alike)."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from typing import Any

log = logging.getLogger("ganeti-watcher")

# Records older than this are forgotten: an instance down for long is tried again.
RETRY_EXPIRATION = 8 * 3600
KEY_CLEANUP_COUNT = "cleanup_count"
KEY_CLEANUP_WHEN = "cleanup_when"
KEY_RESTART_COUNT = "restart_count"
KEY_RESTART_WHEN = "restart_when"
KEY_BOOT_ID = "bootid"


class StateLocked(Exception):
    """Another watcher holds the group's state file."""


class WatcherState:
    """The state file of one group, locked from open to :meth:`save`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StateLocked(f"Can't acquire lock on state file {path}") from None
        self._data = self._read()
        self._data.setdefault("instance", {})
        self._data.setdefault("node", {})
        self._original = json.dumps(self._data, sort_keys=True)

    def _read(self) -> dict[str, Any]:
        with os.fdopen(os.dup(self._fd), "r") as handle:
            text = handle.read()
        if not text:
            return {}
        try:
            data = json.loads(text)
        except ValueError as err:
            log.warning("Invalid state file. Using defaults. Error message: %s", err)
            return {}
        return data if isinstance(data, dict) else {}

    def save(self) -> None:
        """Write the state if it changed (else touch the file), and unlock it."""
        text = json.dumps(self._data, sort_keys=True)
        try:
            if text == self._original:
                log.debug("Data didn't change, just touching status file")
                os.utime(self.path)
                return
            tmp = f"{self.path}.new"
            with open(tmp, "w") as handle:
                handle.write(text)
            os.replace(tmp, self.path)
        finally:
            self.close()

    def close(self) -> None:
        """Unlock the file without saving."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # Nodes
    def boot_id(self, node: str) -> str | None:
        value = self._data["node"].get(node, {}).get(KEY_BOOT_ID)
        return value if isinstance(value, str) else None

    def set_boot_id(self, node: str, boot_id: str) -> None:
        self._data["node"].setdefault(node, {})[KEY_BOOT_ID] = boot_id

    # Instances
    def restart_attempts(self, name: str) -> int:
        return int(self._data["instance"].get(name, {}).get(KEY_RESTART_COUNT, 0))

    def cleanup_attempts(self, name: str) -> int:
        return int(self._data["instance"].get(name, {}).get(KEY_CLEANUP_COUNT, 0))

    def maintain(self, existing: list[str]) -> None:
        """Forget instances that are gone, and records that expired."""
        records = self._data["instance"]
        earliest = time.time() - RETRY_EXPIRATION
        for name in list(records):
            if name not in existing:
                log.debug("Forgetting obsolete instance %s", name)
                del records[name]
            elif records[name].get(KEY_RESTART_WHEN, 0) < earliest:
                log.debug("Expiring record for instance %s", name)
                del records[name]

    def record_restart(self, name: str) -> None:
        self._record(name, KEY_RESTART_WHEN, KEY_RESTART_COUNT)

    def record_cleanup(self, name: str) -> None:
        self._record(name, KEY_CLEANUP_WHEN, KEY_CLEANUP_COUNT)

    def _record(self, name: str, when: str, count: str) -> None:
        record = self._data["instance"].setdefault(name, {})
        record[when] = time.time()
        record[count] = int(record.get(count, 0)) + 1

    def forget(self, name: str) -> None:
        """The instance runs again: no attempts to remember."""
        self._data["instance"].pop(name, None)
