"""Ganeti 3.0.2's own confd client (``ganeti.confd.client``, as burnin and
``gnt-node list-drbd`` use it: ``GetConfdClient`` finds the candidates in
the ssconf files, the key in ``hmac.key`` and the port by the
``ganeti-confd`` service name) against a Corral cluster's confd over UDP:
every request type its client sends, and packets it must not answer (a
wrong key, a stale clock, garbage), after which confd still answers.
(Each answer's details: tests/unit/test_confd_answers.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conformance.ganeti import run_ganeti_python
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import NO_CHECKS, add, ok
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

INST = "web1.example.com"
INST_IP = "198.18.7.5"

ASK = r"""
import json, socket, time
from ganeti.confd import client as cc
from ganeti import confd, pathutils, utils

replies = {}

def callback(reply):
    if reply.type == cc.UPCALL_REPLY:
        r = reply.server_reply
        replies[reply.orig_request.rsalt] = [r.status, r.answer, r.serial]

counting = cc.ConfdCountingCallback(cc.ConfdFilterCallback(callback))
client = cc.GetConfdClient(counting)

def ask(kind, query=None, some_client=None):
    some_client = some_client or client
    req = cc.ConfdClientRequest(type=kind, query=query)
    counting.RegisterQuery(req.rsalt)
    some_client.SendRequest(req, async_=False)
    while not counting.AllAnswered():
        if not some_client.ReceiveReply(timeout=2):
            break
    return replies.get(req.rsalt)
"""

EVERY_TYPE = (
    ASK
    + r"""
C = constants
out = {
  "ping": ask(C.CONFD_REQ_PING),
  "master": ask(C.CONFD_REQ_CLUSTER_MASTER),
  "master_fields": ask(C.CONFD_REQ_CLUSTER_MASTER, {C.CONFD_REQQ_FIELDS: [
      C.CONFD_REQFIELD_NAME, C.CONFD_REQFIELD_IP, C.CONFD_REQFIELD_MNODE_PIP]}),
  "role": ask(C.CONFD_REQ_NODE_ROLE_BYNAME, NODE),
  "role_unknown": ask(C.CONFD_REQ_NODE_ROLE_BYNAME, "nosuch.example.com"),
  "pips": ask(C.CONFD_REQ_NODE_PIP_LIST),
  "mc_pips": ask(C.CONFD_REQ_MC_PIP_LIST),
  "inst_ips": ask(C.CONFD_REQ_INSTANCES_IPS_LIST),
  "pip_by_ip": ask(C.CONFD_REQ_NODE_PIP_BY_INSTANCE_IP, {C.CONFD_REQQ_IP: INST_IP}),
  "pip_by_ips": ask(C.CONFD_REQ_NODE_PIP_BY_INSTANCE_IP,
                    {C.CONFD_REQQ_IPLIST: [INST_IP, "198.18.7.99"]}),
  "drbd": ask(C.CONFD_REQ_NODE_DRBD, NODE),
  "drbd_unknown": ask(C.CONFD_REQ_NODE_DRBD, "nosuch.example.com"),
  "disks": ask(C.CONFD_REQ_INSTANCE_DISKS, INST),
  "query": ask(C.CONFD_REQ_CONFIG_QUERY, "/cluster/cluster_name"),
  "query_missing": ask(C.CONFD_REQ_CONFIG_QUERY, "/cluster/nosuch"),
  "collectors": ask(C.CONFD_REQ_DATA_COLLECTORS),
}
out["drbd_valid"] = confd.HTNodeDrbd(out["drbd"][1])
print(json.dumps(out))
"""
)

UNANSWERED = r"""
import json, socket, time
from ganeti.confd import client as cc
from ganeti import confd, pathutils, serializer, utils

ip = utils.ReadFile(pathutils.DATA_DIR + "/ssconf_master_candidates_ips").split()[0]
key = utils.ReadFile(pathutils.CONFD_HMAC_KEY)

