"""Where the kvm hypervisor keeps its per-instance state, and the runtime file.

Ganeti's layout under ``<run dir>/kvm-hypervisor/``: ``pid/<name>`` (QEMU's
pidfile), ``uid/<name>`` (the uid taken from the pool), ``ctrl/<name>.qmp``
and ``ctrl/<name>.serial`` (QEMU's sockets), ``ctrl/<name>.shutdown`` (the
guest powered itself off), ``ctrl/<name>.cidata.iso`` (its config drive),
``conf/<name>.runtime`` and ``chroot/<name>/``; for a QEMU in namespaces of its
own, ``nsroot/<name>/`` (where its file system is mounted, in its mount
namespace only) and ``ctrl/<name>.log`` (its output).
Every directory is root's alone (0700): the sockets are reachable by nobody
else.  The runtime file is what a restarted noded (or a migration) needs to
find and understand a running guest.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from corral import errors
from corral.fileio import atomic_write

SUBDIRS = ("pid", "uid", "ctrl", "conf", "chroot", "nsroot")
_DIR_MODE = 0o700


@dataclass
class Runtime:
    """One running instance, as recorded when it started."""

    name: str
    argv: list[str]
    spec: dict[str, Any]  # the instance descriptor as the master sent it
    pid: int
    pid_start: int  # the process's start time (/proc stat field 22): pid reuse
    started: float  # time.time() at start
    memory: int
    vcpus: int
    taps: list[str] = field(default_factory=list)
    uid: int | None = None
    chroot: str | None = None
    rules_uid: int | None = None  # the uid the network rules cover (corral.node.netrules)
    namespaces: bool = False  # in namespaces of its own (.isolation)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Runtime:
        return cls(**json.loads(data))


class Layout:
    """The paths of one node's kvm state."""

    def __init__(self, run_dir: Path) -> None:
        self.base = run_dir / "kvm-hypervisor"

    def ensure(self) -> None:
        """Create the directories, root's alone."""
        for sub in ("", *SUBDIRS):
            path = self.base / sub
            path.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
            os.chmod(path, _DIR_MODE)

    def pidfile(self, name: str) -> Path:
        return self.base / "pid" / _checked(name)

    def uidfile(self, name: str) -> Path:
        return self.base / "uid" / _checked(name)

    def qmp(self, name: str) -> Path:
        return self.base / "ctrl" / f"{_checked(name)}.qmp"

    def serial(self, name: str) -> Path:
        return self.base / "ctrl" / f"{_checked(name)}.serial"

    def shutdown_mark(self, name: str) -> Path:
        return self.base / "ctrl" / f"{_checked(name)}.shutdown"

    def config_drive(self, name: str) -> Path:
        return self.base / "ctrl" / f"{_checked(name)}.cidata.iso"

    def runtime_file(self, name: str) -> Path:
        return self.base / "conf" / f"{_checked(name)}.runtime"

    def chroot(self, name: str) -> Path:
        return self.base / "chroot" / _checked(name)

    def nsroot(self, name: str) -> Path:
        return self.base / "nsroot" / _checked(name)

    def log(self, name: str) -> Path:
        return self.base / "ctrl" / f"{_checked(name)}.log"

    def names(self) -> list[str]:
        """Instances with a runtime file."""
        try:
            entries = os.listdir(self.base / "conf")
        except FileNotFoundError:
            return []
        return sorted(e.removesuffix(".runtime") for e in entries if e.endswith(".runtime"))

    def user_shutdowns(self) -> list[str]:
        """Instances whose guest powered itself off."""
        try:
            entries = os.listdir(self.base / "ctrl")
        except FileNotFoundError:
            return []
        return sorted(e.removesuffix(".shutdown") for e in entries if e.endswith(".shutdown"))

    def write_runtime(self, runtime: Runtime) -> None:
        atomic_write(self.runtime_file(runtime.name), runtime.to_json(), mode=0o600)

    def read_runtime(self, name: str) -> Runtime | None:
        """The runtime file of ``name``; None when missing or unreadable."""
        try:
            return Runtime.from_json(self.runtime_file(name).read_bytes())
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            return None  # half-written by a crash: the instance is treated as gone

    def remove(self, name: str) -> None:
        """Everything of ``name`` but its user-shutdown mark.  The runtime
        file goes last: while it is there the instance is known, so a crash
        halfway leaves it to be cleaned up again, and once it is gone nothing
        else of the instance is left."""
        for path in (
            self.pidfile(name),
            self.uidfile(name),
            self.qmp(name),
            self.serial(name),
            self.config_drive(name),
            self.log(name),
        ):
            path.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.nsroot(name).rmdir()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.chroot(name))
        self.runtime_file(name).unlink(missing_ok=True)


def _checked(name: str) -> str:
    if not name or "/" in name or name.startswith("."):
        raise errors.OpExecError(f"Invalid instance name '{name}'")
    return name


def _stat(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat's fields from the state on (field 3), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces: split after its ")".
    return data[data.rindex(b")") + 2 :].split()


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), None if gone."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def alive(runtime: Runtime) -> bool:
    """Whether the QEMU recorded in ``runtime`` still runs: not a reused pid,
    not a zombie (an exited QEMU until init reaps it)."""
    fields = _stat(runtime.pid)
    return (
        fields is not None
        and fields[0] not in (b"Z", b"X")
        and int(fields[19]) == runtime.pid_start
    )
