"""Logical units for one node's flags and parameters, its storage and its power
(``gnt-node modify``, ``volumes``, ``list-storage``, ``modify-storage``,
``repair-storage``, ``powercycle``).  Adding and removing nodes: H1's modules;
out-of-band power: :mod:`corral.cmdlib.oob`."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.cmdlib.node_roles import (
    FLAGS,
    Role,
    candidate_stats,
    check_secondary_ip,
    fill_candidate_pool,
)
from corral.cmdlib.oob import supports_oob
from corral.objects import Node
from corral.opcodes import node as opn
from corral.rpc.calls_node import version
from corral.services import distribution
from corral.services.ndparams import check_not_global, updated_ndparams


class _OneNodeLU(LogicalUnit[Any]):
    """Finds ``op.node_name`` (or its uuid) and locks that node."""

    REQ_BGL = False
    node: Node

    def expand_names(self) -> None:
        self.node = self.expand(Node, self.op.node_uuid or self.op.node_name)
        self.op.node_uuid = self.node.uuid
        self.op.node_name = self.node.name

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = [self.node.uuid]

    def current_node(self) -> Node:
        node = self.cfg.get(Node, self.node.uuid)
        if node is None:
            raise errors.OpPrereqError(f"Node '{self.node.name}' was removed", C.ECODE_NOENT)
        return node


class LUNodeSetParams(_OneNodeLU):
    """Ganeti's rules: at most one of master candidate, drained, offline; the
    master's role changes only by a master failover; the candidate pool stays
    full (``auto_promote`` promotes others, else a demotion is refused)."""

    OPCODE = opn.OpNodeSetParams
    HPATH = "node-modify"
    HTYPE = C.HTYPE_NODE

    def check_arguments(self) -> None:
        op = self.op
        mods = [op.offline, op.master_candidate, op.drained, op.master_capable, op.vm_capable,
                op.secondary_ip, op.ndparams, op.hv_state, op.disk_state]  # fmt: skip
        if mods.count(None) == len(mods):
            raise errors.OpPrereqError("Please pass at least one modification", C.ECODE_INVAL)
        if [op.offline, op.master_candidate, op.drained].count(True) > 1:
            raise errors.OpPrereqError(
                "Can't set the node into more than one state at the same time", C.ECODE_INVAL
            )
        self.might_demote = (
            op.master_candidate is False
            or op.offline is True
            or op.drained is True
            or op.master_capable is False
        )
        if op.secondary_ip is not None:
            check_secondary_ip(op.secondary_ip)
        self.lock_all = op.auto_promote and self.might_demote

    def declare_locks(self) -> None:
        nodes: list[str] | str = ALL_SET if self.lock_all else [self.node.uuid]
        self.needed_locks[C.LEVEL_NODE] = nodes
        self.needed_locks[C.LEVEL_NODE_RES] = nodes

    async def check_prereq(self) -> None:
        node = self.node = self.current_node()
        self._check_allowed(node)
        self.old_role = Role.of(node)
        for flag in FLAGS:
            if getattr(self.op, flag) is False and getattr(node, flag) is False:
                self.log_info(f"Ignoring request to unset flag {flag}, already unset")
                setattr(self.op, flag, None)
        self._check_power(node)
        self._promote_or_demote(node)
        self.new_role = self._new_role()
        if self.old_role is Role.OFFLINE and self.new_role is not Role.OFFLINE:
            await self._check_back_online(node)
        if self.op.ndparams:
            check_not_global(self.op.ndparams)
            self.new_ndparams = updated_ndparams(node.ndparams, self.op.ndparams)

    def _check_allowed(self, node: Node) -> None:
        op = self.op
        is_master = node.uuid == self.cfg.cluster.master_node
        if is_master and any(getattr(op, flag) is not None for flag in FLAGS):
            raise errors.OpPrereqError(
                "The master role can be changed only via master-failover", C.ECODE_INVAL
            )
        if op.master_candidate and not node.master_capable:
            raise errors.OpPrereqError(
                f"Node {node.name} is not master capable, cannot make it a master candidate",
                C.ECODE_STATE,
            )
        if op.vm_capable is False and any(
            node.uuid in inst.all_nodes for inst in self.cfg.instances()
        ):
            raise errors.OpPrereqError(
                f"Node {node.name} hosts instances, cannot unset the vm_capable flag",
                C.ECODE_STATE,
            )
        if node.master_candidate and self.might_demote and not self.lock_all:
            remaining, should = candidate_stats(self.cfg, [node.uuid])[:2]
            if remaining < should:
                raise errors.OpPrereqError(
                    "Not enough master candidates, please pass auto promote option to allow"
                    " promotion (--auto-promote or RAPI auto_promote=True)",
                    C.ECODE_STATE,
                )
        if op.secondary_ip is not None and op.secondary_ip != node.secondary_ip:
            raise errors.OpPrereqError(
                f"Changing the secondary IP of node {node.name} (now {node.secondary_ip}) is"
                " not supported by Corral yet; leave it unset",
                C.ECODE_INVAL,
            )

    def _check_power(self, node: Node) -> None:
        """Only a node with an out-of-band program has a power state to set, and
        such a node leaves the offline state only once it is on (Ganeti's rules)."""
        if supports_oob(self.cfg, node):
            if self.op.offline is False and not (node.powered or self.op.powered is True):
                raise errors.OpPrereqError(
                    f"Node {node.name} needs to be turned on before its offline status can be"
                    " reset",
                    C.ECODE_STATE,
                )
        elif self.op.powered is not None:
            raise errors.OpPrereqError(
                f"Unable to change powered state for node {node.name} as it does not support"
                " out-of-band handling",
                C.ECODE_STATE,
            )

    def _promote_or_demote(self, node: Node) -> None:
        """A node coming back (undrained, onlined, made master capable) becomes a
        candidate if the pool lacks one; one no longer master capable leaves it."""
        op = self.op
        if (
            op.drained is False
            or op.offline is False
            or (op.master_capable and not node.master_capable)
        ):
            now, should = candidate_stats(self.cfg, [])[:2]
            if now < min(should + 1, self.cfg.cluster.candidate_pool_size):
                op.master_candidate = True
                self.log_info("Auto-promoting node to master candidate")
        if op.master_capable is False and node.master_candidate:
            if node.uuid == self.cfg.cluster.master_node:
                raise errors.OpPrereqError("Master must remain master capable", C.ECODE_STATE)
            self.log_info("Demoting from master candidate")
            op.master_candidate = False

    def _new_role(self) -> Role:
        op = self.op
        if op.master_candidate:
            return Role.CANDIDATE
        if op.drained:
            return Role.DRAINED
        if op.offline:
            return Role.OFFLINE
        if False in (op.master_candidate, op.drained, op.offline):
            return Role.REGULAR  # the one flag set is being unset
        return self.old_role

    async def _check_back_online(self, node: Node) -> None:
        await self.master.rpc.run(
            node,
            version(),
            f"Node {node.name} is being de-offlined but fails to report its version",
            ecode=C.ECODE_STATE,
        )
        self.warn(
            "Transitioning node from offline to online state without using re-add."
            " Please make sure the node is healthy!"
        )

    def build_hooks_env(self) -> dict[str, Any]:
        op = self.op
        return {
            "OP_TARGET": op.node_name,
            "MASTER_CANDIDATE": op.master_candidate,
            "OFFLINE": op.offline,
            "DRAINED": op.drained,
            "MASTER_CAPABLE": op.master_capable,
            "VM_CAPABLE": op.vm_capable,
        }

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.cfg.cluster.master_node, self.node.uuid]
        return nodes, nodes

    async def exec(self) -> Any:
        node = self.node.copy_for_update()
        assert isinstance(node, Node)
        result: list[list[str]] = []
        if self.op.ndparams:
            node.ndparams = self.new_ndparams
        if self.op.powered is not None:
            node.powered = self.op.powered
        for attr in ("master_capable", "vm_capable"):
            value = getattr(self.op, attr)
            if value is not None:
                setattr(node, attr, value)
                result.append([attr, str(value)])
        if self.op.secondary_ip:
            result.append(["secondary_ip", self.op.secondary_ip])
        if self.new_role is not self.old_role:
            for flag, old, new in zip(FLAGS, self.old_role.flags, self.new_role.flags, strict=True):
                if old != new:
                    result.append([flag, str(new)])
                    setattr(node, flag, new)
        self.tx.update(node)
        if self.new_role is not self.old_role:
            await self._move_candidate_files(node)
        return result

    async def _move_candidate_files(self, node: Node) -> None:
        """The candidates' files follow the committed roles (as Ganeti's
        node_demote_from_mc, once the node gets no more candidate updates)."""
        promoted = fill_candidate_pool(self, node) if self.lock_all else []
        await self.checkpoint()
        changed = promoted
        if Role.CANDIDATE in (self.old_role, self.new_role):
            changed = [node, *promoted]
        for text in await distribution.candidate_roles_changed(self.master, changed):
            self.warn(text)


class LUNodePowercycle(_OneNodeLU):
    """Power-cycling needs a hypervisor or out-of-band power control: not built."""

    OPCODE = opn.OpNodePowercycle

    def declare_locks(self) -> None:
        # As Ganeti: a last resort takes no locks.
        pass

    async def check_prereq(self) -> None:
        if self.node.uuid == self.cfg.cluster.master_node and not self.op.force:
            raise errors.OpPrereqError(
                "The node is the master and the force parameter was not set", C.ECODE_INVAL
            )
        raise errors.OpPrereqError(
            "Power-cycling a node is not supported by Corral yet (it has no out-of-band"
            " power control); restart the machine by other means",
            C.ECODE_INVAL,
        )

    async def exec(self) -> Any:
        raise errors.ProgrammerError("powercycle has no execution")