def packed(key, when):
    req = cc.ConfdClientRequest(type=constants.CONFD_REQ_PING)
    return req, confd.PackMagic(serializer.DumpSignedJson(req.ToDict(), key, "%d" % when))

now = time.time()
bad = [
    packed("not the cluster key\n", now)[1],
    packed(key, now - 600)[1],  # stale
    packed(key, now + 600)[1],  # from the future
    b'plj0{"msg": 1}', b"plj0" + bytes(range(256)), b"hello", b"",
]
raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
raw.settimeout(30)
for datagram in bad:
    raw.sendto(datagram, (ip, 1814))
good, datagram = packed(key, time.time())
raw.sendto(datagram, (ip, 1814))
# confd answers in order: a reply to any bad packet would come first.
answer, salt = cc.GetConfdClient(lambda reply: None)._UnpackReply(raw.recv(65536))
print(json.dumps({"first_reply_is_the_good_one": salt == good.rsalt, "status": answer.status}))
"""


@pytest.fixture(scope="module")
def confd_cluster(gcluster: TestCluster) -> TestCluster:
    """The module's cluster with an instance (a file disk, a NIC with an IP),
    its confd answering from a config.data that has it."""
    make_os(gcluster.paths, "plain", variants=None)
    ok(add(gcluster, INST, "-t", "file", "--disk", "0:size=16m", "-o", "plain",
           "--no-start", "--net", f"0:ip={INST_IP}", *NO_CHECKS))  # fmt: skip
    wait_until(lambda: INST.encode() in gcluster.paths.config_data.read_bytes(), 30, "export")
    return gcluster


def run(cl: TestCluster, script: str) -> dict[str, Any]:
    code = f"NODE = {cl.node_name!r}\nINST = {INST!r}\nINST_IP = {INST_IP!r}\n" + script
    result = run_ganeti_python(cl.paths.root, code)
    assert result.rc == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def test_every_request_type(confd_cluster: TestCluster) -> None:
    cl = confd_cluster
    config = json.loads(cl.paths.config_data.read_bytes())
    cluster_serial = config["cluster"]["serial_no"]
    [node] = config["nodes"].values()
    [inst] = config["instances"].values()

    got: dict[str, Any] = {}

    def instance_known() -> bool:
        # confd reloads config.data within a second of its change
        nonlocal got
        got = run(cl, EVERY_TYPE)
        return got["disks"] is not None and got["disks"][0] == 0

    wait_until(instance_known, 60, "confd's answers with the instance")
    ip, serial = cl.node_ip, cluster_serial
    assert got["ping"] == [0, 3000000, 0]
    assert got["master"] == [0, cl.node_name, serial]
    assert got["master_fields"] == [0, [cl.node_name, config["cluster"]["master_ip"], ip], serial]
    assert got["role"] == [0, 0, serial]  # CONFD_NODE_ROLE_MASTER
    assert got["role_unknown"][0] == 1
    assert "Node name nosuch.example.com not found" in got["role_unknown"][1]
    assert got["pips"] == [0, [ip], serial]
    assert got["mc_pips"] == [0, [ip], serial]
    assert got["inst_ips"] == [0, [INST_IP], serial]
    assert got["pip_by_ip"] == [0, ip, serial]
    assert got["pip_by_ips"] == [0, [[0, ip, serial], [1, 0, 0]], serial]
    assert got["drbd"] == [0, [], node["serial_no"]] and got["drbd_valid"]
    assert got["drbd_unknown"][0] == 1
    assert got["disks"] == [0, [config["disks"][inst["disks"][0]]], inst["serial_no"]]
    assert got["disks"][1][0]["nodes"] == [node["uuid"]]  # what burnin reads
    assert got["query"] == [0, "cluster.example.com", serial]
    assert got["query_missing"] == [1, 2, 0]  # CONFD_ERROR_ARGUMENT
    assert got["collectors"] == [0, {}, serial]


def test_unsigned_stale_and_garbage_get_no_answer(confd_cluster: TestCluster) -> None:
    assert run(confd_cluster, UNANSWERED) == {"first_reply_is_the_good_one": True, "status": 0}
