"""config.data in-process (tests/helpers/inprocess.py): Ganeti's layout,
on the master and the master candidates only, current after each change,
private values redacted, and the incremental renderer's bytes those of a
whole rendering.  Real daemons: tests/integration/test_confd.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.services.config_data import Renderer, render, take_image
from tests.helpers.inprocess import OS_NAME, InProcessCluster, in_process_cluster
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until_async

PRIVATE_VALUE = "pr1vate-6c5d4e"
GANETI_TOP = {
    "version", "cluster", "nodes", "nodegroups", "instances", "networks", "disks",
    "filters", "serial_no", "ctime", "mtime",
}  # fmt: skip


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=3) as cluster:
        for index in (1, 2, 3):
            make_os(cl_paths(cluster, index), "withparams", variants=None,
                    parameters={"note": "a private note"})  # fmt: skip
        yield cluster


def cl_paths(cl: InProcessCluster, index: int) -> Any:
    return cl.node(index).paths


async def ok(cl: InProcessCluster, op: dict[str, Any]) -> None:
    job = await cl.run(op)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error


def create(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create",
        "disk_template": "file", "disks": [{"size": 4}], "nics": [], "os_type": OS_NAME,
        "pnode": testbed.node_name(2), "name_check": False, "ip_check": False,
        "start": False, **fields,
    }  # fmt: skip


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_bytes())
    return data


async def settled(cl: InProcessCluster) -> None:
    assert await cl.export.settled(30)


async def test_ganeti_layout_on_master_and_candidates(cl: InProcessCluster) -> None:
    await ok(cl, create("inst1.example.com"))
    await settled(cl)
    data = load(cl.paths.config_data)
    assert set(data) == GANETI_TOP
    assert data["version"] == C.CONFIG_VERSION
    assert data["serial_no"] == cl.cfg.serial
    assert data["cluster"]["cluster_name"] == "cluster.example.com"
    assert data["cluster"]["master_node"] == cl.config_node(1).uuid
    inst = cl.instance("inst1.example.com")
    assert inst is not None
    entry = data["instances"][inst.uuid]
    assert entry["name"] == inst.name and entry["primary_node"] == cl.config_node(2).uuid
    # Ganeti 3.0: disks by uuid in the instance, the disks in their own table.
    assert entry["disks"] == [inst.disks[0].uuid]
    disk = data["disks"][inst.disks[0].uuid]
    assert (disk["dev_type"], disk["size"], disk["nodes"]) == ("file", 4, [inst.primary_node])
    assert {n["name"] for n in data["nodes"].values()} == {testbed.node_name(k) for k in (1, 2, 3)}
    for index in (2, 3):  # the other candidates have the same bytes
        assert cl_paths(cl, index).config_data.read_bytes() == cl.paths.config_data.read_bytes()


async def test_a_change_reaches_every_copy(cl: InProcessCluster) -> None:
    await settled(cl)
    before = load(cl_paths(cl, 3).config_data)["serial_no"]
    await ok(cl, {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["fresh"]})

    def current(index: int) -> bool:
        data = load(cl_paths(cl, index).config_data)
        return "fresh" in data["cluster"]["tags"] and data["serial_no"] > before

    await wait_until_async(lambda: all(current(k) for k in (1, 2, 3)), 30, "the new tag")


async def test_the_masters_copy_follows_each_job(cl: InProcessCluster) -> None:
    for tag in ("first", "second", "third"):
        await ok(cl, {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag]})
        # Jobs do not wait for it (its writing grows with the configuration).
        await cl.export.written(cl.cfg.serial)
        data = load(cl.paths.config_data)
        assert tag in data["cluster"]["tags"] and data["serial_no"] == cl.cfg.serial


async def test_a_job_ends_with_the_masters_ssconf_files_written(cl: InProcessCluster) -> None:
    for tag in ("first", "second", "third"):
        await ok(cl, {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag]})
        # No wait: the job was reported done once the files held its change.
        assert tag in cl.paths.ssconf_file("cluster_tags").read_text().split()


async def test_demoted_node_loses_it_promoted_gets_it(cl: InProcessCluster) -> None:
    await settled(cl)
    node3 = testbed.node_name(3)
    await ok(cl, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node3,
                  "master_candidate": False, "auto_promote": False})  # fmt: skip
    await ok(cl, {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["after"]})
    await settled(cl)
    assert not cl_paths(cl, 3).config_data.exists()
    assert "after" in load(cl_paths(cl, 2).config_data)["cluster"]["tags"]
    data = load(cl.paths.config_data)
    assert data["nodes"][cl.config_node(3).uuid]["master_candidate"] is False
    await ok(cl, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node3, "master_candidate": True})
    # As Ganeti's: a new candidate has the file (the one naming it a
    # candidate) when the job that made it one ends.
    assert cl_paths(cl, 3).config_data.read_bytes() == cl.paths.config_data.read_bytes()


async def test_private_values_are_redacted(cl: InProcessCluster) -> None:
    await ok(cl, create("inst1.example.com", os_type="withparams",
                        osparams_private={"note": PRIVATE_VALUE}))  # fmt: skip
    await ok(cl, {"OP_ID": "OP_CLUSTER_SET_PARAMS",
                  "osparams_private_cluster": {"withparams": {"note": PRIVATE_VALUE}}})  # fmt: skip
    await settled(cl)
    for index in (1, 2, 3):
        raw = cl_paths(cl, index).config_data.read_bytes()
        assert PRIVATE_VALUE.encode() not in raw
    data = load(cl.paths.config_data)
    [inst] = data["instances"].values()
    assert inst["osparams_private"] == {"note": C.REDACTED}
    assert data["cluster"]["osparams_private_cluster"] == {"withparams": {"note": C.REDACTED}}


async def test_incremental_rendering_gives_the_whole_renderings_bytes(
    cl: InProcessCluster,
) -> None:
    renderer = Renderer()

    def follows() -> bytes:
        """The renderer following the commits gives the whole rendering's bytes."""
        image = take_image(cl.cfg, since=renderer.serial)
        data = renderer.render(image)
        assert data == render(image)
        return data

    follows()
    await ok(cl, create("inst1.example.com"))
    await ok(cl, create("inst2.example.com", disks=[{"size": 4}, {"size": 4, "name": "data"}]))
    follows()
    await ok(cl, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "inst1.example.com"})
    await ok(cl, {"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": "inst2.example.com",
                  "tags": ["t"]})  # fmt: skip
    await ok(cl, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": testbed.node_name(3),
                  "drained": True})  # fmt: skip
    data = follows()
    inst = cl.instance("inst2.example.com")
    assert inst is not None
    assert json.loads(data)["instances"][inst.uuid]["tags"] == ["t"]
    # A disk leaves its instance for a row of its own, and comes back, in
    # one commit each.
    modify = {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "inst2.example.com"}
    await ok(cl, {**modify, "disks": [["detach", "data", {}]]})
    assert len(json.loads(follows())["disks"]) == 2
    await ok(cl, {**modify, "disks": [["attach", 0, {"name": "data"}]]})
    assert len(json.loads(follows())["disks"]) == 2


async def test_rendering_starts_over_when_the_commits_are_no_longer_known(
    cl: InProcessCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    renderer = Renderer()
    renderer.render(take_image(cl.cfg, since=renderer.serial))
    since = renderer.serial
    assert since is not None
    await ok(cl, create("inst1.example.com"))
    await ok(cl, {"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": "inst1.example.com",
                  "tags": ["t"]})  # fmt: skip
    assert cl.cfg.changes_since(since) is not None
    # The manager kept fewer commits than the renderer missed.
    monkeypatch.setattr(cl.cfg, "changes_since", lambda serial: None)
    image = take_image(cl.cfg, since=since)
    assert image.changes is None
    assert renderer.render(image) == render(image)
