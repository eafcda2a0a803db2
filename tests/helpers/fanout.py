"""Many nodes and many running instances for a test cluster, written directly.

For the query tests and benchmarks: nodes get real nodeds (each its own root
and loopback address, as :mod:`tests.helpers.multinode`), but their Node rows,
and instances' rows, go straight into the configuration while masterd is
stopped, in one transaction each (no job per object); an instance "runs" by
its state file on its node's fake hypervisor.  Typical use::

    with running_cluster(tmp_path) as cl:
        bed = FanoutBed(cl)
        try:
            bed.add_nodes(tmp_path, ["node2.example.com", "node3.example.com"])
            bed.place({"web1": "node2.example.com"})
            ...
        finally:
            bed.stop()
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from corral.config.manager import ConfigManager, ConfigTransaction
from corral.objects import ADMIN_UP, Instance, Node
from corral.paths import Paths
from corral.process.daemons import start_daemon, stop_daemon
from tests.helpers.cluster import TestCluster
from tests.helpers.multinode import free_address
from tests.helpers.noded import Noded, daemon_env, make_node_root, start_noded
from tests.helpers.offline_config import change_offline

MASTERD = "corral-masterd"
# The OS the instances claim (listing them needs no OS definition).
OS = "bench+default"


@dataclass
class FanoutBed:
    """A cluster's extra nodes and where its instances are."""

    cl: TestCluster
    masterd_args: tuple[str, ...] = ()
    nodes: dict[str, Noded] = field(default_factory=dict)  # name → its noded

    def root_of(self, node: str) -> Paths:
        """The root of a node of the cluster (the first node's is the cluster's)."""
        return self.cl.paths if node == self.cl.node_name else self.nodes[node].paths

    def add_nodes(self, base: Path, names: Iterable[str], *noded_args: str) -> None:
        """Start a noded for each new node (under ``base/<name>``), then add them all."""
        taken = {self.cl.node_ip}
        for name in names:
            address = free_address(self.cl.port, taken)
            taken.add(address)
            paths = make_node_root(
                base / name, node_name=name, node_ip=address, cluster=self.cl.paths
            )
            noded = start_noded(paths, address, self.cl.port, *noded_args)
            noded.name = name
            self.nodes[name] = noded

        def edit(cfg: ConfigManager, tx: ConfigTransaction) -> None:
            group = cfg.master_node.group
            for name in names:
                address = self.nodes[name].address
                tx.add(Node(name=name, primary_ip=address, secondary_ip=address, group=group))

        self._change(edit)

    def place(self, placement: Mapping[str, str], *, running: bool = True) -> None:
        """Add instances (name → primary node's name), admin up, diskless, and
        (``running``) running on their node's fake hypervisor."""

        def edit(cfg: ConfigManager, tx: ConfigTransaction) -> None:
            uuids = {n.name: n.uuid for n in cfg.nodes()}
            for name, node in placement.items():
                tx.add(
                    Instance(
                        name=name,
                        primary_node=uuids[node],
                        os=OS,
                        hypervisor="fake",
                        disk_template="diskless",
                        admin_state=ADMIN_UP,
                    )
                )

        self._change(edit)
        if running:
            for name, node in placement.items():
                self.start_fake(node, name)

    def start_fake(self, node: str, name: str, memory: int = 128, vcpus: int = 1) -> None:
        """Make ``name`` run on ``node``'s fake hypervisor (its state file)."""
        state_dir = self.root_of(node).run_dir / "fake-hypervisor"
        state_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "name": name,
            "memory": memory,
            "vcpus": vcpus,
            "state": "running",
            "started": time.time(),
        }
        (state_dir / name).write_text(json.dumps(state))

    def _change(self, edit: Callable[[ConfigManager, ConfigTransaction], None]) -> None:
        """Change the configuration with masterd stopped; masterd starts again afterwards."""
        stop_daemon(self.cl.paths, MASTERD)
        try:
            change_offline(self.cl.paths, edit)
        finally:
            command = [sys.executable, "-m", "corral.daemons.masterd", *self.masterd_args]
            start_daemon(command, daemon_env(self.cl.paths), timeout=60)

    def stop(self) -> None:
        """Stop the extra nodes' nodeds."""
        for noded in self.nodes.values():
            noded.stop()
