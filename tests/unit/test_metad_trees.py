"""The trees metad serves, rendered from one model: Ganeti's (its layouts as in
Ganeti 3.0.2's src/Ganeti/Metad/Config.hs and WebServer.hs), NoCloud, OpenStack, EC2."""

from __future__ import annotations

import json

import pytest
import yaml  # type: ignore[import-untyped]

from corral.metad import trees
from corral.metad.model import InstanceMetadata
from tests.helpers.metad import PRIVATE_VALUE, SECRET_VALUE, SSH_KEY, USER_DATA, sample


def body(meta: InstanceMetadata, path: str) -> bytes:
    found = trees.lookup(meta, path)
    assert isinstance(found, trees.Document), path
    return found.body


def as_json(meta: InstanceMetadata, path: str) -> object:
    return json.loads(body(meta, path))


@pytest.mark.parametrize("prefix", trees.GANETI_PREFIXES)
def test_ganeti_parameters_have_ganeti_s_layout(prefix: str) -> None:
    # Ganeti's makeInstanceParams: each name to [value, visibility].
    assert as_json(sample(installing=True), prefix + "os/parameters.json") == {
        "release": ["bookworm", "public"],
        "token": [PRIVATE_VALUE, "private"],
        "password": [SECRET_VALUE, "secret"],
    }


def test_ganeti_parameters_hold_no_secret_outside_installs() -> None:
    params = as_json(sample(), "/ganeti/latest/os/parameters.json")
    assert params == {"release": ["bookworm", "public"], "token": [PRIVATE_VALUE, "private"]}


def test_ganeti_meta_data_is_the_instance_s_identity() -> None:
    meta = sample()
    data = as_json(meta, "/ganeti/latest/meta_data.json")
    assert isinstance(data, dict)
    assert data["instance_id"] == meta.instance_id
    assert (data["name"], data["hostname"], data["os"]) == (meta.name, "inst1", meta.os.name)
    assert [n["mac"] for n in data["nics"]] == ["AA:00:00:00:00:01", "aa:00:00:00:00:02"]
    assert data["public_keys"] == [SSH_KEY]
    assert SECRET_VALUE not in json.dumps(data) and PRIVATE_VALUE not in json.dumps(data)


def test_ganeti_scripts_and_packages_are_node_files() -> None:
    meta = sample(os_dir="/srv/ganeti/os/debootstrap", package="/var/p.tgz")
    for script in ("create", "export", "import", "rename", "verify"):  # Ganeti's list
        found = trees.lookup(meta, f"/ganeti/latest/os/scripts/{script}")
        assert found == trees.NodeFile(f"/srv/ganeti/os/debootstrap/{script}")
    assert trees.lookup(meta, "/ganeti/latest/os/scripts/ganeti_api_version") is None
    assert trees.lookup(meta, "/ganeti/latest/os/scripts/../../etc/shadow") is None
    assert trees.lookup(meta, "/ganeti/latest/os/package") == trees.NodeFile("/var/p.tgz")
    assert trees.lookup(meta, "/ganeti/latest/os/os-install-package") is None
    assert trees.lookup(sample(), "/ganeti/latest/os/scripts/create") is None


def test_nocloud_meta_data_is_yaml_with_id_hostname_and_keys() -> None:
    meta = sample()
    data = yaml.safe_load(body(meta, "/nocloud/meta-data"))
    assert data == {
        "instance-id": meta.instance_id,
        "local-hostname": "inst1",
        "public-keys": [SSH_KEY],
    }


def test_nocloud_user_data_and_empty_vendor_data() -> None:
    assert body(sample(), "/nocloud/user-data") == USER_DATA
    assert body(sample(), "/nocloud/vendor-data") == b""


def test_nocloud_network_config_v2_matches_by_mac_with_static_addresses() -> None:
    config = yaml.safe_load(body(sample(), "/nocloud/network-config"))
    assert config == {
        "version": 2,
        "ethernets": {
            "nic0": {
                "match": {"macaddress": "aa:00:00:00:00:01"},
                "dhcp4": False,
                "addresses": ["10.20.0.5/24"],
                "gateway4": "10.20.0.1",
            },
            "nic1": {
                "match": {"macaddress": "aa:00:00:00:00:02"},
                "dhcp4": False,
                "addresses": ["169.254.1.5/32"],
                "routes": [{"to": "169.254.169.254/32", "scope": "link"}],
            },
        },
    }


