"""The master IP on a cluster whose nodes each have a network stack of their
own: it is up on the master node's interface only, answers the other nodes,
goes down and up with gnt-cluster deactivate-/activate-master-ip, takes a new
netmask, is refused a bad one, and moves to the new master with
gnt-cluster master-failover (the stores in etcd, masterd standing by on the
candidates), where RAPI answers on it while the old master's RAPI names the
new master, and back when that master's masterd is killed (its successor has
the dead master's node let the address go)."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import bootstrap, testbed
from corral.process.daemons import start_daemon
from tests.helpers.crash import MASTERD, kill_9
from tests.helpers.etcd_cluster import etcd_pid
from tests.helpers.netns import NetnsBed
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

MASTER_IP = "10.213.0.200"  # no node's: the nodes have .2, .3, .4
NETDEV = "eth0"
SETTLE = 60.0


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    root: Path = tmp_path_factory.mktemp("mip")
    with NetnsBed(3, ifname=NETDEV) as network:
        init = ["--master-ip", MASTER_IP, "--master-netdev", NETDEV]
        running = testbed.up(root, nodes=3, network=network, init_args=init)
        try:
            yield running
        finally:
            running.down()
            for node in running.nodes:  # the members outlive noded
                pid = etcd_pid(node.paths)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _in(bed: testbed.Testbed, node: testbed.BedNode, argv: list[str]) -> str:
    run = subprocess.run(
        bed.network.wrap(node.index, argv), capture_output=True, text=True, check=False
    )
    return run.stdout


def _addresses(bed: testbed.Testbed, node: testbed.BedNode) -> list[str]:
    """The addresses on the node's interface (``ip/prefix``)."""
    out = _in(bed, node, ["ip", "-o", "-4", "addr", "show", "dev", NETDEV])
    return [line.split()[3] for line in out.splitlines()]


def _holders(bed: testbed.Testbed) -> list[str]:
    """The nodes whose interface has the master IP."""
    return [
        n.name for n in bed.nodes if any(a.split("/")[0] == MASTER_IP for a in _addresses(bed, n))
    ]


def _answers(bed: testbed.Testbed, node: testbed.BedNode, address: str = MASTER_IP) -> bool:
    """Whether ``address`` (the master IP) answers pings sent from ``node``."""
    run = subprocess.run(
        bed.network.wrap(node.index, ["fping", "-c", "1", "-t", "300", address]),
        capture_output=True,
        check=False,
    )
    return run.returncode == 0


def _info(bed: testbed.Testbed) -> str:
    return _ok(bed.gnt("cluster", "info"))


def test_the_master_ip_is_up_on_the_master_only(bed: testbed.Testbed) -> None:
    wait_until(lambda: _holders(bed) == [bed.master.name], SETTLE, "the master IP on node 1")
    assert f"{MASTER_IP}/32" in _addresses(bed, bed.master)
    assert _answers(bed, bed.nodes[2])
    info = _info(bed)
    assert f"master netdev: {NETDEV}\n" in info
    assert "master netmask: 32\n" in info
    assert "use external master IP address setup script: False\n" in info


