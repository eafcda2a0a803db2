"""What every RPC handler of noded gets: the node's paths and settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.paths import Paths

if TYPE_CHECKING:
    from corral.node.join_server import Membership


@dataclass(frozen=True)
class NodeContext:
    """The node's root and the address noded listens on."""

    paths: Paths
    address: str
    port: int
    debug: bool = False
    # confd's UDP port on ``address`` (None: no confd, as in-process nodes).
    confd_port: int | None = None
    # mond's TCP port on ``address`` (None: no mond, as in-process nodes).
    mond_port: int | None = None
    # Whether the node is in a cluster, and the switch (set by the server).
    membership: Membership | None = None
