"""More nodes for a test cluster: real joins (a token, OP_NODE_ADD).

Typical use::

    with running_cluster(tmp_path) as cl:
        node2 = add_node(cl, tmp_path / "node2")
        try:
            ...                      # masterd now knows two nodes
        finally:
            node2.stop()

The new node's noded starts without a cluster on another loopback address
(the cluster's noded port) with a join token, and joins as ``gnt-node add``
makes it join.  For whole N-node clusters see :mod:`corral.testbed`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from corral import testbed
from corral.paths import Paths
from tests.helpers.cluster import TestCluster, running_cluster, unique_loopback
from tests.helpers.noded import Noded
from tests.helpers.osdef import make_os

MASTERD = "corral-masterd"


def free_address(port: int, taken: set[str]) -> str:
    """A loopback address, not in ``taken``, on which ``port`` is free."""
    for _ in range(100):
        address = unique_loopback()
        if address in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((address, port))
            except OSError:
                continue
        return address
    raise RuntimeError(f"No loopback address with port {port} free")


def start_joining_node(
    cl: TestCluster, root: Path, *, token: bool = True, address: str | None = None
) -> Noded:
    """A noded without a cluster under ``root``, waiting with a token of ``cl``'s master."""
    address = address or free_address(cl.port, {cl.node_ip})
    paths = Paths(root.absolute())
    testbed.start_joining(paths, address, cl.port, testbed.make_token(cl.paths) if token else None)
    return Noded(paths, address, cl.port, master=cl.paths)


def add_node(cl: TestCluster, root: Path, name: str = "node2.example.com") -> Noded:
    """Start a noded for a new node under ``root`` and join it to the cluster.

    Returns the new node's :class:`Noded` (stop it when done; ``cl.stop()``
    stops only the first node's daemons).
    """
    noded = start_joining_node(cl, root)
    noded.name = name
    try:
        with cl.client() as client:
            testbed.join(client, [(name, noded.address)])
    except BaseException:
        noded.stop()
        raise
    return noded


@contextmanager
def cluster_with_nodes(
    root: Path, names: tuple[str, ...] = ("node2.example.com", "node3.example.com")
) -> Iterator[tuple[TestCluster, list[Noded]]]:
    """A cluster on ``root/node1`` joined by the nodes ``names`` (each under
    ``root/<short name>``), with the OS ``plain`` on the master; all stopped after."""
    with running_cluster(root / "node1") as cl:
        extra: list[Noded] = []
        try:
            for name in names:
                extra.append(add_node(cl, root / name.split(".")[0], name))
            make_os(cl.paths, "plain", variants=None)
            yield cl, extra
        finally:
            for node in extra:
                node.stop()
