"""What a disk template is on the master's side: one strategy object per
template, which the logical units ask instead of testing template names.

A template says how its disks are mirrored (:class:`Mirroring`), how many
secondary nodes an instance needs, how an instance may change nodes
(:class:`Moves`), where its disks take their space (a storage unit), and
how it makes a disk: its logical_id, the nodes that hold it, its children,
and what it holds in the configuration that no other disk may hold (a file's
path, an adopted device; a mirrored template's ports).

What a disk holds is derived from the configuration (:meth:`DiskTemplate.held`),
so removing a disk or its instance from the configuration releases it: there
is no pool to give anything back to, unlike Ganeti's ``tcpudp_port_pool``.
A new disk allocates what it holds through the job's :class:`Ledger` (a
value no other disk holds, such as a port) or takes it there (a value
given, such as a device to adopt, refused when another disk holds it); the
ledger keeps it reserved until the job ends, by when the disk's instance is
committed, holding it, or not (:mod:`corral.storage.reservations`).

The nodes' side of a template is :mod:`corral.node.storage`.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from corral import constants as C
from corral import errors
from corral.objects.disk import Disk
from corral.storage.units import StorageUnit


class Mirroring(enum.Enum):
    """Where the data of a template's disks lives (Ganeti's DTS_EXT_MIRROR and
    DTS_INT_MIRROR, and neither)."""

    NONE = "none"  # on the primary node alone
    EXTERNAL = "external"  # on storage every node sees (shared)
    INTERNAL = "internal"  # on the primary and a copy on each secondary, kept by Corral


@dataclass(frozen=True)
class Moves:
    """How an instance of the template may change its primary node."""

    # Restarted on another node, on the same disks (its data is there already).
    failover: bool = False
    # Live-migrated to another node, on the same disks.
    migrate: bool = False
    # Its disks can be copied to another node (Ganeti's DTS_COPYABLE): by
    # ``gnt-instance move``, or during a live migration by a hypervisor that
    # copies disks (``HypervisorKind.copies_disks``).
    copy: bool = False

    def allows(self, *, failover: bool, hypervisor_copies: bool) -> bool:
        """Whether a failover (or a live migration, by a hypervisor that copies
        disks or not) may move the instance."""
        if failover:
            return self.failover
        return self.migrate or (self.copy and hypervisor_copies)


# The cluster settings naming a storage unit's key.
UnitSetting = Literal["file_storage_dir", "shared_file_storage_dir"]


class ClusterDirs(Protocol):
    """The cluster settings a template's disks are placed by."""

    @property
    def file_storage_dir(self) -> str: ...

    @property
    def shared_file_storage_dir(self) -> str: ...


@dataclass(frozen=True)
class StorageDirs:
    """Cluster directories not (yet) in the cluster object: a change's or a node's."""

    file_storage_dir: str
    shared_file_storage_dir: str


@dataclass(frozen=True)
class Placement:
    """Where a new disk goes: for which instance, on which nodes."""

    instance: str  # the instance's name (file templates name a directory after it)
    primary: str  # node uuid
    dirs: ClusterDirs
    secondaries: tuple[str, ...] = ()


# Kinds of what a disk (or an instance) may hold alone.
RES_PATH = "path"  # a file's production path
RES_DEVICE = "device"  # an adopted block device
# A network port, from one range for the whole cluster (Ganeti's: kvm's VNC
# displays and DRBD's links take ports from the same pool).
RES_PORT = "port"


@dataclass(frozen=True)
class Resource:
    """Something one disk holds and no other may: a path, a device, a port."""

    kind: str  # RES_*
    value: str | int
    node: str | None = None  # the node it is unique on; None: the whole cluster


class Ledger(Protocol):
    """What a job sees of the resources disks and instances hold alone: those
    of the configuration's instances and those other running jobs reserved.
    What the job takes or allocates stays reserved for it until it ends."""

    def take(self, resource: Resource) -> str | None:
        """Reserve ``resource`` for this job; if another instance holds it,
        reserve nothing and return that instance's name."""
        ...

    def allocate(self, kind: str, node: str | None, first: int) -> int:
        """Reserve and return a value of ``kind`` on ``node`` that nothing holds:
        one more than the highest held, from ``first`` on (Ganeti's AllocatePort)."""
        ...


