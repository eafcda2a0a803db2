"""Start QEMU in namespaces of its own (``use_namespaces``): a program, run by
noded as ``python -I -S .../nsexec.py PLAN`` (JSON: ``root``, ``binds``,
``log``, ``argv``); it needs nothing but the standard library.

It unshares the mount, PID, IPC, UTS and network namespaces, builds QEMU's
file system (a read-only tmpfs with only what the plan binds in, plus
``/usr``), forks QEMU as PID 1 of the new PID namespace, prints QEMU's pid
(as the node sees it) and exits.  Nothing else stays:
the namespaces live as long as QEMU, and go with it (also on SIGKILL).

A program of its own, not code run in noded after fork: noded is a
multithreaded asyncio process, and Python 3.11 has no ``os.unshare``
(libc's ``unshare``, ``mount`` and ``pivot_root`` are called through ctypes).
util-linux's ``unshare --fork`` would keep a process of its own outside,
waiting for QEMU, and cannot build the file system.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
# glibc has no pivot_root wrapper: the system call's number per machine.
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
# The top-level names merged-/usr systems make symlinks into /usr.
USR_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HOSTNAME = b"qemu"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def _mountpoint(target: str, source: str) -> None:
    """An empty directory or file at ``target`` to bind ``source`` on."""
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.lexists(target):
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))


def _bind(root: str, path: str, writable: bool) -> None:
    target = root + path
    _mountpoint(target, path)
    _mount(path, target, None, MS_BIND)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if writable else MS_RDONLY)
    _mount(None, target, None, flags)


def build_root(root: str, binds: list[tuple[str, bool]]) -> None:
    """QEMU's file system at ``root`` (in the new mount namespace): a tmpfs,
    ``/usr`` read-only, the top-level links into it, and ``binds`` (path,
    writable) at their own paths."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing leaks out, nothing in
    os.makedirs(root, mode=0o700, exist_ok=True)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    _bind(root, "/usr", False)
    for link in USR_LINKS:
        if os.path.islink(link):
            os.symlink(os.readlink(link), root + link)
        elif os.path.isdir(link):
            _bind(root, link, False)
    for path, writable in sorted(binds):
        _bind(root, path, writable)
    os.makedirs(root + "/proc", mode=0o555)
    os.chdir(root)
    _check(_libc.syscall(PIVOT_ROOT[platform.machine()], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount of the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _qemu(argv: list[str], log: int) -> None:
    """In the child, PID 1 of the new namespace: /proc, then QEMU."""
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.execv(argv[0], argv)
    except OSError as err:
        os.write(log, f"Cannot start QEMU in its namespaces: {err}\n".encode())
    os._exit(127)


def main(plan: dict[str, Any]) -> None:
    """Unshare, build the file system, fork QEMU; print its pid (as the node
    sees it) and exit."""
    os.setsid()  # QEMU is no part of noded's session
    # QEMU's output goes to its log, opened before the root changes.
    log = os.open(plan["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    _check(_libc.unshare(NAMESPACES), "unshare")
    build_root(plan["root"], [(path, bool(rw)) for path, rw in plan["binds"]])
    pid = os.fork()
    if pid == 0:
        _qemu(plan["argv"], log)
    print(pid, flush=True)
    os._exit(0)


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except OSError as err:
        print(f"Cannot set up QEMU's namespaces: {err}", file=sys.stderr)
        sys.exit(1)
