"""The base of logical units that act on one existing instance."""

from __future__ import annotations

from typing import Any, TypeVar

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_utils as U
from corral.cmdlib.base import LogicalUnit
from corral.objects import ADMIN_UP, Instance, Node
from corral.rpc.declare import Request
from corral.rpc.wire import InstanceWire

R = TypeVar("R")

# A node level's value meaning "the instance's nodes, read once its lock is held".
INSTANCE_NODES = "__instance_nodes__"


class InstanceLU(LogicalUnit[Any]):
    """Looks up ``op.instance_name``, locks it and its nodes, builds its hooks env."""

    HTYPE = C.HTYPE_INSTANCE
    REQ_BGL = False
    # Whether the unit changes what its nodes hold (memory use: node-res exclusive).
    NEEDS_NODE_RES = False

    instance: Instance

    def expand_names(self) -> None:
        self.instance = self.expand(Instance, self.op.instance_name)
        self.op.instance_uuid = self.instance.uuid

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = [self.instance.name]
        self.needed_locks[C.LEVEL_NODE] = INSTANCE_NODES
        self.share_locks[C.LEVEL_NODE] = True
        if self.NEEDS_NODE_RES:
            self.needed_locks[C.LEVEL_NODE_RES] = INSTANCE_NODES

    def declare_level(self, level: str) -> None:
        # The nodes are read under the instance's lock: a failover or migration
        # that ran while this job waited has moved the instance.
        if self.needed_locks.get(level) == INSTANCE_NODES:
            self.needed_locks[level] = list(dict.fromkeys(self.node_locks()))

    def node_locks(self) -> list[str]:
        """The nodes :data:`INSTANCE_NODES` stands for (the instance's lock held)."""
        return list(self.current_instance().all_nodes)

    def current_instance(self) -> Instance:
        """The instance as committed now (the unit holds its lock)."""
        current = self.cfg.get(Instance, self.instance.uuid)
        if current is None:
            raise errors.OpPrereqError(
                f"Instance '{self.instance.name}' was removed", C.ECODE_NOENT
            )
        return current

    async def check_prereq(self) -> None:
        self.instance = self.current_instance()

    @property
    def pnode(self) -> Node:
        return self.cfg.lookup(Node, self.instance.primary_node)

    def build_hooks_env(self) -> dict[str, Any]:
        # The post phase (after the commit) shows the instance as the unit left
        # it, e.g. its new admin state, as Ganeti rebuilds it from the updated
        # object; a removed instance is shown as it was.
        current = self.cfg.get(Instance, self.instance.uuid)
        return U.instance_hook_env(self.cfg, current or self.instance)

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.master_node.uuid, *self.instance.all_nodes]
        return nodes, nodes

    def descriptor(self, inst: Instance | None = None) -> InstanceWire:
        return U.instance_descriptor(self.cfg, inst or self.instance)

    def start_descriptor(self, inst: Instance | None = None) -> InstanceWire:
        """The descriptor a start takes (:func:`U.start_descriptor`)."""
        return U.start_descriptor(self.cfg, inst or self.instance, self.ctx.hide)

    async def node_call(self, request: Request[R], what: str) -> R:
        """Call the primary node; NodeCallError ("<what> <instance> on node
        <node>: <why>") on failure."""
        node = self.pnode
        return await self.master.rpc.run(
            node, request, f"{what} {self.instance.name} on node {node.name}"
        )

    async def is_running(self) -> bool:
        """Whether the instance runs on its primary node (one its guest stopped
        itself, reported until it is cleaned up, does not)."""
        running = await U.running_instances(self, self.pnode, [self.instance.hypervisor])
        info = running.get(self.instance.name)
        return info is not None and info.get("state") != C.HV_STATE_SHUTDOWN

    async def check_state(self, allowed: tuple[str, ...], msg: str) -> None:
        """Ganeti's CheckInstanceState: refuse an admin state outside ``allowed``
        and, when "up" is not allowed, an instance that runs (not checked, with a
        warning, when its primary node is offline)."""
        inst = self.instance
        if inst.admin_state not in allowed:
            raise errors.OpPrereqError(
                f"Instance '{inst.name}' is marked to be {inst.admin_state}, {msg}",
                C.ECODE_STATE,
            )
        if ADMIN_UP in allowed:
            return
        if self.pnode.offline:
            self.warn("Primary node offline, ignoring check that instance is down")
        elif await self.is_running():
            raise errors.OpPrereqError(f"Instance {inst.name} is running, {msg}", C.ECODE_STATE)

    def updated(self) -> Instance:
        """A copy of the instance to change in this unit's transaction."""
        copy = self.instance.copy_for_update()
        assert isinstance(copy, Instance)
        return copy