class DiskTemplate(ABC):
    """A disk template Corral implements (master side)."""

    name: ClassVar[str]
    doc: ClassVar[str]
    # Ganeti's storage type of the template's disks (names.ST_*).
    storage_type: ClassVar[str]
    mirroring: ClassVar[Mirroring]
    moves: ClassVar[Moves]
    # Secondary nodes an instance of the template needs (-n PNODE:SNODE).
    secondaries: ClassVar[int] = 0
    growable: ClassVar[bool] = False
    # Its disks may grow under a running instance (else only while it is stopped).
    grows_running: ClassVar[bool] = True
    # Disks are existing devices taken over (``adopt=``): never created nor removed.
    adopts: ClassVar[bool] = False
    has_disks: ClassVar[bool] = True
    # Disks are files in a storage directory (Ganeti's DTS_FILEBASED).
    file_based: ClassVar[bool] = False
    # The cluster setting (a ClusterDirs attribute) whose value is the key of
    # the storage unit the disks take their space in; None: Corral does not
    # count their space (diskless, adopted devices).
    unit_setting: ClassVar[UnitSetting | None] = None
    # The kinds of resource (RES_*) a disk holds alone (see :meth:`held`).
    holds: ClassVar[frozenset[str]] = frozenset()

    @property
    def counts_space(self) -> bool:
        """Whether the disks take space Corral counts (in :meth:`capacity_unit`)."""
        return self.unit_setting is not None

    def capacity_unit(self, dirs: ClusterDirs) -> StorageUnit | None:
        """Where the disks take their space (None: not counted by Corral)."""
        if self.unit_setting is None:
            return None
        return StorageUnit(self.storage_type, getattr(dirs, self.unit_setting))

    def check_secondaries(self, given: int) -> None:
        """Refuse (OpPrereqError) a number of secondary nodes the template cannot use."""
        if given == self.secondaries:
            return
        if self.secondaries == 0:
            raise errors.OpPrereqError(
                f"The {self.name} template keeps its disks on the primary node only:"
                " give no secondary node (-n PNODE, not -n PNODE:SNODE)",
                C.ECODE_INVAL,
            )
        raise errors.OpPrereqError(
            f"The {self.name} template needs {self.secondaries} secondary node(s),"
            f" {given} given (-n PNODE:SNODE)",
            C.ECODE_INVAL,
        )

    def disk_nodes(self, primary: str, secondaries: Sequence[str] = ()) -> list[str]:
        """The nodes holding a disk of an instance on these nodes, the primary first
        (none when every node sees it, as Ganeti leaves externally mirrored disks)."""
        if self.mirroring is Mirroring.EXTERNAL:
            return []
        if self.mirroring is Mirroring.INTERNAL:
            return [primary, *secondaries]
        return [primary]

    def nodes_changed(self, disk: Disk) -> None:
        """The disk's nodes changed (a failover swapped its primary and
        secondary): what of it names them follows (most templates: nothing)."""
        return None

    @abstractmethod
    def logical_id(
        self, where: Placement, index: int, spec: Mapping[str, Any], ledger: Ledger
    ) -> list[str]:
        """The logical_id of new disk ``index`` (``spec``: its checked
        specification: size, mode, name, and driver or adopt); what it names
        that the disk holds alone (a port) is allocated in ``ledger``."""

    def children(self, where: Placement, index: int, spec: Mapping[str, Any]) -> list[Disk]:
        """The devices new disk ``index`` is built on (none by default)."""
        return []

    def new_disk(
        self, where: Placement, index: int, spec: Mapping[str, Any], ledger: Ledger
    ) -> Disk:
        """Disk ``index`` of a new instance (or one added to it), what it holds
        reserved in ``ledger``; refused (ECODE_NOTUNIQUE) if it would hold
        what another disk holds."""
        disk = Disk(
            size=int(spec["size"]),
            mode=str(spec.get("mode") or "rw"),
            name=spec.get("name") or None,
            dev_type=self.name,
            iv_name=f"disk/{index}",
            logical_id=self.logical_id(where, index, spec, ledger),
            nodes=self.disk_nodes(where.primary, where.secondaries),
            children=self.children(where, index, spec),
        )
        self.reserve(disk, where.primary, ledger)
        return disk

    def reserve(self, disk: Disk, primary: str, ledger: Ledger) -> None:
        """Reserve in ``ledger`` what ``disk`` holds alone; refuse
        (ECODE_NOTUNIQUE) what another disk holds."""
        for resource in self.held(disk, primary):
            owner = ledger.take(resource)
            if owner is not None:
                raise self.taken(resource, owner)

    def held(self, disk: Disk, primary: str) -> list[Resource]:
        """What ``disk`` (of an instance whose primary node is ``primary``)
        holds alone, of the kinds in :attr:`holds`; nothing by default."""
        return []

    def taken(self, resource: Resource, owner: str) -> errors.OpPrereqError:
        """The refusal of a new disk that would hold ``resource``, held by ``owner``."""
        return errors.OpPrereqError(
            f"The {resource.kind} {resource.value} is already used by instance {owner}",
            C.ECODE_NOTUNIQUE,
        )

    def disk_path(self, logical_id: Sequence[str]) -> str | None:
        """The production path a disk's logical_id names, if it names one."""
        return None

    def renamed(self, disk: Disk, new_name: str) -> list[str] | None:
        """The disk's logical_id once its instance is called ``new_name``, when
        it names the instance (Ganeti's DTS_INSTANCE_DEPENDENT_PATH), else None."""
        return None

    def detached(self, disk: Disk) -> list[str] | None:
        """The disk's logical_id once detached from its instance, when it
        names the instance, else None."""
        return None

    def attached(
        self, disk: Disk, where: Placement, index: int, ledger: Ledger
    ) -> list[str] | None:
        """The logical_id of a detached disk attached as disk ``index`` of the
        instance ``where`` names, when it names the instance, else None."""
        return None

    def backend_type(self, disk: Disk) -> str:
        """What the OS scripts are told the disk is (``DISK_<n>_BACKEND_TYPE``)."""
        return "block"
