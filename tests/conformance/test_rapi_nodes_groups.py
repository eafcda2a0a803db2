"""Ganeti 3.0.2's own RAPI client changing nodes and node groups of a
two-node Corral cluster over HTTPS: node roles, node modify, group create,
modify, assign, rename, delete, storage units, powercycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_rapi_client import READER, WRITER, done, ganeti_rapi, ok, refused
from tests.helpers.cluster import running_cluster
from tests.helpers.multinode import add_node

NODE2 = "node2.example.com"

_SCRIPT = r"""
n2 = A["node2"]
call("role/before", R.GetNodeRole, n2)
job("role/drained", W.SetNodeRole, n2, "drained")
call("role/after-drain", R.GetNodeRole, n2)
job("role/offline", W.SetNodeRole, n2, "offline")
call("role/after-offline", R.GetNodeRole, n2)
job("role/regular", W.SetNodeRole, n2, "regular", force=True)
call("role/after-regular", R.GetNodeRole, n2)
call("role/bogus", W.SetNodeRole, n2, "emperor")
call("role/master", W.SetNodeRole, A["node"], "drained")
job("role/master/job", W.SetNodeRole, A["node"], "drained")
call("role/reader", R.SetNodeRole, n2, "drained")
job("node/modify", W.ModifyNode, n2, vm_capable=False, ndparams={"spindle_count": 4})
call("node/after-modify", R.GetNode, n2)
job("node/modify/back", W.ModifyNode, n2, vm_capable=True, ndparams={"spindle_count": "default"})
job("storage", W.GetNodeStorageUnits, n2, "file", "node,type,name,allocatable")
job("storage/modify", W.ModifyNodeStorageUnits, n2, "lvm-pv", "/dev/sda", allocatable=False)
job("storage/repair", W.RepairNodeStorageUnits, n2, "file", "x")
job("powercycle", W.PowercycleNode, n2)
job("group/create", W.CreateGroup, "rack1", alloc_policy="last_resort")
call("group/created", R.GetGroup, "rack1")
job("group/modify", W.ModifyGroup, "rack1", alloc_policy="preferred", ndparams={"ssh_port": 2222})
job("group/assign", W.AssignGroupNodes, "rack1", [n2])
job("group/rename", W.RenameGroup, "rack1", "rack2")
call("group/renamed", R.GetGroup, "rack2")
job("group/delete/full", W.DeleteGroup, "rack2")
job("group/assign/back", W.AssignGroupNodes, "default", [n2])
job("group/delete", W.DeleteGroup, "rack2")
call("groups/after", R.GetGroups)
"""


@pytest.fixture(scope="module")
def answers(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("rapi-admin")
    with running_cluster(root / "master") as cl:
        node2 = add_node(cl, root / "node2", NODE2)
        try:
            cl.add_rapi_user(WRITER[0], WRITER[1], "write")
            cl.add_rapi_user(READER[0], READER[1], "read")
            yield ganeti_rapi(cl, _SCRIPT, node2=NODE2)
        finally:
            node2.stop()


def failed(answers: dict[str, Any], key: str) -> str:
    """The failure of a job that was accepted and then failed."""
    answer = answers[key]
    assert "failed" in answer, (key, answer)
    return str(answer["failed"])


def test_node_roles(answers: dict[str, Any]) -> None:
    assert ok(answers, "role/before") == "master-candidate"
    for key in ("role/drained", "role/offline", "role/regular"):
        done(answers, key)
    assert ok(answers, "role/after-drain") == "drained"
    assert ok(answers, "role/after-offline") == "offline"
    # As Ganeti: a node brought back online fills the candidate pool if it can.
    assert ok(answers, "role/after-regular") == "master-candidate"
    assert refused(answers, "role/bogus") == 400
    assert "only via master-failover" in failed(answers, "role/master/job")
    assert refused(answers, "role/reader") == 403


def test_node_modify_and_storage(answers: dict[str, Any]) -> None:
    assert done(answers, "node/modify") == [[["vm_capable", "False"]]]
    node = ok(answers, "node/after-modify")
    assert node["vm_capable"] is False and node["ndparams"]["spindle_count"] == 4
    done(answers, "node/modify/back")
    (rows,) = done(answers, "storage")
    assert [r[:2] for r in rows] == [[NODE2, "file"]] and rows[0][3] is True
    assert "No disk template of storage type 'lvm-vg'" in failed(answers, "storage/modify")
    assert "can not be repaired" in failed(answers, "storage/repair")
    assert "not supported by Corral yet" in failed(answers, "powercycle")


def test_group_lifecycle(answers: dict[str, Any]) -> None:
    done(answers, "group/create")
    assert ok(answers, "group/created")["alloc_policy"] == "last_resort"
    assert done(answers, "group/modify") == [[["ndparams", "{'ssh_port': 2222}"]]]
    done(answers, "group/assign")
    assert done(answers, "group/rename") == ["rack2"]
    renamed = ok(answers, "group/renamed")
    assert renamed["node_list"] == [NODE2] and renamed["alloc_policy"] == "preferred"
    assert "not empty" in failed(answers, "group/delete/full")
    done(answers, "group/assign/back")
    done(answers, "group/delete")
    assert ok(answers, "groups/after") == ["default"]
