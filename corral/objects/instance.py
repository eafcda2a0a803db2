"""Instances with their disks and NICs."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from corral.objects.base import ConfigObject, new_uuid
from corral.objects.disk import Disk

ADMIN_UP = "up"
ADMIN_DOWN = "down"
ADMIN_OFFLINE = "offline"


class NIC(BaseModel):
    model_config = ConfigDict(extra="forbid")

    uuid: str = Field(default_factory=new_uuid)
    name: str | None = None
    mac: str
    ip: str | None = None
    nicparams: dict[str, Any] = Field(default_factory=dict)
    network: str | None = None


class Instance(ConfigObject):
    TABLE: ClassVar[str] = "instances"

    primary_node: str
    secondary_nodes: list[str] = Field(default_factory=list)
    os: str
    hypervisor: str
    hvparams: dict[str, Any] = Field(default_factory=dict)
    beparams: dict[str, Any] = Field(default_factory=dict)
    osparams: dict[str, Any] = Field(default_factory=dict)
    osparams_private: dict[str, Any] = Field(default_factory=dict)
    admin_state: str = ADMIN_DOWN
    admin_state_source: str = "admin"
    disk_template: str
    disks: list[Disk] = Field(default_factory=list)
    nics: list[NIC] = Field(default_factory=list)
    disks_active: bool = False
    network_port: int | None = None

    @property
    def all_nodes(self) -> list[str]:
        return [self.primary_node, *self.secondary_nodes]

    @model_validator(mode="after")
    def _disk_nodes(self) -> Instance:
        """Disks stored by an older Corral, without their nodes, get those
        their template gives them (a file disk: the primary node)."""
        for disk in self.disks:
            if not disk.nodes:
                disk.nodes = _disk_nodes(disk, self.primary_node, self.secondary_nodes)
        return self

    def set_primary(self, node: str) -> None:
        """Make ``node`` (a uuid) the primary node (a failover, migration or
        move); the disks follow, as their template places them."""
        self.primary_node = node
        for disk in self.disks:
            disk.nodes = _disk_nodes(disk, node, self.secondary_nodes)


def _disk_nodes(disk: Disk, primary: str, secondaries: list[str]) -> list[str]:
    """The nodes holding ``disk`` of an instance on these nodes."""
    from corral.storage import templates  # the templates make Disks: imported late

    template = templates.DISK_TEMPLATES.get(disk.dev_type)
    return list(disk.nodes) if template is None else template.disk_nodes(primary, secondaries)