def test_deactivate_and_activate(bed: testbed.Testbed) -> None:
    wait_until(lambda: _holders(bed) == [bed.master.name], SETTLE, "the master IP on node 1")
    _ok(bed.gnt("cluster", "deactivate-master-ip", "--yes"))
    assert _holders(bed) == []
    assert not _answers(bed, bed.nodes[1])
    _ok(bed.gnt("cluster", "activate-master-ip"))
    assert _holders(bed) == [bed.master.name]
    # (node 2 forgets the address's failed neighbour entry first)
    wait_until(lambda: _answers(bed, bed.nodes[1]), SETTLE, "the master IP answering node 2")
    # Without --yes and without a terminal the question is answered no.
    asked = subprocess.run(
        bed.network.wrap(
            1, [sys.executable, "-m", "corral.cli.gnt_cluster", "deactivate-master-ip"]
        ),
        env={**bed.env(), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal: the answer is no
    )
    assert asked.returncode == 1, asked.stderr
    assert _holders(bed) == [bed.master.name]


def test_activation_refused_while_another_machine_has_the_address(
    bed: testbed.Testbed,
) -> None:
    wait_until(lambda: _holders(bed) == [bed.master.name], SETTLE, "the master IP on node 1")
    _ok(bed.gnt("cluster", "deactivate-master-ip", "--yes"))
    squatter = bed.nodes[2]
    add = ["ip", "addr", "add", f"{MASTER_IP}/32", "dev", NETDEV]
    subprocess.run(bed.network.wrap(squatter.index, add), check=True)
    try:
        wait_until(lambda: _answers(bed, bed.master), SETTLE, "node 3 answering the master IP")
        refused = bed.gnt("cluster", "activate-master-ip")
        assert refused.returncode == 1
        assert "Could not activate the master IP" in refused.stderr
        assert "Error: master IP address configured on another machine." in refused.stderr
        assert _holders(bed) == [squatter.name]
    finally:
        delete = ["ip", "addr", "del", f"{MASTER_IP}/32", "dev", NETDEV]
        subprocess.run(bed.network.wrap(squatter.index, delete), check=True)
    _ok(bed.gnt("cluster", "activate-master-ip"))
    assert _holders(bed) == [bed.master.name]


def test_a_new_netmask_and_a_bad_one(bed: testbed.Testbed) -> None:
    wait_until(lambda: _holders(bed) == [bed.master.name], SETTLE, "the master IP on node 1")
    for bad in ("33", "0"):
        refused = bed.gnt("cluster", "modify", "--master-netmask", bad)
        assert refused.returncode == 1
        assert f"CIDR netmask ({bad}) not valid" in refused.stderr
        assert "wrong_input" in refused.stderr
    assert "master netmask: 32\n" in _info(bed)
    assert f"{MASTER_IP}/32" in _addresses(bed, bed.master)
    _ok(bed.gnt("cluster", "modify", "--master-netmask", "24"))
    assert f"{MASTER_IP}/24" in _addresses(bed, bed.master)
    assert f"{MASTER_IP}/32" not in _addresses(bed, bed.master)
    _ok(bed.gnt("cluster", "modify", "--master-netmask", "32"))
    assert f"{MASTER_IP}/32" in _addresses(bed, bed.master)


def test_a_new_master_netdev(bed: testbed.Testbed) -> None:
    wait_until(lambda: _holders(bed) == [bed.master.name], SETTLE, "the master IP on node 1")
    _ok(bed.gnt("cluster", "modify", "--master-netdev", "lo"))
    assert _holders(bed) == []  # not on eth0 any more
    on_lo = _in(bed, bed.master, ["ip", "-o", "-4", "addr", "show", "dev", "lo"])
    assert f" {MASTER_IP}/32 " in on_lo
    assert "master netdev: lo\n" in _info(bed)
    _ok(bed.gnt("cluster", "modify", "--master-netdev", NETDEV))
    assert _holders(bed) == [bed.master.name]
    on_lo = _in(bed, bed.master, ["ip", "-o", "-4", "addr", "show", "dev", "lo"])
    assert MASTER_IP not in on_lo


def test_the_external_script(bed: testbed.Testbed) -> None:
    script = bed.master.paths.conf_dir / "scripts" / "master-ip-setup"
    seen = bed.master.paths.root / "mip-seen"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$1 $MASTER_NETDEV $MASTER_IP $MASTER_NETMASK $CLUSTER_IP_VERSION" >> {seen}\n'
    )
    script.chmod(0o755)
    _ok(bed.gnt("cluster", "modify", "--use-external-mip-script", "yes"))
    try:
        _ok(bed.gnt("cluster", "activate-master-ip"))
        assert seen.read_text() == f"start {NETDEV} {MASTER_IP} 32 4\n"
        script.write_text("#!/bin/sh\necho no way; exit 3\n")
        failed = bed.gnt("cluster", "activate-master-ip")
        assert failed.returncode == 1
        assert "Could not activate the master IP" in failed.stderr
        assert "Failed to start the master IP. Script return value: 3, output: 'no way'" in (
            failed.stderr
        )
    finally:
        _ok(bed.gnt("cluster", "modify", "--use-external-mip-script", "no"))
    assert _holders(bed) == [bed.master.name]


def _rapi_get(bed: testbed.Testbed, node: testbed.BedNode, address: str) -> tuple[int, str]:
    """GET /2/info on ``address`` from inside ``node``: the status and body."""
    code = (
        "import ssl, sys, urllib.request, urllib.error\n"
        "ctx = ssl._create_unverified_context()\n"
        "try:\n"
        f"    url = 'https://{address}:5080/2/info'\n"
        "    r = urllib.request.urlopen(url, context=ctx, timeout=10)\n"
        "    print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code); print(e.read().decode())\n"
    )
    out = _in(bed, node, [sys.executable, "-c", code])
    status, _, body = out.partition("\n")
    return int(status), body


def _start_masterd(bed: testbed.Testbed, node: testbed.BedNode) -> None:
    """masterd on ``node`` (it stands by while another leads)."""
    masterd = [sys.executable, "-m", "corral.daemons.masterd"]
    start_daemon(bed.network.wrap(node.index, masterd), testbed.daemon_env(node.paths), 30)


