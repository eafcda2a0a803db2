"""The network rules for QEMU's users, applied by noded's :class:`NetRules`
in a network namespace of the test's own (the machine's ruleset is never
touched): a process running as a ruled uid reaches none of the node's
networks (its addresses, loopback, the metadata address, the other nodes,
the networks of its cluster address), while root (noded) reaches all and
the ruled uid still reaches what is no node's (an outside host); a
migration's links open exactly one endpoint; the table goes with the last
guest; verify's check sees what is missing.  No QEMU here: see
test_netrules_cluster for a real guest."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral import errors
from corral.node.netrules import NetRules, nft, problems
from corral.paths import Paths
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.netrules import (
    CONNECTED,
    REFUSED_BY_RULES,
    delete_table,
    listeners,
    listeners_in,
    probe,
    table_listing,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

UID = 47211  # a uid of the test's own: no process runs under it
NODE = "10.213.51.1"  # this node's cluster address (a /24: the cluster network)
OTHER_ADDRESS = "10.213.52.1"  # another address of this node (replication, say)
PEER = "10.213.51.7"  # another node of the cluster, in a namespace of its own
OUTSIDE = "10.213.59.2"  # a host that is none of the cluster's (in the peer namespace)
METADATA = "169.254.169.254"


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@dataclass
class Bed:
    node: NamespaceThread
    peer: NamespaceThread
    paths: Paths


def _node_side(peer_ns: str) -> None:
    _sh("ip", "link", "set", "lo", "up")
    _sh("ip", "addr", "add", f"{METADATA}/32", "dev", "lo")
    _sh("ip", "link", "add", "brrep", "type", "bridge")
    _sh("ip", "addr", "add", f"{OTHER_ADDRESS}/24", "dev", "brrep")
    _sh("ip", "link", "set", "brrep", "up")
    _sh("ip", "link", "add", "vnode", "type", "veth", "peer", "name", "vpeer", "netns", peer_ns)
    _sh("ip", "addr", "add", f"{NODE}/24", "dev", "vnode")
    _sh("ip", "link", "set", "vnode", "up")
    _sh("ip", "route", "add", f"{OUTSIDE}/32", "dev", "vnode")


def _peer_side() -> None:
    _sh("ip", "link", "set", "lo", "up")
    _sh("ip", "addr", "add", f"{PEER}/24", "dev", "vpeer")
    _sh("ip", "addr", "add", f"{OUTSIDE}/32", "dev", "vpeer")
    _sh("ip", "link", "set", "vpeer", "up")
    _sh("ip", "route", "add", f"{NODE}/32", "dev", "vpeer")


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    paths = Paths(tmp_path)
    for key, text in (
        ("node_primary_ips", f"node1 {NODE}\nnode2 {PEER}\n"),
        ("node_secondary_ips", f"node1 {NODE}\nnode2 {PEER}\n"),
        ("master_ip", NODE),
    ):
        paths.ssconf_file(key).parent.mkdir(parents=True, exist_ok=True)
        paths.ssconf_file(key).write_text(text + "\n")
    with NamespaceThread() as node, NamespaceThread() as peer:
        node.call(_node_side, peer.name)
        peer.call(_peer_side)
        yield Bed(node, peer, paths)


def _targets(ports: list[int]) -> list[tuple[str, str, int]]:
    noded, rapi, ssh, loop, meta, other = ports
    return [
        ("tcp", NODE, noded),
        ("tcp", NODE, rapi),
        ("tcp", NODE, ssh),
        ("tcp", "127.0.0.1", loop),
        ("tcp", "127.0.0.9", loop),  # all of 127.0.0.0/8 is the node's
        ("tcp", METADATA, meta),
        ("tcp", OTHER_ADDRESS, other),
    ]


NODE_ENDPOINTS = [(NODE, 1811), (NODE, 5080), ("0.0.0.0", 22), ("0.0.0.0", 0),
                  (METADATA, 80), (OTHER_ADDRESS, 0)]  # fmt: skip


def test_a_ruled_uid_reaches_none_of_the_nodes_networks(bed: Bed) -> None:
    rules = NetRules(bed.paths)

    async def scenario() -> None:
        with listeners(NODE_ENDPOINTS) as ports:
            mine = _targets(ports)
            # Before: the uid reaches everything (the refusals below are the rules').
            assert await asyncio.to_thread(probe, mine, UID) == [CONNECTED] * len(mine)
            await rules.guard("inst1", UID)
            await rules.guard("inst1", UID)  # idempotent
            assert await asyncio.to_thread(probe, mine, UID) == [REFUSED_BY_RULES] * len(mine)
            assert await asyncio.to_thread(probe, mine) == [CONNECTED] * len(mine)  # noded's
            # Another guest under the same uid (the kvm security user): the
            # rules stay until the last one stops.
            await rules.guard("inst2", UID)
            await rules.release("inst1")
            assert await asyncio.to_thread(probe, mine[:1], UID) == [REFUSED_BY_RULES]
            await rules.release("inst2")
            assert await asyncio.to_thread(table_listing, rules.table) == ""
            assert await asyncio.to_thread(probe, mine, UID) == [CONNECTED] * len(mine)

    bed.node.call(asyncio.run, scenario())


def test_other_nodes_are_refused_outside_hosts_and_links_are_not(bed: Bed) -> None:
    rules = NetRules(bed.paths)
    with listeners_in(bed.peer, [("0.0.0.0", 0), ("0.0.0.0", 0)]) as (port, other_port):
        peer, other, outside = (
            ("tcp", PEER, port),
            ("tcp", PEER, other_port),
            ("tcp", OUTSIDE, port),
        )

        async def scenario() -> list[list[str | int]]:
            await rules.guard("inst1", UID)
            seen = [await asyncio.to_thread(probe, [peer, other, outside], UID)]
            # A migration's link: exactly the target's endpoint, for this guest's uid.
            await rules.allow("inst1", [(PEER, port)])
            assert f"{UID} . {PEER} . {port}" in await asyncio.to_thread(table_listing, rules.table)
            seen.append(await asyncio.to_thread(probe, [peer, other], UID))
            await rules.disallow("inst1")
            seen.append(await asyncio.to_thread(probe, [peer], UID))
            await rules.release("inst1")
            return seen

        seen = bed.node.call(asyncio.run, scenario())
    refused = REFUSED_BY_RULES
    assert seen == [[refused, refused, CONNECTED], [CONNECTED, refused], [refused]]


def test_verify_sees_missing_rules_and_restore_brings_them_back(bed: Bed) -> None:
    rules = NetRules(bed.paths)
    guests = {"inst1": UID}

    async def scenario() -> list[list[str]]:
        seen = [await asyncio.to_thread(problems, bed.paths, guests)]
        await rules.guard("inst1", UID)
        seen.append(await asyncio.to_thread(problems, bed.paths, guests))
        seen.append(await asyncio.to_thread(problems, bed.paths, {**guests, "inst9": UID + 1}))
        await asyncio.to_thread(delete_table, rules.table)  # by hand
        seen.append(await asyncio.to_thread(problems, bed.paths, guests))
        # noded's start: the rules of the guests still running come back.
        await NetRules(bed.paths).restore(guests)
        seen.append(await asyncio.to_thread(problems, bed.paths, guests))
        await asyncio.to_thread(
            subprocess.run, ["nft", "flush", "chain", "inet", rules.table, "guest"], check=True
        )
        seen.append(await asyncio.to_thread(problems, bed.paths, guests))
        # No guest left: a restarted noded removes the table.
        await NetRules(bed.paths).restore({})
        seen.append([await asyncio.to_thread(table_listing, rules.table)])
        return seen

    seen = bed.node.call(asyncio.run, scenario())
    table = nft.table_name(bed.paths)
    assert seen == [
        [f"the nft table inet {table} of the network rules for QEMU's users is missing"],
        [],
        ["the network rules for instance inst9's QEMU user (uid 47212) are missing"],
        [f"the nft table inet {table} of the network rules for QEMU's users is missing"],
        [],
        [f"the nft table inet {table} lacks some of the network rules for QEMU's users"],
        [""],
    ]


def test_a_node_without_nft_refuses_clearly_and_changes_nothing(
    bed: Bed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(nft.NFT_ENV, "/nonexistent/nft")
    rules = NetRules(bed.paths)
    with pytest.raises(errors.OpExecError, match=r"no nft \(install Debian's nftables") as err:
        bed.node.call(asyncio.run, rules.guard("inst1", UID))
    assert "use_network_rules=false" in err.value.message
    assert rules.uid_of("inst1") is None
    assert problems(bed.paths, {"inst1": UID}) == [
        "guests inst1 need network rules, but this node has no nft"
    ]
    monkeypatch.delenv(nft.NFT_ENV)
    assert bed.node.call(table_listing, rules.table) == ""


def test_tables_are_per_node_root() -> None:
    assert nft.table_name(Paths(Path("/"))) == "corral"
    first, second = (nft.table_name(Paths(Path(f"/tmp/n{i}"))) for i in (1, 2))
    assert first != second and first.startswith("corral_")
