"""What a hypervisor is told about an instance, and what it reports back.

The master sends an instance as a dict (``instance_descriptor``); noded turns
it into an :class:`InstanceSpec` once, at the RPC boundary: the fields
checked, each disk's local path resolved by the node's own storage template
(never taken from the master), so a hypervisor works on typed values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral.disk_description import DiskDescription
from corral.node.storage import mirrored, registry
from corral.paths import Paths
from corral.rpc.wire import RunningInstance
from corral.storage import templates

# Instance states a hypervisor reports (the "state" of instances_info).
STATE_RUNNING = "running"
STATE_PAUSED = "paused"
# Stopped from inside the guest (Ganeti's user shutdown): reported until the
# instance is started or stopped through Corral.
STATE_SHUTDOWN = C.HV_STATE_SHUTDOWN


@dataclass(frozen=True)
class DiskSpec:
    """One disk as the hypervisor attaches it."""

    index: int
    uuid: str
    path: Path
    mode: str  # "rw" or "ro"
    size: int  # MiB
    template: str
    # Seen by every node at the same path (sharedfile, adopted block devices):
    # a live migration needs no copy of it.
    shared: bool
    name: str | None = None
    # A mirrored disk: the primary writes through a quorum over ``path`` (its
    # copy) and this link to the secondary's.
    mirror: mirrored.Link | None = None


@dataclass(frozen=True)
class NicSpec:
    """One NIC: Ganeti's NIC fields with its filled nicparams."""

    index: int
    uuid: str
    mac: str
    mode: str  # "bridged", "routed" or "openvswitch"
    link: str
    vlan: str = ""
    ip: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class InstanceSpec:
    """An instance as a hypervisor starts, migrates or describes it."""

    name: str
    uuid: str
    hypervisor: str
    os: str
    memory: int  # MiB (the filled maxmem)
    vcpus: int
    hvparams: Mapping[str, Any]
    beparams: Mapping[str, Any]
    disks: tuple[DiskSpec, ...] = ()
    nics: tuple[NicSpec, ...] = ()
    # The descriptor as sent (what migration steps hand on to the other node).
    wire: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_wire(cls, paths: Paths, data: Any, incoming: bool = False) -> InstanceSpec:
        """The instance sent by the master as ``data``; OpExecError if
        malformed.  ``incoming``: as the target of a live migration starts
        it (see :func:`mirrored.migrating_in`)."""
        if not isinstance(data, dict):
            raise errors.OpExecError("Invalid instance description: a dict is needed")
        if incoming:
            data = {**data, "disks": [_incoming(paths, d) for d in data.get("disks") or []]}
        try:
            return cls(
                name=_text(data, "name"),
                uuid=str(data.get("uuid") or ""),
                hypervisor=_text(data, "hypervisor"),
                os=str(data.get("os") or ""),
                memory=_number(data, "memory"),
                vcpus=_number(data, "vcpus"),
                hvparams=dict(data.get("hvparams") or {}),
                beparams=dict(data.get("beparams") or {}),
                disks=tuple(_disk(paths, i, d) for i, d in enumerate(data.get("disks") or [])),
                nics=tuple(_nic(i, n) for i, n in enumerate(data.get("nics") or [])),
                wire=data,
            )
        except (TypeError, KeyError, ValueError) as err:
            raise errors.OpExecError(f"Invalid instance description: {err}") from None


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string")
    return value


def _number(data: Mapping[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a non-negative integer")
    return value


def _incoming(paths: Paths, disk: Any) -> Any:
    """A disk of the source's description as this node, the migration's
    target, starts it: a mirrored one whose secondary this node is with
    the roles swapped."""
    if not isinstance(disk, dict) or not isinstance(disk.get("description"), dict):
        return disk  # refused by _disk
    description = DiskDescription.from_wire(disk["description"])
    template = registry.template_of(paths, description)
    if not template.MIRRORED or mirrored.role(paths, description) == 0:
        return disk
    return {**disk, "description": mirrored.migrating_in(description).to_wire()}


def _disk(paths: Paths, index: int, data: Mapping[str, Any]) -> DiskSpec:
    description = DiskDescription.from_wire(data["description"])
    node_template = registry.template_of(paths, description)
    template = templates.DISK_TEMPLATES.get(description.template)
    link = None
    if node_template.MIRRORED:
        if mirrored.role(paths, description) != 0:
            raise errors.OpExecError(
                f"Disk {index} is mirrored with this node as its secondary: the instance"
                " runs on its primary node only"
            )
        link = mirrored.link(description)
    return DiskSpec(
        index=index,
        uuid=description.uuid,
        path=node_template.attach(description),
        mode=description.mode,
        size=description.size,
        template=description.template,
        shared=template is not None and template.mirroring is templates.Mirroring.EXTERNAL,
        name=description.name,
        mirror=link,
    )


def _nic(index: int, data: Mapping[str, Any]) -> NicSpec:
    return NicSpec(
        index=index,
        uuid=str(data.get("uuid") or ""),
        mac=str(data["mac"]),
        mode=str(data.get("mode") or ""),
        link=str(data.get("link") or ""),
        vlan=str(data.get("vlan") or ""),
        ip=data.get("ip"),
        name=data.get("name"),
    )


@dataclass(frozen=True)
class MirrorFault:
    """A mirrored disk whose secondary failed under a running guest."""

    instance: str
    disk: str  # the disk's uuid (its export's name)
    reason: str
    since: float  # time.time() when the hypervisor saw it


@dataclass(frozen=True)
class InstanceInfo:
    """A running (or guest-stopped) instance as the hypervisor sees it."""

    name: str
    memory: int  # MiB
    vcpus: int
    state: str  # STATE_*
    uptime: float  # seconds

    def to_wire(self, hypervisor: str) -> RunningInstance:
        """The ``instances_info`` entry of a ``hypervisor`` instance (Ganeti's
        ``time`` is the uptime)."""
        return {
            "memory": self.memory,
            "vcpus": self.vcpus,
            "state": self.state,
            "time": self.uptime,
            "hypervisor": hypervisor,
        }


@dataclass(frozen=True)
class ConsoleInfo:
    """How to reach an instance's console: Ganeti's ``InstanceConsole``."""

    instance: str
    kind: str  # "ssh", "vnc", "spice" or "msg"
    message: str | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    command: tuple[str, ...] | None = None
    display: int | None = None

    def to_wire(self) -> dict[str, Any]:
        """Ganeti's dict form, without the unset fields."""
        out: dict[str, Any] = {"instance": self.instance, "kind": self.kind}
        for key in ("message", "host", "port", "user", "display"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.command is not None:
            out["command"] = list(self.command)
        return out
