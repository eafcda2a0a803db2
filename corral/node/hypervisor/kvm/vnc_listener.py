"""VNC for a QEMU in namespaces of its own: noded listens, QEMU serves.

Such a QEMU has a VNC server (``-vnc none`` with the instance's options:
its password, its TLS credentials) but no network to listen on.  noded
binds the address and port QEMU's own listener would have
(``vnc_bind_address``; display = network port - 5900) and hands QEMU every
connection it accepts (QMP ``getfd``, then ``add_client``): QEMU speaks RFB
on it, asks for the password and runs TLS as on a listener of its own.

The listener lives as long as the guest: bound before QEMU starts (a port
in use fails the start, as it fails QEMU's own listener), closed when QEMU
is gone, bound again by a restarted noded that finds the guest running.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Mapping
from typing import Any

from corral import errors
from corral.node.hypervisor.kvm import cmdline
from corral.node.hypervisor.kvm.monitor import Monitor

log = logging.getLogger(__name__)

CLIENT_FD = "corral-vnc"
# No IPv6 on this node: 0.0.0.0 is IPv4 only.
_NO_IPV6 = (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL)
# Out of descriptors or memory: accept again after a pause (as asyncio's servers).
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_RETRY_DELAY = 1.0


def endpoint(hvparams: Mapping[str, Any], port: int | None) -> tuple[str, int] | None:
    """Where noded listens for the VNC of a QEMU in namespaces (``port``:
    the instance's network port): None if it has no namespaces or no VNC."""
    address = str(hvparams.get("vnc_bind_address") or "")
    if not hvparams.get("use_namespaces") or not address or port is None:
        return None
    return (address, port) if port > cmdline.VNC_BASE_PORT else None


def bind(address: str, port: int) -> socket.socket:
    """A listening socket at ``address``:``port``; ``0.0.0.0``: every IPv4
    and IPv6 address, as QEMU's ``:display``."""
    ip = str(cmdline.vnc_ip(address))
    try:
        if ip == "0.0.0.0" and socket.has_dualstack_ipv6():
            try:
                return _listening(("::", port), socket.AF_INET6, dualstack=True)
            except OSError as err:
                if err.errno not in _NO_IPV6:
                    raise
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        return _listening((ip, port), family)
    except OSError as err:
        raise errors.OpExecError(
            f"Cannot listen for VNC on {address} port {port}: {err.strerror}"
        ) from None


def _listening(
    address: tuple[str, int], family: socket.AddressFamily, dualstack: bool = False
) -> socket.socket:
    sock = socket.create_server(address, family=family, dualstack_ipv6=dualstack)
    sock.setblocking(False)
    return sock


class VncListener:
    """Accepts VNC clients on ``sock`` and hands them to ``monitor``'s QEMU."""

    def __init__(self, sock: socket.socket, monitor: Monitor) -> None:
        self.sock = sock
        self.monitor = monitor
        self._task = asyncio.create_task(self._serve(), name=f"vnc-{monitor.name}")

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self.sock)
            except ConnectionError:
                continue  # the client left before it was accepted
            except OSError as err:
                log.warning("VNC of %s: cannot accept: %s", self.monitor.name, err)
                if err.errno not in _RESOURCE_ERRORS:
                    return
                await asyncio.sleep(_RETRY_DELAY)
                continue
            with conn:  # QEMU has its own copy once add_client answers
                await self._hand_over(conn)

    async def _hand_over(self, conn: socket.socket) -> None:
        try:
            await self.monitor.send_fd(conn.fileno(), CLIENT_FD)
            await self.monitor.execute(
                "add_client", {"protocol": "vnc", "fdname": CLIENT_FD, "skipauth": False}
            )
        except errors.OpExecError as err:
            # QEMU is gone (its cleanup closes this listener) or refused it.
            log.warning("VNC of %s: cannot hand a client to QEMU: %s", self.monitor.name, err)

    async def close(self) -> None:
        """Stop accepting (clients handed over stay with QEMU)."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.sock.close()
