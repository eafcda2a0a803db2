"""corral-rapi on the master IP too: clients reach RAPI through the cluster's
name, whose address is up on the master node only (see
:mod:`corral.master.master_ip`), so RAPI there is the master's.

The listener binds the master IP before the address is on the node (Linux's
``IP_FREEBIND``): it answers once the address comes.  It follows the ssconf
file ``master_ip`` (written after corral-rapi may have started; changed by a
cluster rename), looked at every few seconds where corral-rapi may still
read it (as root); else the address it had at its start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from corral.paths import Paths
from corral.rapi.httpd.listener import Listener

log = logging.getLogger(__name__)

# Seconds between two looks at the ssconf file.
CHECK_INTERVAL = 2.0
_EVERY_ADDRESS = ("0.0.0.0", "::")


def read_master_ip(paths: Paths) -> str | None:
    """The master IP by the node's ssconf files (None: cannot tell; blocking)."""
    try:
        return paths.ssconf_file("master_ip").read_text().strip()
    except OSError:  # none yet, or not readable by the user RAPI runs as
        return None


class MasterIpListener:
    """A listener (``make(address)``) on the master IP, unless ``address``
    (where RAPI listens anyway) is it or every address."""

    def __init__(
        self,
        paths: Paths,
        address: str,
        port: int,
        make: Callable[[str], Listener],
        interval: float = CHECK_INTERVAL,
    ) -> None:
        self._paths = paths
        self._address = address
        self._port = port
        self._make = make
        self._interval = interval
        self._ip = ""
        self._listener: Listener | None = None

    async def follow(self, ip: str | None) -> None:
        """Listen on the master IP (``ip`` at first), following it, until cancelled."""
        if self._address in _EVERY_ADDRESS:
            return
        try:
            while True:
                if ip is not None and ip != self._ip:
                    await self._move(ip)
                await asyncio.sleep(self._interval)
                ip = await asyncio.to_thread(read_master_ip, self._paths)
        finally:
            if self._listener is not None:
                await self._listener.stop()

    async def _move(self, ip: str) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        self._ip = ip
        if not ip or ip == self._address:
            return
        listener = self._make(ip)
        try:
            await listener.start()
        except OSError as err:
            # Another RAPI of this machine listens there (nodes sharing an
            # address space, as test beds on loopback).
            log.warning("Not listening on the master IP %s:%d: %s", ip, self._port, err)
            return
        self._listener = listener
        log.info("Listening on the master IP %s:%d too", ip, self._port)
