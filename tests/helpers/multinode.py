"""A second node for a test cluster, until ``gnt-node add`` exists.

Typical use::

    with running_cluster(tmp_path) as cl:
        node2 = add_node(cl, tmp_path / "node2")
        try:
            ...                      # masterd now knows two nodes
        finally:
            node2.stop()

The new node gets its own root joined to the cluster's CA and its own noded
on another loopback address (the cluster's noded port); masterd is stopped,
a Node row is added to the configuration directly, and masterd is started again.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from corral.config.manager import ConfigManager
from corral.config.store import SqliteConfigStore
from corral.daemons.util import start_daemon, stop_daemon
from corral.objects import Node
from tests.helpers.cluster import TestCluster, unique_loopback
from tests.helpers.noded import Noded, daemon_env, make_node_root, start_noded

MASTERD = "corral-masterd"


def _free_address(port: int, taken: set[str]) -> str:
    """A loopback address, not in ``taken``, on which ``port`` is free."""
    for _ in range(50):
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


def add_node(cl: TestCluster, root: Path, name: str = "node2.example.com") -> Noded:
    """Start a noded for a new node under ``root`` and put it in the cluster's config.

    Returns the new node's :class:`Noded` (stop it when done; ``cl.stop()``
    stops only the first node's daemons).
    """
    address = _free_address(cl.port, {cl.node_ip})
    paths = make_node_root(root, node_name=name, node_ip=address, cluster=cl.paths)
    noded = start_noded(paths, address, cl.port)
    noded.name = name
    try:
        stop_daemon(cl.paths, MASTERD)
        cfg = ConfigManager(SqliteConfigStore(cl.paths.config_db))
        try:
            group = cfg.master_node.group  # the default group
            tx = cfg.transaction()
            tx.add(Node(name=name, primary_ip=address, secondary_ip=address, group=group))
            tx.commit()
        finally:
            cfg.close()
        start_daemon([sys.executable, "-m", "corral.daemons.masterd"], daemon_env(cl.paths))
    except BaseException:
        noded.stop()
        raise
    return noded
