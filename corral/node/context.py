"""What every RPC handler of noded gets: the node's paths and settings."""

from __future__ import annotations

from dataclasses import dataclass

from corral.paths import Paths


@dataclass(frozen=True)
class NodeContext:
    """The node's root and the address noded listens on."""

    paths: Paths
    address: str
    port: int
    debug: bool = False
