"""The configuration's data model: cluster, node groups, nodes, instances,
detached disks, networks."""

from corral.objects.base import ConfigObject
from corral.objects.cluster import Cluster
from corral.objects.detached_disk import DetachedDisk
from corral.objects.disk import Disk
from corral.objects.instance import ADMIN_DOWN, ADMIN_OFFLINE, ADMIN_UP, NIC, Instance
from corral.objects.network import Network
from corral.objects.node import Node, NodeGroup

__all__ = [
    "ADMIN_DOWN",
    "ADMIN_OFFLINE",
    "ADMIN_UP",
    "NIC",
    "Cluster",
    "ConfigObject",
    "DetachedDisk",
    "Disk",
    "Instance",
    "Network",
    "Node",
    "NodeGroup",
]
