"""gnt-cluster rename on two-node clusters of real daemons.

Ganeti's QA (``TestClusterRename``): rename, verify clean, rename back,
verify clean; the name reaches every node's ssconf files before the job
ends.  The master IP follows the name: on loopback, where test names do not
resolve, it is the master node's address (as at init); in network
namespaces whose ``/etc/hosts`` (``ip netns exec``'s ``/etc/netns/<ns>/``)
makes the new name resolve, it is that address, and an address that answers
on the network is refused.  The output is compared with Ganeti's own
gnt-cluster in tests/conformance/test_cluster_remote.py."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import testbed
from tests.helpers.netns import NetnsBed

pytestmark = pytest.mark.slow

OLD, NEW = testbed.CLUSTER_NAME, "cluster2.example.com"


def gnt(bed: testbed.Testbed, *args: str) -> tuple[int, str, str]:
    result = bed.gnt("cluster", *args)
    return result.returncode, result.stdout, result.stderr


def ssconf(node: testbed.BedNode, key: str) -> str:
    return node.paths.ssconf_file(key).read_text().strip()


def config_values(bed: testbed.Testbed, *names: str) -> list[object]:
    with bed.client() as client:
        return list(client.call("QueryConfigValues", list(names)))


def verify_clean(bed: testbed.Testbed) -> None:
    rc, out, err = gnt(bed, "verify")
    assert rc == 0 and "ERROR" not in out, out + err


def refusal(ecode: str, message: str) -> str:
    return (
        "Failure: prerequisites not met for this operation:\n"
        f"error type: {ecode}, error details:\n{message}\n"
    )


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    running = testbed.up(tmp_path_factory.mktemp("rename"), nodes=2)
    try:
        yield running
    finally:
        running.down()


def test_ganeti_qa_rename_verify_and_back(bed: testbed.Testbed) -> None:
    master_ip = ssconf(bed.master, "master_ip")
    assert gnt(bed, "rename", "-f", NEW) == (0, f"Cluster renamed from '{OLD}' to '{NEW}'\n", "")
    # Every node has the new name once the command returns.
    assert [ssconf(node, "cluster_name") for node in bed.nodes] == [NEW, NEW]
    assert config_values(bed, "cluster_name") == [NEW]
    assert f"Cluster name: {NEW}\n" in gnt(bed, "info")[1]
    # The name does not resolve: the master IP is the master node's address.
    assert [ssconf(node, "master_ip") for node in bed.nodes] == [master_ip] * 2
    assert master_ip == bed.master.address
    verify_clean(bed)
    assert gnt(bed, "rename", "-f", OLD)[:2] == (0, f"Cluster renamed from '{NEW}' to '{OLD}'\n")
    assert [ssconf(node, "cluster_name") for node in bed.nodes] == [OLD, OLD]
    verify_clean(bed)


def test_rename_runs_the_cluster_rename_hooks(bed: testbed.Testbed) -> None:
    out = bed.root / "hooks-out"
    out.mkdir()
    for node in bed.nodes:
        for phase in ("pre", "post"):
            directory = node.paths.hooks_dir / f"cluster-rename-{phase}.d"
            directory.mkdir(parents=True, exist_ok=True)
            script = directory / "record"
            script.write_text(f"#!/bin/sh\nenv > {out}/{node.index}-$GANETI_HOOKS_PHASE\n")
            script.chmod(0o755)
    try:
        assert gnt(bed, "rename", "-f", NEW)[0] == 0
    finally:
        for node in bed.nodes:
            for phase in ("pre", "post"):
                shutil.rmtree(node.paths.hooks_dir / f"cluster-rename-{phase}.d")
        assert gnt(bed, "rename", "-f", OLD)[0] == 0
    # Ganeti's nodes: pre hooks on the master, post hooks on every node.
    assert sorted(p.name for p in out.iterdir()) == ["1-post", "1-pre", "2-post"]
    env = dict(line.split("=", 1) for line in (out / "1-pre").read_text().splitlines())
    assert env["GANETI_OP_CODE"] == "OP_CLUSTER_RENAME"
    assert env["GANETI_OBJECT_TYPE"] == "CLUSTER"
    assert (env["GANETI_OP_TARGET"], env["GANETI_NEW_NAME"]) == (OLD, NEW)


@pytest.mark.parametrize(
    ("name", "ecode", "message"),
    [
        (OLD, "wrong_input", "Neither the name nor the IP address of the cluster has changed"),
        ("Bad!Name", "wrong_input", "Invalid hostname 'bad!name'"),
        ("a..b", "wrong_input", "Invalid hostname 'a..b'"),
        # localhost is this machine: its address answers.
        ("localhost", "resource_not_unique", "The given cluster IP address (127.0.0.1) is"
         " reachable on the network"),
    ],
)  # fmt: skip
def test_refusals_change_nothing(bed: testbed.Testbed, name: str, ecode: str, message: str) -> None:
    before = config_values(bed, "cluster_name", "config_serial")
    assert gnt(bed, "rename", "-f", name) == (1, "", refusal(ecode, message))
    assert config_values(bed, "cluster_name", "config_serial") == before


def test_dry_run_and_unconfirmed_rename_change_nothing(bed: testbed.Testbed) -> None:
    before = config_values(bed, "cluster_name", "config_serial")
    assert gnt(bed, "rename", "-f", "--dry-run", NEW) == (0, "", "")
    # Without -f the question goes to the terminal; there is none: no.
    assert gnt(bed, "rename", NEW) == (1, "", "")
    assert config_values(bed, "cluster_name", "config_serial") == before


RESOLVED = "renamed.example.com"
RESOLVED_IP = "10.214.7.7"  # no route to it in the namespaces: nothing answers
TAKEN = "taken.example.com"


@pytest.fixture(scope="module")
def netns_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    network = NetnsBed(2)
    # ip netns exec mounts /etc/netns/<namespace>/hosts on /etc/hosts for
    # everything run in the master's namespace (masterd, the commands).
    hosts_dir = Path("/etc/netns") / network.namespace(1)
    hosts_dir.mkdir(parents=True)
    try:
        (hosts_dir / "hosts").write_text(
            f"127.0.0.1 localhost\n{RESOLVED_IP} {RESOLVED}\n{network.address(2)} {TAKEN}\n"
        )
        with network:
            running = testbed.up(tmp_path_factory.mktemp("rename-ns"), nodes=2, network=network)
            try:
                yield running
            finally:
                running.down()
    finally:
        shutil.rmtree(hosts_dir)


def on_lo(bed: testbed.Testbed) -> list[str]:
    """The addresses on the master node's ``lo`` (the cluster's master_netdev)."""
    argv = bed.network.wrap(1, ["ip", "-o", "-4", "addr", "show", "dev", "lo"])
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines()]


def test_the_master_ip_follows_a_name_that_resolves(netns_bed: testbed.Testbed) -> None:
    bed = netns_bed
    assert [ssconf(node, "master_ip") for node in bed.nodes] == [bed.master.address] * 2
    assert gnt(bed, "rename", "-f", RESOLVED)[:2] == (
        0,
        f"Cluster renamed from '{OLD}' to '{RESOLVED}'\n",
    )
    assert [ssconf(node, "master_ip") for node in bed.nodes] == [RESOLVED_IP] * 2
    assert [ssconf(node, "cluster_name") for node in bed.nodes] == [RESOLVED] * 2
    # As Ganeti's: the master IP came up at its new address.
    assert f"{RESOLVED_IP}/32" in on_lo(bed)
    verify_clean(bed)
    # Node 2's address answers: it is another machine's.
    message = f"The given cluster IP address ({bed.nodes[1].address}) is reachable on the network"
    assert gnt(bed, "rename", "-f", TAKEN) == (1, "", refusal("resource_not_unique", message))
    # Back to a name that does not resolve: the master node's address, as at init.
    assert gnt(bed, "rename", "-f", OLD)[0] == 0
    assert [ssconf(node, "master_ip") for node in bed.nodes] == [bed.master.address] * 2
    assert f"{RESOLVED_IP}/32" not in on_lo(bed)  # down from the old address
    verify_clean(bed)
