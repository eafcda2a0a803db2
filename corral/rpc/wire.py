"""The objects node calls carry, declared once for master and node.

TypedDicts: the master builds and reads plain dicts (no conversion on its hot
paths) that mypy checks against these declarations; noded validates what it
receives against them at its door (:mod:`corral.node.dispatch`).  Keys that
are ``NotRequired`` are those the node does without.

``typing_extensions.TypedDict``: pydantic (noded's validator) needs it on
Python 3.11.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

# A JSON object whose keys depend on what produced it (a check, a hypervisor,
# an OS definition): the master passes it on or reads it by name.
JsonObject = dict[str, Any]

# A storage unit (:class:`corral.storage.units.StorageUnit`) as node calls take
# it: ``[storage type, key]``, the key of the file kinds a storage directory.
StorageUnitWire = list[str]


class DiskWire(TypedDict):
    """A disk description (:class:`corral.disk_description.DiskDescription`): the
    node resolves and checks its path itself, never takes one from the master."""

    template: str
    logical_id: list[str]
    size: int  # MiB
    uuid: str
    iv_name: str
    name: str | None
    mode: str
    # An older Corral's record lacks them: missing means empty.
    nodes: NotRequired[list[str]]
    children: NotRequired[list[DiskWire]]
    addresses: NotRequired[list[list[str]]]  # [name, secondary IP] per node (mirrored)
    outdated: NotRequired[list[str]]  # the nodes whose copy is behind (mirrored)


class DiskEntry(TypedDict):
    """A disk of an instance as hypervisors and OS scripts see it."""

    uuid: str
    size: int
    mode: str
    name: str | None
    description: DiskWire
    backend_type: str


class NetworkEntry(TypedDict):
    """The network of a NIC (what the OS scripts get of it)."""

    name: str
    uuid: str
    tags: list[str]
    subnet: str
    gateway: str | None
    subnet6: str | None
    gateway6: str | None
    mac_prefix: str | None


class NicEntry(TypedDict):
    """A NIC with its filled nicparams."""

    mac: str
    uuid: str
    ip: str | None
    name: str | None
    mode: str
    link: str
    vlan: str
    network: NotRequired[NetworkEntry]


class OsParamWire(TypedDict):
    """An OS parameter (:class:`corral.osdef.spec.OsParam`): its text and who may see it."""

    value: str
    visibility: Literal["public", "private", "secret"]


class OsSpecWire(TypedDict):
    """An OS with its merged parameters (:class:`corral.osdef.spec.OsSpec`)."""

    name: str
    params: dict[str, OsParamWire]


class InstanceWire(TypedDict):
    """An instance as nodes need it (the master's ``instance_descriptor``):
    filled parameters, disk descriptions, NIC modes."""

    name: str
    hypervisor: str
    memory: int  # MiB: the filled maxmem
    vcpus: int
    uuid: NotRequired[str]
    os: NotRequired[str]
    ctime: NotRequired[float]
    mtime: NotRequired[float]
    primary_node: NotRequired[str]
    secondary_nodes: NotRequired[list[str]]
    network_port: NotRequired[int | None]
    beparams: NotRequired[dict[str, Any]]
    hvparams: NotRequired[dict[str, Any]]
    disks: NotRequired[list[DiskEntry]]
    nics: NotRequired[list[NicEntry]]
    # In the calls that run OS scripts, and in those that start an instance with a
    # communication NIC (public and private parameters only: its metadata).
    osspec: NotRequired[OsSpecWire]
    # Only for an instance with config-drive=yes: the drive's data, an
    # InstanceMetadata record (corral.metad.model), private values in clear.
    config_drive: NotRequired[dict[str, Any]]


class StorageSpace(TypedDict):
    """Size and free space (MiB) of a storage unit (``type`` and its key,
    ``path``)."""

    type: str
    path: str
    total: int
    free: int


class MirrorFaultWire(TypedDict):
    """A mirrored disk whose secondary failed under a running guest (mirror_faults)."""

    instance: str
    disk: str  # the disk's uuid
    reason: str
    since: float  # when the primary's QEMU reported it (seconds since the epoch)


class NodeInfo(TypedDict):
    """``node_info``: the boot id, memory (MiB) and CPUs of the node."""

    bootid: str
    memory_total: int
    memory_free: int
    memory_dom0: int
    cpu_total: int
    cpu_dom0: int
    cpu_nodes: int
    cpu_sockets: int
    storage: list[StorageSpace]


class HypervisorInfo(TypedDict):
    """``hypervisor_info``: memory as the hypervisor sees it and the space of
    a storage unit (MiB)."""

    memory_total: int
    memory_free: int
    memory_dom0: int
    instances_memory: int
    storage_total: int
    storage_free: int


class RunningInstance(TypedDict):
    """An instance a hypervisor runs (Ganeti's ``time``: its uptime in seconds)."""

    memory: int
    vcpus: int
    state: str
    time: float
    hypervisor: str


class ExtStorageWire(TypedDict):
    """``extstorage_diagnose``: an ExtStorage provider directory of the node
    (``path``, its production path), whether it is ``valid`` (else why, in
    ``diagnose``) and its parameters as ``[name, description]``."""

    name: str
    path: str
    valid: bool
    diagnose: str
    parameters: list[list[str]]


class StorageUsage(TypedDict):
    """``file_storage_usage``: a file storage unit's directory (``name``), its
    file system and use (MiB)."""

    name: str
    size: int
    used: int
    free: int


class TransferFinished(TypedDict):
    """``transfer_finish``: whether this node received the transfer."""

    received: bool


class CommandResult(TypedDict):
    """``run_command``: what Ganeti's ssh gives back (bytes that are not UTF-8
    arrive as lone surrogates, Python's ``surrogateescape``)."""

    stdout: str
    stderr: str
    exit_code: int


class MasterNetworkWire(TypedDict):
    """The master's network parameters (Ganeti's MasterNetworkParameters):
    the master node's uuid, the master IP, its netmask and device, and the
    address family (``socket.AF_INET`` or ``AF_INET6``)."""

    uuid: str
    ip: str
    netmask: int
    netdev: str
    ip_family: int
