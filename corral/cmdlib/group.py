"""Logical units for node groups: add, remove, rename, change parameters,
assign nodes, verify disks (``gnt-group``; evacuation: group_evacuate)."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral import ipolicy as IP
from corral.cmdlib import communication
from corral.cmdlib.base import LogicalUnit
from corral.cmdlib.node_moves import submit_jobs
from corral.config.manager import ConfigManager
from corral.diskparams import DISK_DT_DEFAULTS
from corral.nicesort import nice_sort
from corral.objects import Instance, Node, NodeGroup
from corral.opcodes import group as opg
from corral.paramtypes import force_dict_type
from corral.services.ndparams import updated_ndparams
from corral.services.params import filled_beparams
from corral.storage import templates

_KIND = {bool: "bool", int: "int", float: "float", str: "string"}


def _diskparams(old: dict[str, Any], changes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``old`` with each template's changes applied ("default" removes), typed."""
    new = {dt: dict(values) for dt, values in old.items()}
    for template, params in changes.items():
        defaults = DISK_DT_DEFAULTS.get(template, {})
        merged = {k: v for k, v in new.get(template, {}).items() if params.get(k) != "default"}
        merged.update({k: v for k, v in params.items() if v != "default"})
        types = {key: _KIND[type(value)] for key, value in defaults.items()}
        try:
            force_dict_type(merged, types)
        except errors.TypeEnforcementError as err:
            raise errors.OpPrereqError(
                f"Invalid disk parameters of template {template}: {err}", C.ECODE_INVAL
            ) from None
        new[template] = merged
    return new


def _checked_ipolicy(cfg: ConfigManager, old: dict[str, Any], change: dict[str, Any]) -> Any:
    """The group's new own policy, checked against the cluster's enabled templates."""
    policy = IP.updated_ipolicy(old, change, group_policy=True)
    IP.check_vs_disk_templates(
        IP.group_ipolicy(cfg.cluster.ipolicy, policy), cfg.cluster.enabled_disk_templates
    )
    return policy


def group_instances(cfg: ConfigManager, group: NodeGroup) -> list[Instance]:
    """The instances with a node (primary or secondary) in ``group``."""
    members = {n.uuid for n in cfg.nodes() if n.group == group.uuid}
    return [i for i in cfg.instances() if members.intersection(i.all_nodes)]


def _violating(cfg: ConfigManager, policy: dict[str, Any], instances: list[Instance]) -> set[str]:
    out = set()
    for inst in instances:
        disks = [(d.size, d.dev_type) for d in inst.disks]
        beparams = filled_beparams(cfg.cluster, inst)
        if IP.instance_violations(policy, beparams, disks, len(inst.nics)):
            out.add(inst.name)
    return out


class _GroupLU(LogicalUnit[Any]):
    """Finds ``op.group_name`` and locks that group."""

    HTYPE = C.HTYPE_GROUP
    REQ_BGL = False
    group: NodeGroup

    def expand_names(self) -> None:
        self.group = self.expand(NodeGroup, self.op.group_name)

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODEGROUP] = [self.group.uuid]

    def current_group(self) -> NodeGroup:
        group = self.cfg.get(NodeGroup, self.group.uuid)
        if group is None:
            raise errors.OpExecError(
                f"Could not retrieve group '{self.op.group_name}' (UUID: {self.group.uuid})"
            )
        return group

    def build_hooks_env(self) -> dict[str, Any]:
        return {"GROUP_NAME": self.op.group_name}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        master = [self.cfg.cluster.master_node]
        return master, master


