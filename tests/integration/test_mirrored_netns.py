"""The death of a mirrored instance's primary node, in network namespaces
(issue 26; tests/helpers/mirrored_netns.py): everything of the node killed,
failover to the secondary, the guest boots there with every acknowledged
write; twice, so that each of the two nodes dies once.  The benchmark
``bench.bench_mirrored_kill_primary`` repeats it twenty times and more."""

from __future__ import annotations

import pytest

from tests.helpers.mirrored_netns import kill_primary_once, kvm_netns_bed

pytestmark = pytest.mark.slow


def test_a_killed_primary_node_loses_no_acknowledged_write() -> None:
    with kvm_netns_bed("mirns") as net:
        nodes = [node.name for node in net.bed.nodes]
        net.add_writer("w1", nodes[1], nodes[2])
        outcomes = [kill_primary_once(net, "w1") for _ in range(2)]
        assert [o.killed for o in outcomes] == [nodes[1], nodes[2]]
        for outcome in outcomes:
            assert outcome.read_back >= outcome.acknowledged > 0, outcome
        info = net.gnt("instance", "info", "w1")
        assert f"copies: {nodes[1]} (current), {nodes[2]} (current)" in info, info
