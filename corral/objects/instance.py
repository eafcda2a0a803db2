"""Instances with their disks and NICs."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

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
    # design-os's self_install (Corral's): the next start is the first after an
    # install, with the install-hv-* OS parameters over the hypervisor's.
    self_install: bool = False

    @property
    def all_nodes(self) -> list[str]:
        return [self.primary_node, *self.secondary_nodes]
