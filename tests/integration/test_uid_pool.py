"""The cluster's uid pool end to end: ``gnt-cluster init --uid-pool``, changes
through ``gnt-cluster modify`` and RAPI, ``info`` and ``/2/info``, the ssconf
files of the master and of a joined node, and the node side reading them."""

from __future__ import annotations

from pathlib import Path

from corral.node.uidpool import UidPool
from tests.helpers.cluster import new_root, running_cluster
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import add_node
from tests.helpers.rapi import Rapi, add_users
from tests.helpers.waiting import wait_until


def info_line(text: str) -> str:
    return next(line.strip() for line in text.splitlines() if "uid pool:" in line)


def test_init_modify_info_rapi(tmp_path: Path) -> None:
    with running_cluster(tmp_path, "--uid-pool", "3000,1000-1001") as cl:
        assert info_line(cl.gnt("cluster", "info").stdout) == "uid pool: 1000-1001, 3000"
        assert cl.paths.ssconf_file("uid_pool").read_text() == "1000-1001\n3000\n"
        node = UidPool(cl.paths)
        assert node.ranges() == [[1000, 1001], [3000, 3000]]

        ok = cl.gnt("cluster", "modify", "--add-uids", "4000-4001", "--remove-uids", "3000")
        assert ok.rc == 0, ok.stderr
        assert info_line(cl.gnt("cluster", "info").stdout) == "uid pool: 1000-1001, 4000-4001"
        assert node.ranges() == [[1000, 1001], [4000, 4001]]

        add_users(cl)
        rapi = Rapi(cl, "writer", "wpw")
        assert rapi.get("/2/info")["uid_pool"] == [[1000, 1001], [4000, 4001]]
        job = rapi.job("PUT", "/2/modify", {"uid_pool": [[7, 9], [2, 2]]})
        assert wait_final(cl.client(), [job])[0][0] == "success"
        # As Ganeti: a pool set through the opcode is kept as given.
        assert rapi.get("/2/info")["uid_pool"] == [[7, 9], [2, 2]]
        assert cl.paths.ssconf_file("uid_pool").read_text() == "7-9\n2\n"

        bad = rapi.job("PUT", "/2/modify", {"add_uids": [[9, 1]]})
        status, result = wait_final(cl.client(), [bad], ("opresult",))[0]
        assert status == "error"
        assert "Lower user-id range boundary value (9) is larger than higher" in str(result)
        assert rapi.get("/2/info")["uid_pool"] == [[7, 9], [2, 2]]


def test_init_refuses_a_bad_pool(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    for pool, message in (
        ("5-3", "Lower user-id range boundary value (5) is larger than higher boundary value (3)"),
        ("1-4294967296", "is larger than UIDPOOL_UID_MAX (4294967295)."),
        ("1-2-3", "Invalid user-id range definition. Only one hyphen allowed: ['1', '2', '3']"),
    ):
        result = cl.init("--uid-pool", pool)
        assert result.rc != 0
        assert message in result.stderr
        assert not cl.paths.config_db.exists()


def test_node2_gets_pool(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "n1", "--uid-pool", "1000") as cl:
        node2 = add_node(cl, tmp_path / "n2")
        try:
            pool2 = UidPool(node2.paths)
            assert pool2.ranges() == [[1000, 1000]]
            assert cl.gnt("cluster", "modify", "--add-uids", "2000-2009").rc == 0
            wait_until(
                lambda: pool2.ranges() == [[1000, 1000], [2000, 2009]],
                timeout=30,
                what="the new pool in node2's ssconf file",
            )
        finally:
            node2.stop()
