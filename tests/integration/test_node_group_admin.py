"""gnt-node and gnt-group against a real two-node cluster: flags and their
rules, node groups, assigning nodes, storage listing and refusals.  Every
refusal changes nothing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded
from tests.helpers.osdef import make_os

NODE2 = "node2.example.com"


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestCluster, Noded]]:
    root = tmp_path_factory.mktemp("admin")
    with running_cluster(root / "node1") as cl:
        node2 = add_node(cl, root / "node2", NODE2)
        try:
            yield cl, node2
        finally:
            node2.stop()


def nodes(cl: TestCluster, fields: str) -> dict[str, list[str]]:
    out = cl.gnt("node", "list", "--no-headers", "--separator=|", "-o", f"name,{fields}")
    assert out.rc == 0, out.stderr
    return {row[0]: row[1:] for row in (line.split("|") for line in out.stdout.splitlines())}


def config_serial(cl: TestCluster) -> int:
    with cl.client() as client:
        serial: int = client.call("QueryConfigValues", ["config_serial"])[0]
    return serial


def refused(cl: TestCluster, tool: str, *args: str, text: str) -> None:
    """The command fails saying ``text``; the configuration is unchanged (the
    failed job itself stays in the queue, as in Ganeti)."""
    before = config_serial(cl)
    out = cl.gnt(tool, *args)
    assert out.rc != 0, out.stdout
    assert text in out.stderr, out.stderr
    assert config_serial(cl) == before


def test_drain_and_offline_are_exclusive_roles(two: tuple[TestCluster, Noded]) -> None:
    cl, _ = two
    # The pool wants as many candidates as there are other capable nodes: the master.
    out = cl.gnt("node", "modify", "--drained=yes", NODE2)
    assert out.rc == 0, out.stderr
    assert "Modified node node2.example.com" in out.stdout
    assert " - master_candidate -> False" in out.stdout
    assert " - drained -> True" in out.stdout
    assert nodes(cl, "role,drained,master_candidate")[NODE2] == ["D", "Y", "N"]
    # Offline clears drained (a node has one role).
    out = cl.gnt("node", "modify", "--offline=yes", NODE2)
    assert out.rc == 0, out.stderr
    assert nodes(cl, "role,drained,offline")[NODE2] == ["O", "N", "Y"]
    # Back online: the node answers, and becomes a candidate again (the pool lacks one).
    out = cl.gnt("node", "modify", "--force", "--offline=no", NODE2)
    assert out.rc == 0, out.stderr
    assert "Auto-promoting node to master candidate" in out.stdout
    assert nodes(cl, "role,offline")[NODE2] == ["C", "N"]
    refused(cl, "node", "modify", "--drained=yes", "--offline=yes", NODE2,
            text="more than one state at the same time")  # fmt: skip


def test_master_keeps_its_role(two: tuple[TestCluster, Noded]) -> None:
    cl, _ = two
    for flag in ("--drained=yes", "--offline=yes", "--master-candidate=no"):
        refused(cl, "node", "modify", flag, cl.node_name, text="only via master-failover")
    refused(cl, "node", "modify", "--master-capable=no", cl.node_name,
            text="Master must remain master capable")  # fmt: skip
    refused(cl, "node", "modify", "--secondary-ip=127.9.9.9", NODE2,
            text="not supported by Corral yet")  # fmt: skip
    refused(cl, "node", "modify", "--node-parameters=exclusive_storage=true", NODE2,
            text="global and cannot be customized at node level")  # fmt: skip
    refused(cl, "node", "modify", "--node-parameters=spindle_count=many", NODE2,
            text="'spindle_count' (value many) is not a valid integer")  # fmt: skip


def test_node_parameters_and_capabilities(two: tuple[TestCluster, Noded]) -> None:
    cl, _ = two
    out = cl.gnt("node", "modify", "--node-parameters=spindle_count=4", "--vm-capable=no", NODE2)
    assert out.rc == 0, out.stderr
    assert " - vm_capable -> False" in out.stdout
    assert nodes(cl, "ndp/spindle_count,vm_capable")[NODE2] == ["4", "N"]
    info = cl.gnt("node", "info", NODE2)
    assert "spindle_count: 4" in info.stdout and "ssh_port: default (22)" in info.stdout
    assert "primary for instances" not in info.stdout  # not vm capable
    out = cl.gnt("node", "modify", "--node-parameters=spindle_count=default", "--vm-capable=yes",
                 NODE2)  # fmt: skip
    assert out.rc == 0, out.stderr
    assert nodes(cl, "ndp/spindle_count,vm_capable")[NODE2] == ["1", "Y"]


def test_groups_lifecycle_and_assignment(two: tuple[TestCluster, Noded]) -> None:
    cl, _ = two
    assert cl.gnt("group", "add", "--alloc-policy=last_resort", "rack2").rc == 0
    refused(cl, "group", "add", "rack2", text="already exists as a node group")
    assert cl.gnt("group", "rename", "rack2", "rack9").rc == 0
    refused(cl, "group", "rename", "rack9", "default", text="clashes with existing node group")
    assert cl.gnt("group", "assign-nodes", "rack9", NODE2).rc == 0
    assert nodes(cl, "group")[NODE2] == ["rack9"]
    refused(cl, "group", "remove", "rack9", text=f"not empty, has the following nodes: {NODE2}")
    out = cl.gnt("group", "modify", "--node-parameters=spindle_count=3",
                 "--alloc-policy=preferred", "rack9")  # fmt: skip
    assert out.rc == 0, out.stderr
    assert "Modified node group rack9" in out.stdout
    listing = cl.gnt("group", "list", "--no-headers", "--separator=|", "rack9")
    assert listing.stdout.startswith("rack9|1|0|preferred|")
    assert nodes(cl, "ndp/spindle_count")[NODE2] == ["3"]  # inherited from the group
    out = cl.gnt("group", "modify", "-D", "drbd:resync-rate=1000", "rack9")
    assert out.rc == 0, out.stderr
    info = cl.gnt("group", "info", "rack9").stdout
    # The group's own value, and the template's other parameters inherited.
    assert "resync-rate: 1000" in info and "c-delay-target: default (1)" in info
    refused(cl, "group", "modify", "-D", "drbd:resync-rate=fast", "rack9",
            text="'resync-rate' (value fast) is not a valid integer")  # fmt: skip
    assert cl.gnt("group", "assign-nodes", "default", NODE2).rc == 0
    assert cl.gnt("group", "remove", "rack9").rc == 0
    refused(cl, "group", "remove", "default", text="not empty")
    groups = cl.gnt("group", "list", "--no-headers", "-o", "name")
    assert groups.stdout.split() == ["default"]


def test_storage_listing_and_refusals(two: tuple[TestCluster, Noded]) -> None:
    cl, _ = two
    out = cl.gnt("node", "list-storage", "--no-headers", "--separator=|",
                 "-o", "node,type,name,allocatable")  # fmt: skip
    assert out.rc == 0, out.stderr
    rows = [line.split("|") for line in out.stdout.splitlines()]
    assert sorted(r[0] for r in rows) == sorted([cl.node_name, NODE2])
    assert {r[1] for r in rows} == {"file"} and {r[3] for r in rows} == {"Y"}
    assert cl.gnt("node", "volumes", "--no-headers").stdout == ""
    refused(cl, "node", "list-storage", "-t", "lvm-vg", text="No disk template of storage type")
    refused(cl, "node", "modify-storage", "--allocatable=no", NODE2, "file", "x",
            text="Storage units of type 'file' can not be modified")  # fmt: skip
    refused(cl, "node", "modify-storage", "--allocatable=no", NODE2, "lvm-pv", "/dev/sda",
            text="No disk template of storage type 'lvm-vg' is enabled")  # fmt: skip
    refused(cl, "node", "repair-storage", NODE2, "file", "x", text="can not be repaired")
    refused(cl, "node", "powercycle", "--yes", NODE2, text="not supported by Corral yet")


def test_node_modify_hooks(two: tuple[TestCluster, Noded], tmp_path: Path) -> None:
    cl, _ = two
    record = tmp_path / "env"
    hooks = cl.paths.hooks_dir / "node-modify-post.d"
    hooks.mkdir(parents=True)
    script = hooks / "10-env"
    script.write_text(f'#!/bin/sh\nenv > "{record}"\n')
    script.chmod(0o755)
    try:
        assert cl.gnt("node", "modify", "--master-capable=yes", NODE2).rc == 0
    finally:
        script.unlink()
    env = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
    assert env["GANETI_OBJECT_TYPE"] == "NODE"
    assert env["GANETI_OP_TARGET"] == NODE2
    assert env["GANETI_MASTER_CAPABLE"] == "True"
    assert env["GANETI_OFFLINE"] == "None" and env["GANETI_DRAINED"] == "None"


def test_group_hooks(two: tuple[TestCluster, Noded], tmp_path: Path) -> None:
    cl, _ = two
    records = {}
    for hpath in ("group-add", "group-rename", "group-modify", "group-remove"):
        hooks = cl.paths.hooks_dir / f"{hpath}-pre.d"
        hooks.mkdir(parents=True)
        records[hpath] = tmp_path / hpath
        script = hooks / "10-env"
        script.write_text(f'#!/bin/sh\nenv > "{records[hpath]}"\n')
        script.chmod(0o755)
    try:
        for argv in (["add", "hooked"], ["rename", "hooked", "hooked2"],
                     ["modify", "--alloc-policy=unallocable", "hooked2"],
                     ["remove", "hooked2"]):  # fmt: skip
            out = cl.gnt("group", *argv)
            assert out.rc == 0, out.stderr
    finally:
        shutil.rmtree(cl.paths.hooks_dir)
    env = {h: dict(line.split("=", 1) for line in p.read_text().splitlines() if "=" in line)
           for h, p in records.items()}  # fmt: skip
    assert env["group-add"]["GANETI_GROUP_NAME"] == "hooked"
    assert env["group-add"]["GANETI_OBJECT_TYPE"] == "GROUP"
    assert env["group-rename"]["GANETI_OLD_NAME"] == "hooked"
    assert env["group-rename"]["GANETI_NEW_NAME"] == "hooked2"
    assert env["group-modify"]["GANETI_NEW_ALLOC_POLICY"] == "unallocable"
    assert env["group-remove"]["GANETI_GROUP_NAME"] == "hooked2"


def test_node_with_instances_stays_vm_capable(two: tuple[TestCluster, Noded]) -> None:
    cl, _ = two
    make_os(cl.paths, "debootstrap")
    added = cl.gnt("instance", "add", "-t", "diskless", "-o", "debootstrap+default", "-n",
                   cl.node_name, "--no-name-check", "--no-ip-check", "--no-start",
                   "inst1.example.com")  # fmt: skip
    assert added.rc == 0, added.stderr
    try:
        text = f"Node {cl.node_name} hosts instances, cannot unset the vm_capable flag"
        refused(cl, "node", "modify", "--vm-capable=no", cl.node_name, text=text)
        info = cl.gnt("node", "info", cl.node_name).stdout
        assert "  primary for instances: \n    - inst1.example.com\n" in info, info
    finally:
        assert cl.gnt("instance", "remove", "-f", "inst1.example.com").rc == 0
