"""QEMU in namespaces of its own (kvm's ``use_namespaces``): noded's side.

What QEMU sees (:func:`binds`): ``/usr`` read-only (its libraries,
firmware and ROMs), the few devices it uses, and the instance's own files:
its disks, kernel and initrd, VNC's certificates, config drive and chroot.
No node file else, no network interface (its taps are open descriptors
already), no other process.  Its QMP and serial sockets are bound here, by
noded, and handed in as descriptors: they stay where they always are, for
noded and ``gnt-instance console``; so is its VNC's listener
(:mod:`.vnc_listener`).  :mod:`.nsexec` does the unsharing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from corral import errors
from corral.node.hypervisor.kvm import nsexec
from corral.node.hypervisor.spec import InstanceSpec

# Devices QEMU may open; those missing on the node are left out.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/kvm")
VHOST_NET = "/dev/vhost-net"
# The dynamic linker's cache (without it, it still finds the libraries).
LD_CACHE = "/etc/ld.so.cache"
_USR = "/usr/"
_LOG_LIMIT = 4000
# Run as a script, isolated and without site: as a module its packages'
# imports (the whole hypervisor) would add 0.3 to 1 s to every start.
_NSEXEC = (sys.executable, "-I", "-S", nsexec.__file__)


def binds(spec: InstanceSpec, own: Sequence[tuple[Path, bool]]) -> list[tuple[str, bool]]:
    """``(path, writable)`` for each file QEMU needs besides ``/usr``;
    ``own``: the node's files of this start (config drive, chroot, ...)."""
    hvp = spec.hvparams
    wanted: dict[str, bool] = {}
    for device in DEVICES:
        wanted[device] = True
    if hvp.get("vhost_net"):
        wanted[VHOST_NET] = True
    wanted[LD_CACHE] = False
    for key in ("kvm_path", "kernel_path", "initrd_path", "cdrom_image_path"):
        value = str(hvp.get(key) or "")
        if value.startswith("/"):
            wanted[value] = False
    if hvp.get("vnc_tls") and hvp.get("vnc_x509_path"):
        wanted[str(hvp["vnc_x509_path"])] = False  # QEMU reads it at its start
    if hvp.get("mem_path"):
        wanted[str(hvp["mem_path"])] = True
    for disk in spec.disks:
        wanted[str(disk.path)] = disk.mode == "rw"
    for path, writable in own:
        wanted[str(path)] = writable
    return sorted(
        (path, rw)
        for path, rw in wanted.items()
        if not path.startswith(_USR) and os.path.lexists(path)
    )


@contextlib.contextmanager
def bound_sockets(qmp: Path, serial: Path | None) -> Iterator[tuple[int, int | None]]:
    """QEMU's QMP and serial sockets, listening at their paths (the node's
    descriptors are closed after the block: QEMU keeps its own)."""
    opened: list[socket.socket] = []
    try:
        for path in (qmp, serial):
            if path is None:
                continue
            path.unlink(missing_ok=True)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            opened.append(sock)
            sock.bind(str(path))
            os.chmod(path, 0o600)
            sock.listen(1)
        yield opened[0].fileno(), opened[1].fileno() if len(opened) > 1 else None
    finally:
        for sock in opened:
            sock.close()


async def start(
    name: str, root: Path, log: Path, file_binds: list[tuple[str, bool]], argv: Sequence[str],
    pass_fds: Sequence[int],
) -> int:  # fmt: skip
    """Start ``argv`` in new namespaces; QEMU's pid (OpExecError with what
    went wrong if it could not be set up)."""
    plan = {"root": str(root), "binds": file_binds, "log": str(log), "argv": list(argv)}
    proc = await asyncio.create_subprocess_exec(
        *_NSEXEC, json.dumps(plan),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=pass_fds,
    )  # fmt: skip
    out, err = await proc.communicate()
    if proc.returncode != 0 or not out.strip().isdigit():
        text = err.decode(errors="replace").strip()[-_LOG_LIMIT:] or "no output"
        raise errors.OpExecError(f"Failed to start instance {name} in its namespaces: {text}")
    return int(out)


def output(log: Path) -> str:
    """The end of QEMU's output (why it stopped at its start)."""
    try:
        text = log.read_text(errors="replace").strip()
    except FileNotFoundError:
        text = ""
    return text[-_LOG_LIMIT:] or "no output"
