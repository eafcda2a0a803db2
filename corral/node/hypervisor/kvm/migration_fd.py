"""A migration's connections for a QEMU in namespaces of its own.

Such a QEMU has no network interface: it can neither listen for the
incoming stream nor connect to the target.  noded does both, outside, and
hands QEMU the connected socket (QMP ``getfd``; ``migrate-incoming`` and
``migrate`` with ``fd:``, NBD's ``fd`` address).  QEMU still runs TLS over
it with the nodes' certificates, so what noded's socket carries stays
authenticated end to end.  The target hands in the first connection its
listener accepts (a stranger's fails TLS, and the migration with it, as a
stranger's connection to QEMU's own listener would).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from corral import errors
from corral.node.hypervisor.kvm.monitor import Monitor

INCOMING_FD = "corral-mig-in"
OUTGOING_FD = "corral-mig-out"


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def listen(address: str, port: int) -> socket.socket:
    """The incoming migration's listener on ``address``:``port`` (0: any port)."""
    sock = socket.socket(_family(address), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(1)
        sock.setblocking(False)
    except OSError as err:
        sock.close()
        raise errors.OpExecError(
            f"Cannot listen for the migration on {address} port {port}: {err.strerror}"
        ) from None
    return sock


async def receive(monitor: Monitor, listening: socket.socket) -> None:
    """Accept the source's connection and let QEMU read the migration from it."""
    try:
        conn, _ = await asyncio.get_running_loop().sock_accept(listening)
    finally:
        listening.close()
    with conn:
        await monitor.send_fd(conn.fileno(), INCOMING_FD)
    await monitor.execute("migrate-incoming", {"uri": f"fd:{INCOMING_FD}"})


async def connect(monitor: Monitor, address: str, port: int, name: str) -> None:
    """Connect to the target's ``address``:``port`` and give QEMU the socket as ``name``."""
    sock = socket.socket(_family(address), socket.SOCK_STREAM)
    with sock:
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (address, port))
        except OSError as err:
            raise errors.OpExecError(
                f"Cannot connect to the migration target {address} port {port}: {err.strerror}"
            ) from None
        await monitor.send_fd(sock.fileno(), name)


async def stop(task: asyncio.Task[None] | None) -> None:
    """End a receiving task (its listener closes)."""
    if task is not None and not task.done():
        task.cancel()
    if task is not None:
        with contextlib.suppress(asyncio.CancelledError, errors.OpExecError):
            await task
