"""A kvm cluster of two nodes on loopback, both with the ``corral-tiny`` OS:
for the tests and benchmarks of guests that move or mirror between nodes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.helpers.cluster import TestCluster
from tests.helpers.instances import ok
from tests.helpers.kvm_guest import kill_leftovers, kvm_cluster
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded
from tests.helpers.tiny_os import make_tiny_os

NODE1, NODE2 = "node1.example.com", "node2.example.com"
# What mirrored guests need: the template enabled (``drbd`` in the policy
# is Ganeti's name for it, as Ganeti's tools give it).
MIRRORED = ("diskless,file,mirrored", "diskless,file,mirrored")


@contextlib.contextmanager
def kvm_two_nodes(
    prefix: str, kernel_args: str = "quiet", templates: tuple[str, str] | None = None
) -> Iterator[tuple[TestCluster, Noded]]:
    """The cluster and its second node; ``templates``: the enabled disk
    templates and the instance policy's, if not the default."""
    with kvm_cluster(prefix, kernel_args) as cl:
        node2 = add_node(cl, cl.paths.root / "n2", NODE2)
        try:
            make_tiny_os(cl.paths)
            make_tiny_os(node2.paths)
            if templates is not None:
                enabled, policy = templates
                ok(
                    cl.gnt(
                        "cluster", "modify", f"--enabled-disk-templates={enabled}",
                        f"--ipolicy-disk-templates={policy}",
                    )
                )  # fmt: skip
            yield cl, node2
        finally:
            node2.stop()
            kill_leftovers(node2.paths.run_dir)
