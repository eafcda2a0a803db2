"""Instances with their disks and NICs."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from corral.objects.base import ConfigObject, new_uuid
from corral.storage import templates
from corral.storage.disk import DiskDescription

ADMIN_UP = "up"
ADMIN_DOWN = "down"
ADMIN_OFFLINE = "offline"


class Disk(BaseModel):
    """One disk; ``logical_id`` has its template's shape (``corral.storage.templates``):
    ``[driver, path]`` for file-based templates, ``[manual, device]`` for blockdev."""

    model_config = ConfigDict(extra="forbid")

    uuid: str = Field(default_factory=new_uuid)
    name: str | None = None
    size: int
    mode: str = "rw"
    dev_type: str
    logical_id: list[str] = Field(default_factory=list)
    iv_name: str = ""
    spindles: int | None = None
    serial_no: int = 1

    @property
    def path(self) -> str | None:
        """The production path of a disk whose logical_id names one (file-based
        templates, adopted block devices), else None."""
        template = templates.DISK_TEMPLATES.get(self.dev_type)
        named = template is not None and (template.path_in_id or template.adopts)
        return self.logical_id[1] if named and len(self.logical_id) == 2 else None

    def description(self) -> DiskDescription:
        """The disk as node RPCs take it."""
        return DiskDescription(
            self.dev_type,
            tuple(self.logical_id),
            self.size,
            self.uuid,
            self.iv_name,
            self.name,
            self.mode,
        )


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
