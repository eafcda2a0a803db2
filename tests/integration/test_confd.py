"""confd and config.data on a 3-node test bed (real daemons, real UDP):
config.data on the master and the candidates, current after a change,
unchanged by verify, gone from a demoted node, sent again by redist-conf;
each node's confd answering from it; ``gnt-node list-drbd``;
``ganeti-confd``; ``renew-crypto --new-confd-hmac-key``.  Ganeti's own
client: tests/conformance/test_confd_ganeti.py."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from corral import testbed
from corral.confd import client
from corral.confd import protocol as P
from corral.confd.server import NO_CONFIG
from corral.paths import Paths
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow
NODE1, NODE2, NODE3 = (testbed.node_name(k) for k in (1, 2, 3))
TIMEOUT = 60  # seconds for a change to reach a node


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    running = testbed.up(tmp_path_factory.mktemp("confd-bed"), nodes=3,
                         init_args=PERMISSIVE_IPOLICY)  # fmt: skip
    try:
        yield running
    finally:
        running.down()


def gnt_ok(bed: testbed.Testbed, *args: str) -> str:
    result = bed.gnt(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def ask(paths: Paths, kind: P.Request, query: Any = None, key: bytes | None = None) -> Any:
    """A node's confd's reply, asked with the node's key (or ``key``)."""
    root = str(paths.root)
    return client.ask(key or client.read_key(root), client.local_endpoint(root), kind, query)


def answer(paths: Paths, kind: P.Request, query: Any = None) -> Any:
    """The answer of an OK reply, or None: no reply (a confd that has not
    loaded the key yet drops what it cannot answer) or not OK."""
    root = str(paths.root)
    try:
        reply = client.ask(client.read_key(root), client.local_endpoint(root), kind, query, 2)
    except client.ConfdError:
        return None
    return reply.answer if reply.status == P.Status.OK else None


def config_data(paths: Paths) -> bytes | None:
    try:
        return paths.config_data.read_bytes()
    except FileNotFoundError:
        return None


def copies_alike(bed: testbed.Testbed, nodes: list[testbed.BedNode]) -> bool:
    master = config_data(bed.master.paths)
    return master is not None and all(config_data(n.paths) == master for n in nodes)


def serves_serial(paths: Paths, serial: int) -> bool:
    """Whether the node's confd answers from config.data of at least ``serial``."""
    got = answer(paths, P.Request.CONFIG_QUERY, "/serial_no")
    return got is not None and got >= serial


