"""The hypervisors: Ganeti's names, and how each one Corral implements behaves,
declared once (a test checks no hypervisor name is spelled anywhere else).

What the master must know of a hypervisor is here; its parameters are in
:mod:`corral.hvparams` and the node's class running it in
:mod:`corral.node.hypervisor` (tests check the three tables agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

HT_LXC = "lxc"
HT_CHROOT = "chroot"
HT_FAKE = "fake"
HT_XEN_HVM = "xen-hvm"
HT_XEN_PVM = "xen-pvm"
HT_KVM = "kvm"

# Ganeti 3.0.2's hypervisors (constants.HYPER_TYPES), in the order its messages list them.
GANETI_HYPERVISORS = (HT_LXC, HT_CHROOT, HT_FAKE, HT_XEN_HVM, HT_XEN_PVM, HT_KVM)
# The names as a type, for the opcodes' fields (a test checks it is the same list).
HypervisorName = Literal["lxc", "chroot", "fake", "xen-hvm", "xen-pvm", "kvm"]

# What a cluster enables when init is given none.
DEFAULT_ENABLED = (HT_FAKE,)


@dataclass(frozen=True)
class HypervisorKind:
    """A hypervisor Corral implements, and what sets it apart from the others."""

    name: str
    doc: str
    # Its instances get a network port from the cluster's pool (Ganeti's
    # HTS_REQ_PORT: kvm's VNC display is the port - 5900).
    needs_port: bool = False
    # The hypervisor parameter that must allow a shutdown from inside the
    # guest before it counts as the user's (None: the cluster's setting alone).
    user_shutdown_param: str | None = None
    # A live migration copies the disks only the source node holds, while
    # the guest runs (Corral's extension; kvm: an NBD drive-mirror).
    copies_disks: bool = False
    # Its processes may run under network rules that nodes apply and verify
    # checks (kvm: QEMU's users, corral.node.netrules).
    network_rules: bool = False
    # Runs helper VMs: an instance booted from the cluster's install image
    # (design-os's install mode), whose disks appear to it as /dev/vda, ...
    helper_vm: bool = False


HYPERVISORS: Mapping[str, HypervisorKind] = {
    h.name: h
    for h in (
        HypervisorKind(HT_FAKE, "Instances are state files; nothing runs"),
        HypervisorKind(
            HT_KVM,
            "Instances are QEMU guests (KVM, or TCG without it)",
            needs_port=True,
            user_shutdown_param="user_shutdown",
            copies_disks=True,
            network_rules=True,
            helper_vm=True,
        ),
    )
}


def kind(name: str) -> HypervisorKind | None:
    """The implemented hypervisor ``name``, or None (a name Corral lacks, as an
    old configuration may hold)."""
    return HYPERVISORS.get(name)


def runs_helper_vm(name: str) -> bool:
    """Whether instances of hypervisor ``name`` can be installed in a helper VM."""
    found = HYPERVISORS.get(name)
    return found is not None and found.helper_vm


def needs_port(name: str) -> bool:
    """Whether instances of hypervisor ``name`` get a network port."""
    found = HYPERVISORS.get(name)
    return found is not None and found.needs_port
