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
from corral.node.etcd_member import MemberKeeper, MemberWish, etcd_root
from corral.paths import Paths
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
