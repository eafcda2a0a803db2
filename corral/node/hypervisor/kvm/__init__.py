"""The kvm hypervisor (QEMU): see :mod:`.hypervisor`."""

from corral.node.hypervisor.kvm.hypervisor import KvmHypervisor

__all__ = ["KvmHypervisor"]
