"""gnt-node add, readd and remove against real daemons: Ganeti's checks and
messages, the node-add/node-remove hooks, and unreachable nodes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.node import join_server
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import NO_CHECKS, failed, ok
from tests.helpers.multinode import add_node, free_address, start_joining_node
from tests.helpers.noded import Noded, start_noded
from tests.helpers.osdef import make_os

NODE2 = "node2.example.com"
MASTER = "node1.example.com"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("addrm")) as cluster:
        yield cluster


def node_rows(cl: TestCluster, *fields: str) -> dict[str, list[str]]:
    out = ok(
        cl.gnt("node", "list", "--no-headers", "--separator=|", "-o", ",".join(["name", *fields]))
    )
    return {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}


@pytest.fixture
def node2(cl: TestCluster, tmp_path: Path) -> Iterator[Noded]:
    """node2 joined; stopped and removed from the cluster afterwards."""
    node = add_node(cl, tmp_path / "node2", NODE2)
    try:
        yield node
    finally:
        node.stop()
        if NODE2 in node_rows(cl):
            ok(cl.gnt("node", "remove", NODE2))


def add(cl: TestCluster, address: str, *extra: str, name: str = NODE2) -> Result:
    return cl.gnt("node", "add", "--node-ip", address, *extra, name)


def test_add_then_remove_returns_the_node_to_join_mode(cl: TestCluster, node2: Noded) -> None:
    assert node_rows(cl, "pip", "sip", "master_candidate")[NODE2] == [
        node2.address, node2.address, "Y",
    ]  # fmt: skip
    ok(cl.gnt("node", "remove", NODE2))
    assert NODE2 not in node_rows(cl)
    assert not join_server.is_joined(node2.paths)
    assert not list(node2.paths.data_dir.glob("ssconf_*"))
    assert node2.pid is not None  # the same noded, waiting for a join again


def test_adding_twice_and_names_or_addresses_in_use(
    cl: TestCluster, node2: Noded, tmp_path: Path
) -> None:
    failed(add(cl, node2.address), f"Node {NODE2} already in the cluster (as {NODE2})",
           "please retry with '--readd'")  # fmt: skip
    failed(add(cl, cl.node_ip, name=MASTER), "already in the cluster")
    # The address of an existing node, under a new name: refused before any contact.
    failed(
        add(cl, node2.address, name="node3.example.com"),
        "New node ip address(es) conflict with existing node node2.example.com",
    )
    failed(add(cl, "127.0.0.1", "-s", "127.0.0.3", name="node3.example.com"),
           "The master has no secondary ip but the new node has one")  # fmt: skip
    assert sorted(node_rows(cl)) == [MASTER, NODE2]


def test_readd_of_a_node_still_in_the_cluster(cl: TestCluster, node2: Noded) -> None:
    uuid = node_rows(cl, "uuid")[NODE2]
    node2.paths.ssconf_file("node_list").unlink()
    out = ok(add(cl, node2.address, "--readd"))
    assert "is still in the cluster; sending its files" in out
    assert node_rows(cl, "uuid")[NODE2] == uuid
    assert node2.paths.ssconf_file("node_list").read_text() == f"{MASTER}\n{NODE2}\n"


def test_readd_of_a_reinstalled_node_joins_with_a_new_token(
    cl: TestCluster, node2: Noded, tmp_path: Path
) -> None:
    uuid = node_rows(cl, "uuid")[NODE2]
    node2.stop()
    shutil.rmtree(node2.paths.root)  # reinstalled: nothing of the cluster left
    fresh = start_joining_node(cl, node2.paths.root, address=node2.address)
    try:
        failed(add(cl, fresh.address), "already in the cluster")
        ok(add(cl, fresh.address, "--readd"))
        assert node_rows(cl, "uuid")[NODE2] == uuid
        assert join_server.is_joined(fresh.paths)
    finally:
        fresh.stop()


def test_readd_refusals(cl: TestCluster) -> None:
    text = "Node node9.example.com not in the cluster - please retry without '--readd'"
    failed(add(cl, "127.0.0.1", "--readd", name="node9.example.com"), text)
    failed(
        add(cl, cl.node_ip, "--readd", name=MASTER), f"Node {MASTER} is the master, cannot readd"
    )


def test_ssh_options_other_than_ganeti_defaults_are_refused(cl: TestCluster) -> None:
    for option in ("--force-join", "--no-node-setup"):
        failed(add(cl, "127.0.0.1", option), f"Option {option} is about the SSH set-up")


def test_no_ssh_key_check_is_accepted(cl: TestCluster, tmp_path: Path) -> None:
    """Ganeti's QA adds nodes with --no-ssh-key-check: no SSH, no fingerprint
    to check, the join goes on."""
    node = start_joining_node(cl, tmp_path / "node2")
    try:
        ok(add(cl, node.address, "--no-ssh-key-check"))
        assert node_rows(cl, "pip")[NODE2] == [node.address]
        ok(cl.gnt("node", "remove", NODE2))
    finally:
        node.stop()


def test_unreachable_node_during_add_leaves_nothing(cl: TestCluster) -> None:
    address = free_address(cl.port, {cl.node_ip})
    failed(add(cl, address), f"Cannot reach the node daemon of {NODE2} at {address}:{cl.port}")
    assert sorted(node_rows(cl)) == [MASTER]


def test_node_without_the_clusters_disk_templates_is_refused(
    cl: TestCluster, tmp_path: Path
) -> None:
    root = tmp_path / "node2"
    storage = root / "srv/ganeti/file-storage"
    storage.parent.mkdir(parents=True)
    storage.write_text("not a directory")  # the file disk template cannot work here
    node = start_joining_node(cl, root)
    try:
        failed(add(cl, node.address), "file")
        assert sorted(node_rows(cl)) == [MASTER]
        assert not join_server.is_joined(node.paths)
    finally:
        node.stop()


def test_remove_refuses_the_master_and_a_node_with_instances(cl: TestCluster, node2: Noded) -> None:
    failed(cl.gnt("node", "remove", MASTER),
           "Node is the master node, failover to another node is required")  # fmt: skip
    make_os(node2.paths, "plain", variants=None)
    ok(cl.gnt("instance", "add", *NO_CHECKS, "-t", "diskless", "-o", "plain", "--no-start",
              "-n", NODE2, "inst1.example.com"))  # fmt: skip
    try:
        text = "Instance inst1.example.com is still running on the node, please remove first"
        failed(cl.gnt("node", "remove", NODE2), text)
        assert NODE2 in node_rows(cl)
    finally:
        ok(cl.gnt("instance", "remove", "-f", "inst1.example.com"))


def test_unreachable_node_is_removed_with_a_warning(cl: TestCluster, node2: Noded) -> None:
    node2.stop()
    out = ok(cl.gnt("node", "remove", NODE2))
    assert "Errors encountered on the remote node while leaving the cluster" in out
    assert NODE2 not in node_rows(cl)
    # Back, it still holds the cluster's files: it does not take a join.
    back = start_noded(node2.paths, node2.address, node2.port)
    try:
        failed(add(cl, node2.address), "This node is in a cluster already")
        assert NODE2 not in node_rows(cl)
    finally:
        back.stop()


def _env_hook(cl: TestCluster, paths_root: Path, hpath: str, phase: str, out: Path) -> None:
    directory = paths_root / "etc/ganeti/hooks" / f"{hpath}-{phase}.d"
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "10-env"
    script.write_text(f'#!/bin/sh\nenv > "{out}"\n')
    script.chmod(0o755)


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_hooks_of_add_and_remove(cl: TestCluster, tmp_path: Path) -> None:
    root2 = tmp_path / "node2"
    out = {name: tmp_path / name for name in ("pre", "post", "post2", "rmpre", "rmpost", "rm2")}
    _env_hook(cl, cl.paths.root, "node-add", "pre", out["pre"])
    _env_hook(cl, cl.paths.root, "node-add", "post", out["post"])
    _env_hook(cl, root2, "node-add", "post", out["post2"])
    _env_hook(cl, cl.paths.root, "node-remove", "pre", out["rmpre"])
    _env_hook(cl, cl.paths.root, "node-remove", "post", out["rmpost"])
    _env_hook(cl, root2, "node-remove", "pre", out["rm2"])
    try:
        node = add_node(cl, root2, NODE2)
        try:
            pre, post, post2 = (_env(out[k]) for k in ("pre", "post", "post2"))
            expected = {
                "NODE_NAME": NODE2, "NODE_PIP": node.address, "NODE_SIP": node.address,
                "MASTER_CAPABLE": "True", "VM_CAPABLE": "True", "OP_TARGET": NODE2,
            }  # fmt: skip
            for key, value in expected.items():
                assert pre[f"GANETI_{key}"] == value
                assert post[f"GANETI_POST_{key}"] == value
            assert post["GANETI_OP_CODE"] == "OP_NODE_ADD"
            assert post2["GANETI_POST_NODE_NAME"] == NODE2  # on the new node too
            ok(cl.gnt("node", "remove", NODE2))
            assert _env(out["rmpre"])["GANETI_NODE_NAME"] == NODE2
            assert _env(out["rmpost"])["GANETI_POST_NODE_NAME"] == NODE2
            assert not out["rm2"].exists()  # not on the node being removed
        finally:
            node.stop()
    finally:
        shutil.rmtree(cl.paths.hooks_dir / "node-add-pre.d")
        shutil.rmtree(cl.paths.hooks_dir / "node-add-post.d")
        shutil.rmtree(cl.paths.hooks_dir / "node-remove-pre.d")
        shutil.rmtree(cl.paths.hooks_dir / "node-remove-post.d")
