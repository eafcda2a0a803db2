"""A clean Debian 12 root for the package's test, and commands run chrooted in it.

The base root is Debian's minimal system (``debootstrap --variant=minbase``
from the mirror apt uses here, debootstrap itself from its unpacked package
as for the test guests) with apt's lists, cached in ``.cache/debian-root/``
as a tarball under a hash of its inputs: a second run unpacks it (seconds)
instead of downloading it again.  The .debs apt fetches into a root are kept
in ``.cache/debian-root/archives`` (bind-mounted on its
``/var/cache/apt/archives``) for the same reason.

Commands run chrooted with /proc, /dev and /sys mounted in a mount namespace
of their own, so nothing stays mounted on the host: apt with the host's
network (:meth:`DebianRoot.apt`), the cluster in a network namespace with
only loopback (:class:`Namespace`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.helpers import debian_guest, guest

CACHE = guest.REPO / ".cache" / "debian-root"
ARCHIVES = CACHE / "archives"
VARIANT = "minbase"
# Bump when the way the base root is made changes (the hash covers the rest).
BUILD_VERSION = "2"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# /proc, /dev and /sys of the root, mounted by the shell that runs "$@" after them.
_MOUNTS = (
    'root="$1"; shift; mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev"'
    ' && mount -t sysfs sysfs "$root/sys"'
)


def _clean_env() -> dict[str, str]:
    return {"PATH": PATH, "LC_ALL": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"}


def base_tarball() -> Path:
    """The cached tarball of the base root, made once (a minute: a download)."""
    debootstrap = guest.package(debian_guest.DEBOOTSTRAP_PKG)
    mirror = debian_guest.debian_mirror()
    parts = (BUILD_VERSION, debootstrap.sha256, mirror, debian_guest.SUITE, VARIANT)
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    final = CACHE / f"{debian_guest.SUITE}-{VARIANT}-{key}.tar.gz"
    if not final.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".base-", dir=CACHE) as tmp:
            root = Path(tmp) / "root"
            _debootstrap(root, mirror, Path(tmp) / "debootstrap.log")
            DebianRoot(root).apt("update", "-q")
            for binary_cache in (root / "var" / "cache" / "apt").glob("*.bin"):
                binary_cache.unlink()  # apt makes them again from the lists
            tarball = Path(tmp) / "base.tar.gz"
            subprocess.run(
                ["tar", "-C", str(root), "--numeric-owner", "-czf", str(tarball), "."],
                check=True,
            )
            tarball.rename(final)  # whole, or not at all
    return final


def _debootstrap(root: Path, mirror: str, log: Path) -> None:
    unpacked = guest.unpack(guest.package(debian_guest.DEBOOTSTRAP_PKG))
    env = {
        **_clean_env(),
        "PATH": f"{unpacked / 'usr' / 'sbin'}:{PATH}",
        "DEBOOTSTRAP_DIR": str(unpacked / "usr" / "share" / "debootstrap"),
    }
    command = ["debootstrap", f"--variant={VARIANT}", "--arch=amd64",
               debian_guest.SUITE, str(root), mirror]  # fmt: skip
    with log.open("wb") as out:
        done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"debootstrap failed ({done.returncode}): {log.read_text()[-3000:]}")


class DebianRoot:
    """A Debian root directory and commands chrooted in it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def unpack(cls, into: Path) -> DebianRoot:
        """A new root in ``into`` (which must not exist) from the cached base."""
        into.mkdir()
        subprocess.run(
            ["tar", "-C", str(into), "--numeric-owner", "-xpzf", str(base_tarball())], check=True
        )
        return cls(into)

    def path(self, inside: str) -> Path:
        """The host's path of ``inside`` (an absolute path in the root)."""
        return self.root / inside.lstrip("/")

    def chroot(self, *argv: str) -> str:
        """``argv`` chrooted in the root (no namespaces: dpkg's queries); its output."""
        done = subprocess.run(["chroot", str(self.root), *argv], env=_clean_env(),
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout

    def apt(self, *args: str) -> str:
        """``apt-get args`` in the root with the host's network (and resolver);
        the fetched packages kept in ARCHIVES.  Its output."""
        (ARCHIVES / "partial").mkdir(parents=True, exist_ok=True)
        resolv = self.path("/etc/resolv.conf")
        shutil.copy("/etc/resolv.conf", resolv)
        script = (
            f'{_MOUNTS} && mount --bind "$0" "$root/var/cache/apt/archives"'
            ' && exec chroot "$root" "$@"'
        )
        # One apt at a time on the shared ARCHIVES (apt locks it and fails at
        # once, not waiting, when another run of the tests holds it).
        try:
            with (CACHE / "apt.lock").open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                done = subprocess.run(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                     str(ARCHIVES), str(self.root), "apt-get", "-y", *args],
                    env=_clean_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                    check=False,
                )  # fmt: skip
        finally:
            resolv.unlink(missing_ok=True)  # the cluster's names come from /etc/hosts
        if done.returncode != 0:
            raise AssertionError(f"apt-get {' '.join(args)}: {done.stdout[-3000:]}{done.stderr}")
        return done.stdout


class Namespace:
    """Network and mount namespaces with only loopback, the root's /proc,
    /dev and /sys mounted in them, held by a process of ours (``pid``) until
    :meth:`close`; commands enter them and chroot into the root."""

    def __init__(self, root: DebianRoot) -> None:
        self.root = root
        script = f"{_MOUNTS} && ip link set lo up && echo ready && exec sleep infinity"
        self._holder = subprocess.Popen(
            ["unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", script,
             "holder", str(root.root)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._holder.stdout is not None
        if self._holder.stdout.readline().strip() != "ready":
            self._holder.kill()
            raise RuntimeError("the namespace holder did not start")
        self.pid = self._holder.pid

    def command(self, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        """``argv`` run in the namespaces, chrooted, with ``env`` only."""
        variables = [f"{k}={v}" for k, v in (env or {"PATH": PATH, "LC_ALL": "C.UTF-8"}).items()]
        return ["nsenter", f"--target={self.pid}", "--net", "--mount", "--",
                "chroot", str(self.root.root), "env", "-i", *variables, *argv]  # fmt: skip

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv``; its result (an AssertionError with its output if it failed)."""
        done = subprocess.run(
            self.command(list(argv)), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} ({done.returncode}): {done.stdout}{done.stderr}"
            )
        return done

    def close(self) -> None:
        """End the holder: the namespaces and their mounts go with the last process."""
        if self._holder.poll() is None:
            os.kill(self._holder.pid, signal.SIGKILL)
        self._holder.wait()
        if self._holder.stdout is not None:
            self._holder.stdout.close()
