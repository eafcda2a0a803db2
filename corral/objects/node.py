"""Nodes and node groups."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from corral.objects.base import ConfigObject


class NodeGroup(ConfigObject):
    TABLE: ClassVar[str] = "nodegroups"

    alloc_policy: str = "preferred"
    ndparams: dict[str, Any] = Field(default_factory=dict)
    diskparams: dict[str, Any] = Field(default_factory=dict)
    ipolicy: dict[str, Any] = Field(default_factory=dict)
    networks: dict[str, Any] = Field(default_factory=dict)


class Node(ConfigObject):
    TABLE: ClassVar[str] = "nodes"

    primary_ip: str
    secondary_ip: str
    group: str
    master_candidate: bool = True
    offline: bool = False
    drained: bool = False
    master_capable: bool = True
    vm_capable: bool = True
    # Whether the node is on, as its out-of-band program last left it.
    powered: bool = True
    ndparams: dict[str, Any] = Field(default_factory=dict)