def test_openstack_tree() -> None:
    meta = sample()
    assert body(meta, "/openstack") == b"latest\n"
    assert body(meta, "/openstack/") == b"latest\n"
    listing = body(meta, "/openstack/latest").decode().split()
    assert listing == ["meta_data.json", "network_data.json", "user_data", "vendor_data.json"]
    md = as_json(meta, "/openstack/latest/meta_data.json")
    assert isinstance(md, dict)
    assert md["uuid"] == meta.instance_id and md["hostname"] == "inst1"
    assert md["public_keys"] == {"key-0": SSH_KEY}
    net = as_json(meta, "/openstack/latest/network_data.json")
    assert isinstance(net, dict)
    assert net["links"][0] == {
        "id": "nic0",
        "type": "phy",
        "ethernet_mac_address": "aa:00:00:00:00:01",
    }
    assert net["networks"][0] == {
        "id": "network0",
        "link": "nic0",
        "type": "ipv4",
        "ip_address": "10.20.0.5",
        "netmask": "255.255.255.0",
        "routes": [],
        "gateway": "10.20.0.1",
    }
    assert body(meta, "/openstack/latest/user_data") == USER_DATA
    assert as_json(meta, "/openstack/latest/vendor_data.json") == {}


def test_ec2_tree() -> None:
    meta = sample()
    assert body(meta, "/latest/meta-data/").split() == [
        b"instance-id",
        b"local-hostname",
        b"public-keys/",
    ]
    assert body(meta, "/latest/meta-data/instance-id") == meta.instance_id.encode()
    assert body(meta, "/latest/meta-data/local-hostname") == b"inst1"
    assert body(meta, "/latest/meta-data/public-keys/") == b"0=key-0\n"
    assert body(meta, "/latest/meta-data/public-keys/0/") == b"openssh-key\n"
    assert body(meta, "/latest/meta-data/public-keys/0/openssh-key") == SSH_KEY.encode() + b"\n"
    assert trees.lookup(meta, "/latest/meta-data/public-keys/1/openssh-key") is None
    assert body(meta, "/latest/user-data") == USER_DATA


def test_no_user_data_is_not_found_for_openstack_and_ec2() -> None:
    import dataclasses

    from corral.metad.model import UserData

    meta = dataclasses.replace(sample(), user_data=UserData(b""))
    assert trees.lookup(meta, "/openstack/latest/user_data") is None
    assert trees.lookup(meta, "/latest/user-data") is None
    assert body(meta, "/nocloud/user-data") == b""


@pytest.mark.parametrize("path", ["/", "/ganeti", "/ganeti/2014-01-01/meta_data.json", "/x"])
def test_unknown_paths_are_not_found(path: str) -> None:
    assert trees.lookup(sample(), path) is None


def test_no_tree_but_ganeti_s_parameters_carries_an_os_parameter() -> None:
    meta = sample(installing=True)
    paths = [p for p in trees._TABLE if "parameters.json" not in p]
    for path in paths:
        found = trees.lookup(meta, path)
        text = found.body if isinstance(found, trees.Document) else b""
        assert SECRET_VALUE.encode() not in text and PRIVATE_VALUE.encode() not in text, path


@pytest.mark.parametrize("os_dir", [None, "/srv/ganeti/os/debootstrap"])
def test_the_whole_tree_is_what_lookup_answers(os_dir: str | None) -> None:
    # The server answers from tree(): every path lookup answers is in it, the same.
    meta = sample(installing=True, os_dir=os_dir, package="/var/p.tgz")
    whole = trees.tree(meta)
    asked = [
        *trees._TABLE,
        "/latest/meta-data/public-keys",
        "/latest/meta-data/public-keys/0",
        "/latest/meta-data/public-keys/0/openssh-key",
        "/latest/meta-data/public-keys/1/openssh-key",
        *(f"{p}os/scripts/{name}" for p in trees.GANETI_PREFIXES for name in trees.OS_SCRIPTS),
    ]
    for path in asked:
        assert whole.get(path) == trees.lookup(meta, path), path
        assert trees.lookup(meta, path + "/") == trees.lookup(meta, path), path
    assert all(trees.lookup(meta, path) == found for path, found in whole.items())
    assert ("/ganeti/latest/os/scripts/create" in whole) == (os_dir is not None)