class LUGroupAdd(_GroupLU):
    OPCODE = opg.OpGroupAdd
    HPATH = "group-add"
    # Names are checked when the unit runs: adding and renaming groups are
    # serialised by the Big Ganeti Lock (they are rare).
    REQ_BGL = True

    def expand_names(self) -> None:
        pass

    def declare_locks(self) -> None:
        pass

    async def check_prereq(self) -> None:
        existing = self.cfg.find(NodeGroup, self.op.group_name)
        if existing is not None:
            raise errors.OpPrereqError(
                f"Desired group name '{self.op.group_name}' already exists as a node group"
                f" (UUID: {existing.uuid})",
                C.ECODE_EXISTS,
            )
        self.ndparams = updated_ndparams({}, self.op.ndparams or {})
        self.diskparams = _diskparams({}, self.op.diskparams or {})
        self.ipolicy = _checked_ipolicy(self.cfg, {}, self.op.ipolicy or {})

    async def exec(self) -> Any:
        group = NodeGroup(
            name=self.op.group_name,
            alloc_policy=self.op.alloc_policy or "preferred",
            ndparams=self.ndparams,
            diskparams=self.diskparams,
            ipolicy=self.ipolicy,
        )
        self.tx.add(group)
        jobs = communication.group_jobs(self.cfg, group)
        if not jobs:
            return None
        # The job finds the group (Ganeti submits it after the commit).
        await self.checkpoint()
        return await submit_jobs(self, jobs)


class LUGroupRemove(_GroupLU):
    OPCODE = opg.OpGroupRemove
    HPATH = "group-remove"

    async def check_prereq(self) -> None:
        group = self.current_group()
        members = [n.name for n in self.cfg.nodes() if n.group == group.uuid]
        if members:
            raise errors.OpPrereqError(
                f"Group '{self.op.group_name}' not empty, has the following nodes:"
                f" {', '.join(nice_sort(members))}",
                C.ECODE_STATE,
            )
        if len(self.cfg.groups()) == 1:
            raise errors.OpPrereqError(
                f"Group '{self.op.group_name}' is the only group, cannot be removed",
                C.ECODE_STATE,
            )

    async def exec(self) -> Any:
        self.tx.remove(self.current_group())
        return None


class LUGroupRename(_GroupLU):
    OPCODE = opg.OpGroupRename
    HPATH = "group-rename"
    REQ_BGL = True  # as LUGroupAdd

    async def check_prereq(self) -> None:
        clash = self.cfg.find(NodeGroup, self.op.new_name)
        if clash is not None:
            raise errors.OpPrereqError(
                f"Desired new name '{self.op.new_name}' clashes with existing node group"
                f" (UUID: {clash.uuid})",
                C.ECODE_EXISTS,
            )

    def build_hooks_env(self) -> dict[str, Any]:
        return {"OLD_NAME": self.op.group_name, "NEW_NAME": self.op.new_name}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        master = self.cfg.cluster.master_node
        members = [n.uuid for n in self.cfg.nodes() if n.group == self.group.uuid]
        nodes = [master, *(uuid for uuid in members if uuid != master)]
        return nodes, nodes

    async def exec(self) -> Any:
        group = self.current_group().copy_for_update()
        group.name = self.op.new_name
        self.tx.update(group)
        return self.op.new_name


class LUGroupSetParams(_GroupLU):
    OPCODE = opg.OpGroupSetParams
    HPATH = "group-modify"

    def check_arguments(self) -> None:
        op = self.op
        changes = [op.ndparams, op.diskparams, op.alloc_policy, op.hv_state, op.disk_state,
                   op.ipolicy]  # fmt: skip
        if changes.count(None) == len(changes):
            raise errors.OpPrereqError("Please pass at least one modification", C.ECODE_INVAL)

    async def check_prereq(self) -> None:
        self.group = self.current_group()
        op = self.op
        if op.ndparams:
            self.ndparams = updated_ndparams(self.group.ndparams, op.ndparams)
        if op.diskparams:
            self.diskparams = _diskparams(self.group.diskparams, op.diskparams)
        if op.ipolicy:
            self.ipolicy = _checked_ipolicy(self.cfg, self.group.ipolicy, op.ipolicy)
            instances = group_instances(self.cfg, self.group)
            new = IP.group_ipolicy(self.cfg.cluster.ipolicy, self.ipolicy)
            old = IP.group_ipolicy(self.cfg.cluster.ipolicy, self.group.ipolicy)
            violations = _violating(self.cfg, new, instances) - _violating(self.cfg, old, instances)
            if violations:
                self.warn(
                    "After the ipolicy change the following instances violate them:"
                    f" {', '.join(sorted(violations))}"
                )

    def build_hooks_env(self) -> dict[str, Any]:
        return {"GROUP_NAME": self.op.group_name, "NEW_ALLOC_POLICY": self.op.alloc_policy}

    async def exec(self) -> Any:
        group = self.group.copy_for_update()
        assert isinstance(group, NodeGroup)
        result: list[list[str]] = []
        if self.op.ndparams:
            group.ndparams = self.ndparams
            result.append(["ndparams", str(group.ndparams)])
        if self.op.diskparams:
            group.diskparams = self.diskparams
            result.append(["diskparams", str(group.diskparams)])
        if self.op.alloc_policy:
            group.alloc_policy = self.op.alloc_policy
        if self.op.ipolicy:
            group.ipolicy = self.ipolicy
        self.tx.update(group)
        return result