def _standby(bed: testbed.Testbed, node: testbed.BedNode) -> None:
    """masterd (standing by) and corral-rapi on ``node``."""
    env = testbed.daemon_env(node.paths)
    _start_masterd(bed, node)
    rapi = bootstrap.rapi_command(node.paths, node.address)
    start_daemon(bed.network.wrap(node.index, rapi), env, timeout=30)


def test_the_master_ip_and_rapi_follow_master_failover(bed: testbed.Testbed) -> None:
    wait_until(lambda: _holders(bed) == [bed.master.name], SETTLE, "the master IP on node 1")
    _ok(bed.gnt("cluster", "modify", "--etcd-members=yes"))
    for node in bed.nodes:
        wait_until(node.paths.store_home.exists, SETTLE, f"{node.name} has the stores' home")
    node1, node2, node3 = bed.nodes
    _standby(bed, node2)
    status, body = _rapi_get(bed, node3, node2.address)
    assert status == 502
    assert f"This node ({node2.name}) is not the master; the master node is {node1.name}" in body
    _ok(bed.gnt("cluster", "master-failover", node=node2))
    wait_until(lambda: _holders(bed) == [node2.name], SETTLE, "the master IP on node 2")
    assert _answers(bed, node3)
    status, body = _rapi_get(bed, node3, MASTER_IP)
    assert status == 200, body
    assert json.loads(body)["master"] == node2.name
    status, body = _rapi_get(bed, node3, node1.address)
    assert status == 502
    assert f"This node ({node1.name}) is not the master; the master node is {node2.name}" in body

    # node 2's masterd dies: node 1's, standing by, leads once the lease runs
    # out, has node 2's noded let the address go and brings it up.
    kill_9(node2.paths.run_dir / f"{MASTERD}.pid")
    wait_until(lambda: _holders(bed) == [node1.name], SETTLE, "the master IP back on node 1")
    status, body = _rapi_get(bed, node3, MASTER_IP)
    assert status == 200, body
    assert json.loads(body)["master"] == node1.name


def test_a_master_that_cannot_renew_its_lease_drops_the_master_ip(
    bed: testbed.Testbed,
) -> None:
    """The etcd members of nodes 2 and 3 frozen: the master cannot renew its
    lease, stops leading and takes the address down (nobody may lead without
    a quorum); thawed, it leads again and brings the address back."""
    node1, node2, node3 = bed.nodes
    wait_until(lambda: _holders(bed) == [node1.name], SETTLE, "the master IP on node 1")
    frozen = [etcd_pid(node.paths) for node in (node2, node3)]
    assert None not in frozen
    for pid in frozen:
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: _holders(bed) == [], SETTLE, "the master IP down everywhere")
        assert not _answers(bed, node3)
    finally:
        for pid in frozen:
            assert pid is not None
            os.kill(pid, signal.SIGCONT)
    wait_until(lambda: _holders(bed) == [node1.name], SETTLE, "the master IP back on node 1")


def test_a_master_ip_that_is_a_node_address_stays_with_its_node(bed: testbed.Testbed) -> None:
    """A cluster without an address of its own has its first node's as its
    master IP (``gnt-cluster init`` or ``rename`` to a name that does not
    resolve).  That node cut off, the next master must not bring its
    address up: both nodes would then hold it and each drop the other's
    packets as its own, as the etcd fault test's nodes once did.  (Last in
    the module: the cluster keeps node 1's address as its master IP.)"""
    node1, node2, node3 = bed.nodes
    wait_until(lambda: _holders(bed) == [node1.name], SETTLE, "the master IP on node 1")
    _ok(bed.gnt("cluster", "rename", "-f", testbed.CLUSTER_NAME))
    assert _holders(bed) == []
    master_ip = node2.paths.ssconf_file("master_ip")
    wait_until(lambda: master_ip.read_text().strip() == node1.address, SETTLE, "node 2's ssconf")
    _start_masterd(bed, node2)  # (the failover test killed node 2's)
    log = node2.paths.daemon_log(MASTERD)
    warning = f"The master IP {node1.address} is node {node1.name}'s own address"
    link = ["ip", "link", "set", NETDEV]
    subprocess.run(bed.network.wrap(node1.index, [*link, "down"]), check=True)
    try:
        wait_until(lambda: warning in log.read_text(), SETTLE, "node 2 leading, leaving it be")
        refused = bed.gnt("cluster", "activate-master-ip", node=node2)
        assert refused.returncode == 1
        assert f"{warning}: not bringing it up on {node2.name}" in refused.stderr
        for other in (node2, node3):
            held = [address.split("/")[0] for address in _addresses(bed, other)]
            assert node1.address not in held, (other.name, held)
    finally:
        subprocess.run(bed.network.wrap(node1.index, [*link, "up"]), check=True)
    for other in (node2, node3):
        answers = functools.partial(_answers, bed, other, node1.address)
        wait_until(answers, SETTLE, f"node 1 answering {other.name}")
