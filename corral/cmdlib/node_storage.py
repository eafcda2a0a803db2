"""Logical units for the storage of nodes: volumes, storage units, and their
modification and repair (``gnt-node volumes``, ``list-storage``,
``modify-storage``, ``repair-storage``).

Corral's nodes run no LVM: they have no volumes, and the LVM storage types
can be neither listed nor changed (no LVM disk template can be enabled).  What
exists is reported: the file and shared-file storage directories.
"""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral import storage_names as N
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.nicesort import nice_sort
from corral.objects import Cluster, Node
from corral.opcodes import node as opn
from corral.rpc.calls_admin import file_storage_usage
from corral.storage import templates

ST_FILE, ST_SHARED_FILE, ST_LVM_VG, ST_LVM_PV = (
    N.ST_FILE,
    N.ST_SHARED_FILE,
    N.ST_LVM_VG,
    N.ST_LVM_PV,
)
# The disk templates whose disks each storage type holds (Ganeti's
# MAP_DISK_TEMPLATE_STORAGE_TYPE, inverted).
STORAGE_TEMPLATES: dict[str, tuple[str, ...]] = {
    storage_type: tuple(t for t, st in N.STORAGE_TYPES.items() if st == storage_type)
    for storage_type in dict.fromkeys(N.STORAGE_TYPES.values())
}
# The storage types Corral's nodes report: those of the file-based templates,
# each with its template.
REPORTED = {t.storage_type: t for t in templates.DISK_TEMPLATES.values() if t.file_based}
# Ganeti's STS_REPORT_NODE_STORAGE, in its order for messages.
GANETI_REPORTED = (ST_SHARED_FILE, N.ST_GLUSTER, ST_LVM_VG, ST_FILE, ST_LVM_PV)
VOLUME_FIELDS = frozenset({"node", "phys", "vg", "name", "size", "instance"})
STORAGE_FIELDS = frozenset({"node", "type", "name", "size", "used", "free", "allocatable"})
# Ganeti's MODIFIABLE_STORAGE_FIELDS and the types with SO_FIX_CONSISTENCY.
MODIFIABLE = {ST_LVM_PV: frozenset({"allocatable"})}
REPAIRABLE = (ST_LVM_VG,)


def check_fields(known: frozenset[str], selected: list[str]) -> None:
    unknown = [f for f in selected if f not in known]
    if unknown:
        raise errors.OpPrereqError(
            f"Unknown output fields selected: {','.join(unknown)}", C.ECODE_INVAL
        )


def check_enabled(cluster: Cluster, storage_type: str) -> None:
    """Refuse a storage type no enabled disk template uses (Ganeti's check)."""
    wanted = ST_LVM_VG if storage_type == ST_LVM_PV else storage_type
    if any(t in cluster.enabled_disk_templates for t in STORAGE_TEMPLATES.get(wanted, ())):
        return
    raise errors.OpPrereqError(
        f"No disk template of storage type '{wanted}' is enabled in this cluster."
        f" Enabled disk templates are: {','.join(cluster.enabled_disk_templates)}",
        C.ECODE_INVAL,
    )


class _NodesLU(LogicalUnit[Any]):
    """Looks up ``op.nodes`` (none: all of them), locked shared."""

    REQ_BGL = False

    def expand_names(self) -> None:
        self.wanted = [self.expand(Node, name).uuid for name in self.op.nodes]

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = self.wanted or ALL_SET
        self.share_locks[C.LEVEL_NODE] = True

    def nodes(self) -> list[Node]:
        """The wanted nodes that are still there and not offline, by name."""
        wanted = set(self.wanted)
        nodes = [n for n in self.cfg.nodes() if not wanted or n.uuid in wanted]
        return [n for n in nodes if not n.offline]


class LUNodeQueryvols(_NodesLU):
    """Logical volumes: Corral's nodes run no LVM, so there are none."""

    OPCODE = opn.OpNodeQueryvols

    def check_arguments(self) -> None:
        check_fields(VOLUME_FIELDS, self.op.output_fields)

    async def exec(self) -> Any:
        return []


