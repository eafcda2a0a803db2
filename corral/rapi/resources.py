"""Every RAPI resource, in one table: Ganeti 3.0.2's paths, plus Corral's
OpenAPI description.  Paths whose opcode Corral lacks answer 501 until it
exists (see opinput.not_built)."""

from __future__ import annotations

from corral.rapi import cluster_resources, instance_resources, job_resources, node_resources
from corral.rapi.table import Resource

RESOURCES: list[Resource] = [
    *cluster_resources.RESOURCES,
    *job_resources.RESOURCES,
    *instance_resources.RESOURCES,
    *node_resources.NODE_RESOURCES,
    *node_resources.GROUP_RESOURCES,
    *node_resources.NETWORK_RESOURCES,
]


class Router:
    """Finds the resource of a raw (still percent-encoded) path."""

    def __init__(self, resources: list[Resource]) -> None:
        self._static = {r.path: r for r in resources if not r.placeholders}
        self._patterned = [r for r in resources if r.placeholders]

    def find(self, raw_path: str) -> tuple[Resource, tuple[str, ...]] | None:
        """The resource and its placeholders' values, or None."""
        resource = self._static.get(raw_path)
        if resource is not None:
            return resource, ()
        for resource in self._patterned:
            match = resource.pattern.match(raw_path)
            if match:
                return resource, match.groups()
        return None
