"""Running QEMU: starting it daemonized, its default machine, KVM's presence."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
from collections.abc import Sequence

from corral import errors

KVM_DEVICE = "/dev/kvm"
_KVM_GET_API_VERSION = 0xAE00
_KVM_API_VERSION = 12
# QEMU's own error output can be long (a usage text): the error keeps its end.
_STDERR_LIMIT = 4000
_machines: dict[str, str] = {}


def kvm_works() -> bool:
    """Whether this node can run KVM guests (/dev/kvm opens and answers)."""
    try:
        fd = os.open(KVM_DEVICE, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return fcntl.ioctl(fd, _KVM_GET_API_VERSION) == _KVM_API_VERSION
    except OSError:
        return False
    finally:
        os.close(fd)


async def _output(argv: Sequence[str], pass_fds: Sequence[int] = ()) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        pass_fds=pass_fds,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")


async def default_machine(kvm_path: str) -> str:
    """The machine QEMU picks by default (fixed at start, as Ganeti does, so a
    migration target runs the same machine)."""
    machine = _machines.get(kvm_path)
    if machine is None:
        code, out = await _output([kvm_path, "-machine", "help"])
        defaults = [line.split()[0] for line in out.splitlines() if line.endswith("(default)")]
        if code != 0 or not defaults:
            raise errors.OpExecError(f"Cannot find the default machine of {kvm_path}: {out[-500:]}")
        machine = _machines[kvm_path] = defaults[0]
    return machine


async def run_daemonized(name: str, argv: Sequence[str], pass_fds: Sequence[int]) -> None:
    """Run QEMU with ``-daemonize``: returns once the guest's process is set up
    (QEMU's parent exits then); OpExecError carrying QEMU's output if not."""
    code, out = await _output(argv, pass_fds)
    if code != 0:
        text = out.strip()[-_STDERR_LIMIT:] or "no output"
        raise errors.OpExecError(
            f"Failed to start instance {name}: QEMU exited with code {code}: {text}"
        )


def read_pid(pidfile: str) -> int | None:
    """The pid in QEMU's pidfile, None without one."""
    try:
        with open(pidfile) as handle:
            return int(handle.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def kill(pid: int) -> None:
    """SIGKILL ``pid`` (gone already is fine)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