class LUNodeQueryStorage(_NodesLU):
    """The storage units of one type on the nodes, as Ganeti lists them."""

    OPCODE = opn.OpNodeQueryStorage

    def check_arguments(self) -> None:
        check_fields(STORAGE_FIELDS, self.op.output_fields)

    async def check_prereq(self) -> None:
        cluster = self.cfg.cluster
        if self.op.storage_type:
            check_enabled(cluster, self.op.storage_type)
            self.storage_type = self.op.storage_type
        else:
            first = cluster.enabled_disk_templates[0]
            self.storage_type = next(st for st, dts in STORAGE_TEMPLATES.items() if first in dts)
            if self.storage_type not in GANETI_REPORTED:
                raise errors.OpPrereqError(
                    f"Storage reporting for storage type '{self.storage_type}' is not"
                    " supported. Please use the --storage-type option to specify one of the"
                    f" supported storage types ({', '.join(GANETI_REPORTED)}) or set the"
                    " default disk template to one that supports storage reporting.",
                    C.ECODE_INVAL,
                )
        if self.storage_type not in REPORTED:
            raise errors.OpPrereqError(
                f"Storage units of type '{self.storage_type}' are not available on Corral's"
                f" nodes; the types that can be listed are {', '.join(REPORTED)}",
                C.ECODE_INVAL,
            )

    async def exec(self) -> Any:
        unit = REPORTED[self.storage_type].capacity_unit(self.cfg.cluster)
        assert unit is not None  # the reported types are the file-based templates'
        if self.op.name:
            unit = templates.StorageUnit(unit.storage_type, self.op.name)
        nodes = {n.uuid: n for n in self.nodes()}
        results = await self.master.rpc.results(
            self.node_addresses(list(nodes)), file_storage_usage(unit.to_wire())
        )
        out = []
        for name in nice_sort([n.name for n in nodes.values()]):
            node = self.cfg.lookup(Node, name)
            res = results.get(node.uuid)
            what = f"Can't get storage data from node {name}"
            if res is None:
                self.warn(f"{what}: no answer")  # offline: not asked
            elif res.report(self.warn, what):
                row = {**res.payload, "node": name, "type": self.storage_type, "allocatable": True}
                out.append([row[field] for field in self.op.output_fields])
        return out


class _StorageUnitLU(LogicalUnit[Any]):
    """A change to one storage unit of one node: only LVM's can change."""

    REQ_BGL = False

    def expand_names(self) -> None:
        self.node = self.expand(Node, self.op.node_uuid or self.op.node_name)
        self.op.node_uuid, self.op.node_name = self.node.uuid, self.node.name

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = [self.node.uuid]

    async def check_prereq(self) -> None:
        check_enabled(self.cfg.cluster, self.op.storage_type)

    async def exec(self) -> Any:
        # Unreachable while no LVM template can be enabled (check_prereq).
        raise errors.OpExecError(
            f"Storage of type '{self.op.storage_type}' is not available on node"
            f" {self.node.name}: Corral's nodes run no LVM"
        )


class LUNodeModifyStorage(_StorageUnitLU):
    OPCODE = opn.OpNodeModifyStorage

    def check_arguments(self) -> None:
        modifiable = MODIFIABLE.get(self.op.storage_type)
        if modifiable is None:
            raise errors.OpPrereqError(
                f"Storage units of type '{self.op.storage_type}' can not be modified",
                C.ECODE_INVAL,
            )
        extra = [key for key in self.op.changes if key not in modifiable]
        if extra:
            raise errors.OpPrereqError(
                "The following fields can not be modified for storage units of type"
                f" '{self.op.storage_type}': {extra!r}",
                C.ECODE_INVAL,
            )


class LURepairNodeStorage(_StorageUnitLU):
    OPCODE = opn.OpRepairNodeStorage

    def check_arguments(self) -> None:
        if self.op.storage_type not in REPAIRABLE:
            raise errors.OpPrereqError(
                f"Storage units of type '{self.op.storage_type}' can not be repaired",
                C.ECODE_INVAL,
            )
