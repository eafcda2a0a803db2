"""Tap devices: their names and their creation through /dev/net/tun.

A tap is created the way Ganeti creates it: noded opens ``/dev/net/tun``,
attaches a named tap to the file (``TUNSETIFF``) and hands the open file to
QEMU (``-netdev tap,fd=N`` or ``fds=N:M`` for several queues).  The tap is not
persistent: it lives exactly as long as some process holds one of its files,
so a QEMU that dies takes its taps with it and nothing is left behind, and
QEMU never opens a tap itself, so it works unprivileged (``-runas``) and in
an empty chroot (where no /dev/net/tun exists), also for hot-plugged NICs.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import socket
import struct
from dataclasses import dataclass
from types import TracebackType

from corral import errors

# Every tap made by Corral starts with this; nothing else on a node may.
TAP_PREFIX = "ct"
IFNAMSIZ = 16  # with the terminating NUL: names have at most 15 characters
_HASH_CHARS = 12  # 60 bits of the instance's hash
MAX_INDEX = 9  # one digit (Ganeti allows 8 NICs)

# linux/if_tun.h
_TUN_DEVICE = "/dev/net/tun"
_TUNSETIFF = 0x400454CA
_TUNGETFEATURES = 0x800454CF
_IFF_TAP = 0x0002
_IFF_NO_PI = 0x1000
_IFF_VNET_HDR = 0x4000
_IFF_MULTI_QUEUE = 0x0100
_IFREQ = "16sH"


def tap_name(instance: str, index: int, node: str = "") -> str:
    """The tap of NIC ``index`` of ``instance`` (its uuid, or its name) on ``node``.

    ``ct`` + 12 base32 characters of the SHA-256 of ``instance`` and ``node``
    + the NIC's index: 15 characters (IFNAMSIZ), the same after a restart of
    noded, and different for two instances unless 60 bits of hashes collide.
    ``node`` (noded's root) tells apart the nodes that share one machine (a
    test bed): a guest migrating between two of them has a tap on each at once.
    """
    if not instance:
        raise ValueError("A tap name needs the instance's uuid or name")
    if not 0 <= index <= MAX_INDEX:
        raise ValueError(f"NIC index {index} is not in 0..{MAX_INDEX}")
    digest = hashlib.sha256(f"{instance}\0{node}".encode()).digest()
    code = base64.b32encode(digest).decode().lower()[:_HASH_CHARS]
    return f"{TAP_PREFIX}{code}{index}"


@dataclass
class Tap:
    """A tap and the open files that keep it alive, one per queue.

    Hand ``fds`` to QEMU (``pass_fds``; ``-netdev tap,fd=N`` for one queue,
    ``fds=N:M`` for several; QEMU finds vnet_hdr on them itself), then
    :meth:`close` them here: from then on QEMU alone keeps the tap.
    """

    name: str
    fds: tuple[int, ...]

    def close(self) -> None:
        """Close this process's files of the tap (the tap goes away unless
        another process, QEMU, holds them too)."""
        fds, self.fds = self.fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Tap:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def create_tap(name: str, vnet_hdr: bool = True, queues: int = 1) -> Tap:
    """Create the tap ``name`` with ``queues`` queues and return its open files.

    ``vnet_hdr`` asks for virtio-net headers (offloads); it is left off when
    the kernel lacks it.  The tap is down and in no bridge:
    :func:`~corral.node.netdev.nic.configure_nic` does that.  OpExecError if
    a device of that name exists or the tap cannot be made.  A few ioctls,
    no netlink: fine on the event loop.
    """
    if not 0 < len(name) < IFNAMSIZ:
        raise ValueError(f"Invalid interface name '{name}'")
    if queues < 1:
        raise ValueError(f"A tap needs at least one queue, not {queues}")
    if _exists(name):
        # A multi-queue tap of that name would take our files as more queues.
        raise errors.OpExecError(f"Cannot create the tap '{name}': a device of that name exists")
    fds: list[int] = []
    try:
        fds.append(_open_tun())
        features = _features(fds[0])
        flags = _IFF_TAP | _IFF_NO_PI
        if vnet_hdr and features & _IFF_VNET_HDR:
            flags |= _IFF_VNET_HDR
        if queues > 1:
            if not features & _IFF_MULTI_QUEUE:
                raise errors.OpExecError(
                    "This kernel has no multi-queue taps; set virtio_net_queues to 1"
                )
            flags |= _IFF_MULTI_QUEUE
        while len(fds) < queues:
            fds.append(_open_tun())
        for fd in fds:
            _attach(fd, name, flags)
    except BaseException:
        Tap(name, tuple(fds)).close()
        raise
    return Tap(name, tuple(fds))


def _open_tun() -> int:
    try:
        return os.open(_TUN_DEVICE, os.O_RDWR | os.O_CLOEXEC)
    except OSError as err:
        raise errors.OpExecError(f"Cannot open {_TUN_DEVICE}: {err.strerror}") from None


def _features(fd: int) -> int:
    """The IFF_* flags this kernel's taps support."""
    buf = fcntl.ioctl(fd, _TUNGETFEATURES, struct.pack("I", 0))
    (flags,) = struct.unpack("I", buf)
    return int(flags)


def _attach(fd: int, name: str, flags: int) -> None:
    # The first file creates the tap; further ones (multi-queue) join it.
    try:
        fcntl.ioctl(fd, _TUNSETIFF, struct.pack(_IFREQ, name.encode(), flags))
    except OSError as err:
        raise errors.OpExecError(f"Cannot create the tap '{name}': {err.strerror}") from None


def _exists(name: str) -> bool:
    # An ioctl on a socket of the caller's network namespace (not /sys, which
    # shows the namespace it was mounted in).
    try:
        socket.if_nametoindex(name)
    except OSError:
        return False
    return True