def split_instances(cfg: ConfigManager, moves: dict[str, str]) -> tuple[list[str], list[str]]:
    """(instances newly split across groups by ``moves`` (node uuid → group
    uuid), instances split before and still split), as Ganeti counts them:
    only internally mirrored ones."""
    group_of = {n.uuid: n.group for n in cfg.nodes()}
    new_split: list[str] = []
    still_split: list[str] = []
    for inst in cfg.instances():
        # Disks on several nodes kept in sync (Ganeti's DTS_INT_MIRROR) must
        # not be split across groups.
        template = templates.DISK_TEMPLATES.get(inst.disk_template)
        if template is None or template.mirroring is not templates.Mirroring.INTERNAL:
            continue
        before = {group_of.get(n) for n in inst.all_nodes}
        after = {moves.get(n, group_of.get(n)) for n in inst.all_nodes}
        if len(after) > 1:
            (still_split if len(before) > 1 else new_split).append(inst.name)
    return nice_sort(new_split), nice_sort(still_split)


class LUGroupAssignNodes(_GroupLU):
    """Moves nodes into the group; refuses to split a mirrored instance
    across groups unless forced."""

    OPCODE = opg.OpGroupAssignNodes

    def expand_names(self) -> None:
        super().expand_names()
        self.nodes = [self.expand(Node, name) for name in self.op.nodes]
        self.op.node_uuids = [n.uuid for n in self.nodes]
        self.old_groups = {n.group for n in self.nodes}

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODEGROUP] = sorted({self.group.uuid, *self.old_groups})
        self.needed_locks[C.LEVEL_NODE] = [n.uuid for n in self.nodes]

    async def check_prereq(self) -> None:
        self.current_group()
        self.nodes = [self.cfg.lookup(Node, n.uuid) for n in self.nodes]
        if {n.group for n in self.nodes} - self.old_groups:
            raise errors.OpExecError(
                "Nodes changed groups since locks were acquired; retry the operation"
            )
        moves = {n.uuid: self.group.uuid for n in self.nodes}
        new_split, still_split = split_instances(self.cfg, moves)
        if new_split:
            text = ", ".join(new_split)
            if not self.op.force:
                raise errors.OpExecError(
                    f"The following instances get split by this change and --force was not"
                    f" given: {text}"
                )
            self.warn(f"This operation will split the following instances: {text}")
            if still_split:
                self.warn(
                    "In addition, these already-split instances continue to be split across"
                    f" groups: {', '.join(still_split)}"
                )

    async def exec(self) -> Any:
        for node in self.nodes:
            if node.group != self.group.uuid:
                copy = node.copy_for_update()
                assert isinstance(copy, Node)
                copy.group = self.group.uuid
                self.tx.update(copy)
        return None


class LUGroupVerifyDisks(_GroupLU):
    """Ganeti's ``[node errors, instances needing activate-disks, missing
    volumes]`` of the group.  Corral's disks that can need activate-disks are
    mirrored ones, Ganeti's DRBD: an instance with active disks of which a
    copy is outdated (the configuration says so: the master records a failed
    secondary before the guest goes on) needs its resync.  Corral has no
    logical volumes to miss."""

    OPCODE = opg.OpGroupVerifyDisks

    def declare_locks(self) -> None:
        super().declare_locks()
        self.share_locks[C.LEVEL_NODEGROUP] = True

    async def exec(self) -> Any:
        behind = [
            inst.name
            for inst in group_instances(self.cfg, self.group)
            if inst.disks_active and any(disk.outdated for disk in inst.disks)
        ]
        return [{}, sorted(behind), {}]
