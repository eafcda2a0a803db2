"""The etcd member a node's noded runs (:mod:`corral.node.etcd_member`):
a node in no cluster (one that left it) starts none."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from corral import constants as C
from corral import errors
from corral.crypto.certs import make_ca, write_node_cert, write_pem
from corral.node.etcd_member import MemberKeeper, MemberWish, etcd_root, read_wish
from corral.paths import Paths
from corral.state.etcd.client import EtcdClient, client_ssl_context, put
from corral.state.etcd.members import list_members
from tests.helpers.etcd import loopback_ips
from tests.helpers.waiting import wait_until_async


async def test_a_node_without_its_certificate_starts_no_member(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    wish = MemberWish("n1", "127.0.97.1", 2379, 2380, {"n1": "https://127.0.97.1:2380"}, True)
    with pytest.raises(errors.OpPrereqError, match="in no cluster") as info:
        await MemberKeeper(paths).start(wish)
    assert info.value.ecode == C.ECODE_STATE
    assert not etcd_root(paths).exists()


async def test_noded_starts_its_member_again_when_its_process_ends(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    ca_cert, ca_key = make_ca("keeper-test-ca", 2)
    write_pem(paths.ca_cert, ca_cert, private=False)
    (ip,) = loopback_ips(1)
    write_node_cert(paths, ca_cert, ca_key, "node1.example.com", ip)
    wish = MemberWish("n1", ip, 2379, 2380, {"n1": f"https://{ip}:2380"}, True)
    keeper = MemberKeeper(paths)
    first = (await keeper.start(wish))["pid"]
    try:
        os.kill(first, signal.SIGKILL)

        def again() -> bool:
            pid = keeper.status()["pid"]
            return pid is not None and pid != first

        await wait_until_async(again, 30, "the member started again")
        assert keeper.status()["name"] == "n1"
    finally:
        await keeper.stop(forget=True)
    assert keeper.status()["pid"] is None
    # Stopped on purpose: nobody starts it again.
    assert keeper.process is None and not keeper._supervisors


async def test_forcing_a_new_cluster_needs_a_member_with_data(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    with pytest.raises(errors.OpPrereqError, match="runs no etcd member") as info:
        await MemberKeeper(paths).force_new()
    assert info.value.ecode == C.ECODE_STATE
    keeper = MemberKeeper(paths)
    keeper.wish = MemberWish("n1", "127.0.97.1", 2379, 2380, {}, False)
    with pytest.raises(errors.OpPrereqError, match="has no data yet") as info:
        await keeper.force_new()
    assert info.value.ecode == C.ECODE_STATE


async def test_a_forced_member_is_alone_in_its_cluster_and_stays_so(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    ca_cert, ca_key = make_ca("keeper-test-ca", 2)
    write_pem(paths.ca_cert, ca_cert, private=False)
    ip, lost = loopback_ips(2)
    write_node_cert(paths, ca_cert, ca_key, "node1.example.com", ip)
    # A member of a three-member cluster whose two others never started: no quorum.
    cluster = {f"n{i}": f"https://{a}:2380" for i, a in enumerate((ip, lost, lost), 1)}
    cluster["n3"] = f"https://{lost}:2390"
    keeper = MemberKeeper(paths)
    await keeper.start(MemberWish("n1", ip, 2379, 2380, cluster, True))
    wal = etcd_root(paths) / "data" / "member" / "wal"
    await wait_until_async(wal.is_dir, 30, "the member's log on disk")
    try:
        status = await keeper.force_new()
        assert status["name"] == "n1" and status["pid"] is not None
        # noded started again runs it alone, not with --force-new-cluster again.
        assert read_wish(paths) == MemberWish(
            "n1", ip, 2379, 2380, {"n1": f"https://{ip}:2380"}, False
        )
        cmdline = Path(f"/proc/{status['pid']}/cmdline").read_bytes().split(b"\0")
        assert b"--force-new-cluster=true" in cmdline
        tls = client_ssl_context(paths.ca_cert, paths.server_pem)
        client = EtcdClient([f"https://{ip}:2379"], tls)
        try:
            await client.txn([], [put("/probe", b"1")])  # a quorum of one: it writes
            assert [m.name for m in await list_members(client)] == ["n1"]
        finally:
            await client.close()
    finally:
        await keeper.stop(forget=True)
