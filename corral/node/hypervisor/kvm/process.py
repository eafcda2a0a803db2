"""Running QEMU: its default machine, KVM's presence."""

from __future__ import annotations

import fcntl
import os

from corral import errors
from corral.node import qemu_process

KVM_DEVICE = "/dev/kvm"
_KVM_GET_API_VERSION = 0xAE00
_KVM_API_VERSION = 12
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


async def default_machine(kvm_path: str) -> str:
    """The machine QEMU picks by default (fixed at start, as Ganeti does, so a
    migration target runs the same machine)."""
    machine = _machines.get(kvm_path)
    if machine is None:
        code, out = await qemu_process.output([kvm_path, "-machine", "help"])
        defaults = [line.split()[0] for line in out.splitlines() if line.endswith("(default)")]
        if code != 0 or not defaults:
            raise errors.OpExecError(f"Cannot find the default machine of {kvm_path}: {out[-500:]}")
        machine = _machines[kvm_path] = defaults[0]
    return machine