def test_on_every_candidate_and_unchanged_by_verify(bed: testbed.Testbed) -> None:
    wait_until(lambda: copies_alike(bed, bed.nodes), TIMEOUT, "config.data on every candidate")
    data = json.loads(config_data(bed.master.paths) or b"")
    assert {n["name"] for n in data["nodes"].values()} == {NODE1, NODE2, NODE3}
    sums = [hashlib.sha1(config_data(n.paths) or b"").hexdigest() for n in bed.nodes]
    result = bed.gnt("cluster", "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [hashlib.sha1(config_data(n.paths) or b"").hexdigest() for n in bed.nodes] == sums
    for node in bed.nodes:  # each node's confd answers from it
        serves = functools.partial(serves_serial, node.paths, data["serial_no"])
        wait_until(serves, TIMEOUT, f"{node.name}'s confd")
        assert ask(node.paths, P.Request.CLUSTER_MASTER).answer == NODE1


def test_a_change_reaches_every_copy_and_confd(bed: testbed.Testbed) -> None:
    gnt_ok(bed, "cluster", "add-tags", "confd-fresh")
    wanted = json.loads(config_data(bed.master.paths) or b"")["serial_no"]

    def tagged(node: testbed.BedNode) -> bool:
        return "confd-fresh" in (answer(node.paths, P.Request.CONFIG_QUERY, "/cluster/tags") or [])

    for node in bed.nodes:
        wait_until(functools.partial(tagged, node), TIMEOUT, f"the tag in {node.name}'s confd")
        assert json.loads(config_data(node.paths) or b"")["serial_no"] >= wanted


def test_demoted_node_loses_it_and_redist_conf_repairs(bed: testbed.Testbed) -> None:
    node3, node2 = bed.node(NODE3), bed.node(NODE2)
    gnt_ok(bed, "node", "modify", "-C", "no", NODE3)
    try:
        wait_until(lambda: not node3.paths.config_data.exists(), TIMEOUT, "node3's copy gone")
        wait_until(lambda: ask(node3.paths, P.Request.PING).answer == NO_CONFIG, TIMEOUT,
                   "node3's confd without configuration")  # fmt: skip
        # list-drbd asks the local confd: on node3 it has no configuration.
        drbd = bed.gnt("node", "list-drbd", NODE3, node=node3)
        assert drbd.returncode == 1
        assert f"Query gave non-ok status '1': {NO_CONFIG}" in drbd.stderr
        result = bed.gnt("cluster", "verify")
        assert result.returncode == 0, result.stdout
    finally:
        gnt_ok(bed, "node", "modify", "-C", "yes", NODE3)
    wait_until(lambda: copies_alike(bed, bed.nodes), TIMEOUT, "node3's copy back")
    node2.paths.config_data.unlink()
    gnt_ok(bed, "cluster", "redist-conf")
    assert config_data(node2.paths) == config_data(bed.master.paths)


def test_list_drbd_and_ganeti_confd(bed: testbed.Testbed) -> None:
    wait_until(lambda: answer(bed.master.paths, P.Request.PING), TIMEOUT, "the master's confd")
    header = "Node Minor Instance Disk Role PeerNode\n"
    assert gnt_ok(bed, "node", "list-drbd", NODE2) == header
    assert gnt_ok(bed, "node", "list-drbd", "--no-headers", NODE2) == ""
    assert gnt_ok(bed, "node", "list-drbd", "--separator=|", NODE2) == header.replace(" ", "|")
    unknown = bed.gnt("node", "list-drbd", "nosuch.example.com")
    assert unknown.returncode == 1
    assert unknown.stderr == (
        "Query gave non-ok status '1': OpPrereqError"
        ' "Node name nosuch.example.com not found" ECodeNoEnt\n'
    )
    two = bed.gnt("node", "list-drbd", NODE1, NODE2)
    assert two.returncode != 0
    env = {**os.environ, **bed.env()}
    confd = [sys.executable, "-m", "corral.daemons.confd"]
    version = subprocess.run([*confd, "--version"], env=env, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("ganeti-confd (corral) ")
    where = subprocess.run(confd, env=env, capture_output=True, text=True)
    assert where.returncode == 0
    assert f"UDP {bed.master.address}:{P.default_port()}" in where.stderr


def first_reply_salt(paths: Paths, keys: list[bytes]) -> str:
    """Send a PING signed with each key in turn; the rsalt the first reply answers."""
    host, port = client.local_endpoint(str(paths.root))
    salts = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(TIMEOUT)
        for index, key in enumerate(keys):
            request = P.ConfdRequest(P.Request.PING, None, f"salt-{index}")
            sock.sendto(P.pack_request(key, request, time.time()), (host, port))
            salts.append(request.rsalt)
        data = sock.recv(P.MAX_DATAGRAM)
    for key in keys:
        try:
            return P.unsign(key, data)[1]
        except P.BadMessage:
            continue
    raise AssertionError("a reply signed with none of the keys")


def test_renew_confd_hmac_key(bed: testbed.Testbed) -> None:
    wait_until(lambda: copies_alike(bed, bed.nodes), TIMEOUT, "config.data on every candidate")
    old = bed.master.paths.confd_hmac_key.read_bytes()
    result = bed.gnt("cluster", "renew-crypto", "--new-confd-hmac-key", "--force")
    assert result.returncode == 0, result.stderr
    new = bed.master.paths.confd_hmac_key.read_bytes()
    assert new != old and len(new.strip()) == 40
    for node in bed.nodes:
        assert node.paths.confd_hmac_key.read_bytes() == new

        # Once confd has the new key, a request signed with the old one gets
        # no answer: the first reply is the new key's.
        def new_key_first(paths: Paths = node.paths) -> bool:
            return first_reply_salt(paths, [old, new]) == "salt-1"

        wait_until(new_key_first, TIMEOUT, f"{node.name}'s confd with the new key")

        # A candidate promoted back by an earlier test may get its config.data late.
        def answers(paths: Paths = node.paths) -> bool:
            return bool(ask(paths, P.Request.PING, key=new).status == P.Status.OK)

        wait_until(answers, TIMEOUT, f"{node.name}'s confd answering with the new key")
