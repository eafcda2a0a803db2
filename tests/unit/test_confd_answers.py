"""confd's wire and answers without a network: signatures, clocks and
malformed requests (no answer), and each request type's answer from a
config.data as Ganeti's server gives it.  Over UDP, with Ganeti's own client:
tests/conformance/test_confd_ganeti.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from corral.confd import protocol as P
from corral.confd.answers import MISSING, ConfdView, json_pointer
from corral.confd.server import NO_CONFIG, _Loaded, respond

KEY = b"0123456789abcdef0123456789abcdef01234567\n"
NOW = 1_800_000_000.0
M, N2, N3 = "uuid-m", "uuid-n2", "uuid-n3"
CONFIG: dict[str, Any] = {
    "version": 3000000,
    "serial_no": 40,
    "cluster": {
        "serial_no": 7,
        "master_node": M,
        "master_ip": "127.9.9.9",
        "nicparams": {"default": {"mode": "bridged", "link": "br0"}},
    },
    "nodes": {
        M: {"uuid": M, "name": "node1.example.com", "primary_ip": "127.0.0.1",
            "master_candidate": True, "serial_no": 3},
        N2: {"uuid": N2, "name": "node2.example.com", "primary_ip": "127.0.0.2",
             "master_candidate": True, "drained": True, "serial_no": 4},
        N3: {"uuid": N3, "name": "node3.example.com", "primary_ip": "127.0.0.3",
             "master_candidate": False, "serial_no": 5},
    },
    "instances": {
        "i1": {"uuid": "i1", "name": "web.example.com", "primary_node": N2, "serial_no": 9,
               "disks": ["d1"], "nics": [{"ip": "10.0.0.5"},
                                         {"ip": "10.1.0.5", "nicparams": {"link": "br1"}}]},
    },
    "disks": {"d1": {"uuid": "d1", "dev_type": "file", "nodes": [N2], "size": 4}},
}  # fmt: skip


def ask(kind: P.Request, query: Any = None, config: dict[str, Any] = CONFIG) -> tuple[Any, ...]:
    """(status, answer, serial) of one request through the datagram layer."""
    loaded = _Loaded(KEY, ConfdView(config), "")
    request = P.ConfdRequest(kind, query, "rsalt-1")
    reply = respond(loaded, P.pack_request(KEY, request, NOW), NOW)
    assert reply is not None
    body, salt = P.unsign(KEY, reply)
    assert salt == "rsalt-1" and body["protocol"] == 1
    return body["status"], body["answer"], body["serial"]


OK, ERR = P.Status.OK, P.Status.ERROR
NOT_FOUND = (
    "Failure: prerequisites not met for this operation:\n"
    "error type: ECodeNoEnt, error details:\nNode name nosuch not found"
)


@pytest.mark.parametrize(
    ("kind", "query", "expected"),
    [
        (P.Request.PING, None, (OK, 3000000, 0)),
        (P.Request.CLUSTER_MASTER, None, (OK, "node1.example.com", 7)),
        (P.Request.CLUSTER_MASTER, {"3": [2, 0, 1]},
         (OK, ["127.0.0.1", "node1.example.com", "127.9.9.9"], 7)),
        (P.Request.CLUSTER_MASTER, "x", (ERR, P.ErrorCode.ARGUMENT, 0)),
        (P.Request.NODE_ROLE_BYNAME, "node1.example.com", (OK, P.Role.MASTER, 7)),
        (P.Request.NODE_ROLE_BYNAME, "node1", (OK, P.Role.CANDIDATE, 7)),  # as Ganeti
        (P.Request.NODE_ROLE_BYNAME, "node2", (OK, P.Role.DRAINED, 7)),
        (P.Request.NODE_ROLE_BYNAME, "node3.example.com", (OK, P.Role.REGULAR, 7)),
        (P.Request.NODE_ROLE_BYNAME, "nosuch", (ERR, NOT_FOUND, 0)),
        (P.Request.NODE_ROLE_BYNAME, None, (ERR, "Invalid query type EmptyQuery", 0)),
        (P.Request.NODE_PIP_LIST, None, (OK, ["127.0.0.3", "127.0.0.2", "127.0.0.1"], 7)),
        (P.Request.MC_PIP_LIST, None, (OK, ["127.0.0.2", "127.0.0.1"], 7)),
        (P.Request.INSTANCES_IPS_LIST, None, (OK, ["10.0.0.5"], 7)),
        (P.Request.INSTANCES_IPS_LIST, "br1", (OK, ["10.1.0.5"], 7)),
        (P.Request.INSTANCES_IPS_LIST, "none", (OK, [], 7)),
        (P.Request.NODE_PIP_BY_INSTANCE_IP, {"1": "10.0.0.5"}, (OK, "127.0.0.2", 7)),
        (P.Request.NODE_PIP_BY_INSTANCE_IP, {"1": "10.1.0.5"}, (ERR, P.ErrorCode.UNKNOWN_ENTRY, 0)),
        (P.Request.NODE_PIP_BY_INSTANCE_IP, {"0": "br1", "2": ["10.1.0.5", "10.9.9.9"]},
         (OK, [[OK, "127.0.0.2", 7], [ERR, P.ErrorCode.UNKNOWN_ENTRY, 0]], 7)),
        (P.Request.NODE_PIP_BY_INSTANCE_IP, "10.0.0.5", (ERR, P.ErrorCode.ARGUMENT, 0)),
        (P.Request.NODE_DRBD, "node2.example.com", (OK, [], 4)),
        (P.Request.NODE_DRBD, "nosuch",
         (ERR, 'OpPrereqError "Node name nosuch not found" ECodeNoEnt', 0)),
        (P.Request.INSTANCE_DISKS, "web", (OK, [CONFIG["disks"]["d1"]], 9)),
        (P.Request.INSTANCE_DISKS, "db", (ERR, "Instance not found in the configuration:"
         ' OpPrereqError "Instance name db not found" ECodeNoEnt', 0)),
        (P.Request.NODE_INSTANCES, "node2", (OK, [[CONFIG["instances"]["i1"]], []], 4)),
        (P.Request.CONFIG_QUERY, "/cluster/master_ip", (OK, "127.9.9.9", 7)),
        (P.Request.CONFIG_QUERY, "/instances/i1/nics/1/ip", (OK, "10.1.0.5", 7)),
        (P.Request.CONFIG_QUERY, "/cluster/nosuch", (ERR, P.ErrorCode.ARGUMENT, 0)),
        (P.Request.CONFIG_QUERY, "cluster", (ERR, P.ErrorCode.ARGUMENT, 0)),
        (P.Request.DATA_COLLECTORS, None, (OK, {}, 7)),
    ],
)  # fmt: skip
def test_answers(kind: P.Request, query: Any, expected: tuple[Any, ...]) -> None:
    assert ask(kind, query) == expected


def test_json_pointer_as_ganeti_parses_it() -> None:
    doc = {"a/b": {"~": [10, 20]}, "": 1}
    assert json_pointer(doc, "/a~1b/~0/1") == 20
    assert json_pointer(doc, "/") == 1
    assert json_pointer(doc, "/a~1b/~0/1x") == 20  # a number's leading digits
    assert json_pointer(doc, "/a~1b/~0/2") is MISSING
    assert json_pointer(doc, "/a~1b/~x") == {"~": [10, 20]}  # Ganeti stops at "/~x"
    assert json_pointer(doc, "a") is MISSING


def test_no_configuration_answers_an_error() -> None:
    loaded = _Loaded(KEY, None, NO_CONFIG)
    request = P.ConfdRequest(P.Request.PING, None, "r")
    reply = respond(loaded, P.pack_request(KEY, request, NOW), NOW)
    assert reply is not None
    body, _ = P.unsign(KEY, reply)
    assert (body["status"], body["answer"]) == (P.Status.ERROR, NO_CONFIG)


def signed(text: str, salt: str, key: bytes = KEY) -> bytes:
    return P.sign(key, text, salt)


GOOD = json.dumps({"protocol": 1, "type": 0, "query": None, "rsalt": "r"})


@pytest.mark.parametrize(
    "datagram",
    [
        b"",
        b"plj0",
        b"xxxx" + signed(GOOD, str(int(NOW)))[4:],  # wrong magic
        signed(GOOD, str(int(NOW)), key=b"another key"),  # wrong HMAC
        signed(GOOD, str(int(NOW) - P.MAX_CLOCK_SKEW - 1)),  # stale
        signed(GOOD, str(int(NOW) + P.MAX_CLOCK_SKEW + 1)),  # from the future
        signed(GOOD, "not-a-time"),
        b"plj0{not json",
        b"plj0" + json.dumps({"msg": GOOD, "salt": str(int(NOW))}).encode(),  # unsigned
        signed("[1, 2]", str(int(NOW))),
        signed(json.dumps({"protocol": 1, "type": 12, "rsalt": "r"}), str(int(NOW))),
        signed(json.dumps({"protocol": 1, "type": 0}), str(int(NOW))),  # no rsalt
        signed(
            json.dumps({"protocol": 1, "type": 3, "rsalt": "r", "query": {"3": [7]}}), str(int(NOW))
        ),
        signed(json.dumps({"protocol": 1, "type": 1, "rsalt": "r", "query": 5}), str(int(NOW))),
        bytes(range(256)) * 4,
    ],
)
def test_bad_datagrams_get_no_answer(datagram: bytes) -> None:
    assert respond(_Loaded(KEY, ConfdView(CONFIG), ""), datagram, NOW) is None


def test_clock_within_the_skew_is_answered() -> None:
    datagram = signed(GOOD, str(int(NOW) - P.MAX_CLOCK_SKEW))
    assert respond(_Loaded(KEY, ConfdView(CONFIG), ""), datagram, NOW) is not None


def test_uppercase_hmac_is_accepted_as_ganeti_does() -> None:
    envelope = json.loads(signed(GOOD, str(int(NOW)))[4:])
    envelope["hmac"] = envelope["hmac"].upper()
    datagram = P.MAGIC + json.dumps(envelope).encode()
    assert respond(_Loaded(KEY, ConfdView(CONFIG), ""), datagram, NOW)
