"""The configuration's data model: cluster, node groups, nodes (instances follow)."""

from corral.objects.base import ConfigObject
from corral.objects.cluster import Cluster
from corral.objects.node import Node, NodeGroup

__all__ = ["Cluster", "ConfigObject", "Node", "NodeGroup"]
