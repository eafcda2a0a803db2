"""Ganeti 3.0.2's own RAPI client on ``/2/networks`` of a Corral cluster over
HTTPS: create, list, get, modify, tags, connect, disconnect, delete; bad
input refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_rapi_client import READER, WRITER, done, ganeti_rapi, ok, refused
from tests.helpers.cluster import running_cluster

_SCRIPT = r"""
OUT["NET_FIELDS"] = rlib2.NET_FIELDS
call("networks/before", R.GetNetworks)
job("create", W.CreateNetwork, "lan", "10.50.0.0/24", gateway="10.50.0.1",
    network6="2001:db8::/64", mac_prefix="aa:00:03", add_reserved_ips="10.50.0.7",
    tags="blue")
job("create/dry-run", W.CreateNetwork, "dry", "10.51.0.0/24", dry_run=True)
job("create/again", W.CreateNetwork, "lan", "10.52.0.0/24")
job("create/too-big", W.CreateNetwork, "big", "10.0.0.0/8")
call("create/reader", R.CreateNetwork, "ro", "10.53.0.0/24")
call("create/bad", W.CreateNetwork, "bad", "not-a-network")
call("networks", R.GetNetworks)
call("networks/bulk", R.GetNetworks, bulk=True)
call("network", R.GetNetwork, "lan")
call("network/missing", R.GetNetwork, "nosuch")
job("modify", W.ModifyNetwork, "lan", add_reserved_ips=["10.50.0.8"], gateway6="2001:db8::1")
job("modify/both", W.ModifyNetwork, "lan", gateway="10.50.0.2", remove_reserved_ips=["10.50.0.7"])
call("network/modified", R.GetNetwork, "lan")
job("tags/add", W.AddNetworkTags, "lan", ["red", "green"])
call("tags", R.GetNetworkTags, "lan")
job("tags/delete", W.DeleteNetworkTags, "lan", ["blue"])
call("tags/after", R.GetNetworkTags, "lan")
job("connect", W.ConnectNetwork, "lan", "default", "routed", "rt0", vlan="12")
job("connect/dry-run", W.ConnectNetwork, "lan", "nosuch", "bridged", "br0", dry_run=True)
call("connect/bad-mode", W.ConnectNetwork, "lan", "default", "tunnel", "br0")
call("connect/reader", R.ConnectNetwork, "lan", "default", "bridged", "br0")
call("network/connected", R.GetNetwork, "lan")
job("delete/connected", W.DeleteNetwork, "lan")
job("disconnect", W.DisconnectNetwork, "lan", "default")
call("network/disconnected", R.GetNetwork, "lan")
job("delete", W.DeleteNetwork, "lan")
job("delete/again", W.DeleteNetwork, "lan")
call("networks/after", R.GetNetworks)
"""


@pytest.fixture(scope="module")
def answers(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with running_cluster(tmp_path_factory.mktemp("rapi-networks")) as cl:
        cl.add_rapi_user(WRITER[0], WRITER[1], "write")
        cl.add_rapi_user(READER[0], READER[1], "read")
        yield ganeti_rapi(cl, _SCRIPT)


def failed(answers: dict[str, Any], key: str) -> str:
    answer = answers[key]
    assert "failed" in answer, (key, answer)
    return str(answer["failed"])


def test_create_get_and_list(answers: dict[str, Any]) -> None:
    assert ok(answers, "networks/before") == []
    assert done(answers, "create") == [None]
    assert done(answers, "create/dry-run") == [None]
    assert ok(answers, "networks") == ["lan"]
    (bulk,) = ok(answers, "networks/bulk")
    assert sorted(bulk) == sorted(answers["NET_FIELDS"])
    network = ok(answers, "network")
    assert network == bulk
    assert {key: network[key] for key in ("name", "network", "gateway", "network6", "gateway6",
                                          "mac_prefix", "free_count", "reserved_count",
                                          "external_reservations", "group_list", "inst_list",
                                          "tags", "serial_no")} == {
        "name": "lan", "network": "10.50.0.0/24", "gateway": "10.50.0.1",
        "network6": "2001:db8::/64", "gateway6": None, "mac_prefix": "aa:00:03",
        "free_count": 252, "reserved_count": 4,
        "external_reservations": "10.50.0.0, 10.50.0.1, 10.50.0.7, 10.50.0.255",
        "group_list": [], "inst_list": [], "tags": ["blue"], "serial_no": 1,
    }  # fmt: skip
    assert network["map"] == "XX.....X" + "." * 247 + "X"


def test_bad_creations(answers: dict[str, Any]) -> None:
    assert "already exists as a network" in failed(answers, "create/again")
    assert "A big network with 16777216 host(s) is currently not supported" in failed(
        answers, "create/too-big"
    )
    assert refused(answers, "create/reader") == 403
    assert refused(answers, "create/bad") == 400
    assert ok(answers, "networks/after") == []


def test_modify_tags_and_delete(answers: dict[str, Any]) -> None:
    assert done(answers, "modify") == [None]
    assert "Cannot modify gateway and reserved ips at once" in failed(answers, "modify/both")
    modified = ok(answers, "network/modified")
    assert modified["gateway6"] == "2001:db8::1"
    assert modified["external_reservations"] == (
        "10.50.0.0, 10.50.0.1, 10.50.0.7, 10.50.0.8, 10.50.0.255"
    )
    assert modified["serial_no"] == 2
    assert sorted(ok(answers, "tags")) == ["blue", "green", "red"]
    assert sorted(ok(answers, "tags/after")) == ["green", "red"]
    assert done(answers, "delete") == [None]
    assert "Network 'lan' not found" in failed(answers, "delete/again")
    assert refused(answers, "network/missing") == 404


def test_connect_and_disconnect(answers: dict[str, Any]) -> None:
    assert done(answers, "connect") == [None]
    assert "Node group 'nosuch' not known" in failed(answers, "connect/dry-run")
    assert refused(answers, "connect/bad-mode") == 400
    assert refused(answers, "connect/reader") == 403
    assert ok(answers, "network/connected")["group_list"] == [["default", "routed", "rt0", "12"]]
    assert "Network still connected" in failed(answers, "delete/connected")
    assert done(answers, "disconnect") == [None]
    assert ok(answers, "network/disconnected")["group_list"] == []
