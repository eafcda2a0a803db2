"""Connecting a network to a node group (with the NIC mode, link and VLAN its
NICs get there), and disconnecting it; both refuse while instances of the
group have NICs the change would strand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.cmdlib.group import group_instances
from corral.netpool import network_pool
from corral.objects import NIC, Instance, Network, NodeGroup
from corral.opcodes import network as opn


class _GroupNetworkLU(LogicalUnit[Any]):
    """Finds the network and the group; locks the group and (shared) its
    instances, checked again once the group is locked."""

    HTYPE = C.HTYPE_NETWORK
    REQ_BGL = False
    network: Network
    group: NodeGroup

    def expand_names(self) -> None:
        self.network = self.expand(Network, self.op.network_name)
        self.group = self.expand(NodeGroup, self.op.group_name)

    def check_instances(self) -> bool:
        """Whether the unit looks at the group's instances."""
        return True

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODEGROUP] = [self.group.uuid]
        self.needed_locks[C.LEVEL_INSTANCE] = []
        self.share_locks[C.LEVEL_INSTANCE] = True

    def declare_level(self, level: str) -> None:
        if level == C.LEVEL_INSTANCE and self.check_instances():
            # Optimistically: check_prereq checks them again under the group's lock.
            self.locked = self._instance_names()
            self.needed_locks[C.LEVEL_INSTANCE] = list(self.locked)

    def _instance_names(self) -> list[str]:
        return sorted(i.name for i in group_instances(self.cfg, self.group))

    def current_group(self) -> NodeGroup:
        """The group under its lock, its instances still those locked."""
        group = self.cfg.lookup(NodeGroup, self.group.uuid)
        self.group = group
        if self.check_instances():
            current = self._instance_names()
            if current != self.locked:
                raise errors.OpPrereqError(
                    f"Instances in node group '{group.name}' changed since locks were acquired,"
                    f" wanted '{', '.join(current)}', have '{', '.join(self.locked)}';"
                    " retry the operation",
                    C.ECODE_STATE,
                )
        return group

    def check_conflicts(self, conflicts: Callable[[NIC], bool], action: str) -> None:
        """Refuse if NICs of the group's instances would conflict (Ganeti's words)."""
        found: list[tuple[str, list[str]]] = []
        for name in self.locked:
            inst = self.cfg.find(Instance, name)
            nics = [] if inst is None else inst.nics
            bad = [f"nic{idx}/{nic.ip}" for idx, nic in enumerate(nics) if conflicts(nic)]
            if bad:
                found.append((name, bad))
        if not found:
            return
        used = ", ".join(f"{name}: {', '.join(nics)}" for name, nics in found)
        self.warn(
            f"IP addresses from network '{self.op.network_name}', which is about to {action}"
            f" node group '{self.group.name}', are in use: {used}"
        )
        raise errors.OpPrereqError(
            "Conflicting IP addresses found;  remove/modify the corresponding network interfaces",
            C.ECODE_STATE,
        )

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        members = [n.uuid for n in self.cfg.nodes() if n.group == self.group.uuid]
        return members, members


class LUNetworkConnect(_GroupNetworkLU):
    """Connects the network to the group (a warning if it is already)."""

    OPCODE = opn.OpNetworkConnect
    HPATH = "network-connect"

    def check_instances(self) -> bool:
        return bool(self.op.conflicts_check)

    def declare_locks(self) -> None:
        super().declare_locks()
        if self.op.conflicts_check:
            self.needed_locks[C.LEVEL_NETWORK] = [self.network.uuid]
            self.share_locks[C.LEVEL_NETWORK] = True

    async def check_prereq(self) -> None:
        op = self.op
        group = self.current_group()
        self.netparams = {"mode": op.network_mode, "link": op.network_link,
                          "vlan": op.network_vlan}  # fmt: skip
        self.connected = self.network.uuid in group.networks
        if self.connected:
            self.warn(f"Network '{op.network_name}' is already mapped to group '{group.name}'")
        elif op.conflicts_check:
            pool = network_pool(self.cfg, self.cfg.lookup(Network, self.network.uuid))
            self.check_conflicts(lambda nic: pool.contains(nic.ip), "connect to")

    def build_hooks_env(self) -> dict[str, Any]:
        op = self.op
        return {"GROUP_NAME": op.group_name, "GROUP_NETWORK_MODE": op.network_mode,
                "GROUP_NETWORK_LINK": op.network_link,
                "GROUP_NETWORK_VLAN": op.network_vlan}  # fmt: skip

    async def exec(self) -> Any:
        if not self.connected:
            group = self.group.copy_for_update()
            assert isinstance(group, NodeGroup)
            group.networks[self.network.uuid] = self.netparams
            self.tx.update(group)
        return None


class LUNetworkDisconnect(_GroupNetworkLU):
    """Disconnects the network from the group (a warning if it is not)."""

    OPCODE = opn.OpNetworkDisconnect
    HPATH = "network-disconnect"

    async def check_prereq(self) -> None:
        group = self.current_group()
        self.netparams: dict[str, Any] | None = group.networks.get(self.network.uuid)
        if self.netparams is None:
            self.warn(f"Network '{self.op.network_name}' is not mapped to group '{group.name}'")
        else:
            uuid = self.network.uuid
            self.check_conflicts(lambda nic: nic.network == uuid, "disconnect from")

    def build_hooks_env(self) -> dict[str, Any]:
        env: dict[str, Any] = {"GROUP_NAME": self.op.group_name}
        if self.netparams is not None:
            env.update({f"GROUP_NETWORK_{key.upper()}": self.netparams.get(key)
                        for key in ("mode", "link", "vlan")})  # fmt: skip
        return env

    async def exec(self) -> Any:
        if self.netparams is not None:
            group = self.group.copy_for_update()
            assert isinstance(group, NodeGroup)
            del group.networks[self.network.uuid]
            self.tx.update(group)
        return None
