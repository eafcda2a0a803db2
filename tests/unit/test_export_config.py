"""An export's config.ini: Corral's writer and reader (Ganeti's format; the
conformance suite runs Ganeti's own reader and writer against them)."""

from __future__ import annotations

import configparser
from types import SimpleNamespace
from typing import Any, cast

import pytest

from corral import errors
from corral.config.manager import ConfigManager
from corral.exports import config_ini
from corral.objects import NIC, Cluster, Disk, Instance
from tests.helpers.noded import REPO_ROOT

# Written by Ganeti's own FinalizeExport (see tests/data/ganeti-export/README).
GANETI_SAMPLE = (REPO_ROOT / "tests" / "data" / "ganeti-export" / "config.ini").read_text()


def config(cluster: Cluster) -> ConfigManager:
    # dump reads only the cluster's defaults from the manager.
    return cast(ConfigManager, SimpleNamespace(cluster=cluster))


def instance(**changes: Any) -> Instance:
    values: dict[str, Any] = {
        "name": "inst1.example.com",
        "primary_node": "node-uuid",
        "os": "debootstrap+buster",
        "hypervisor": "kvm",
        "hvparams": {"kernel_path": "/boot/vmlinuz-100%", "migration_port": 9000},
        "beparams": {"maxmem": 512},
        "osparams": {"mirror": "http://deb.example/"},
        "osparams_private": {"password": "s3cret"},
        "disk_template": "file",
        "disks": [
            Disk(size=1024, dev_type="file", iv_name="disk/0", name="root"),
            Disk(size=64, dev_type="file", iv_name="disk/1"),
        ],
        "nics": [
            NIC(mac="aa:00:00:00:00:01", ip="192.0.2.5", nicparams={"link": "br1"}),
            NIC(mac="aa:00:00:00:00:02", name="data", network="net1"),
        ],
        "tags": ["web", "prod"],
    }
    values.update(changes)
    return Instance(**values)


CLUSTER = Cluster(
    name="cluster.example.com",
    master_node="m",
    master_ip="192.0.2.1",
    beparams={"default": {"vcpus": 2}},
    nicparams={"default": {"mode": "bridged", "link": "xen-br0", "vlan": ""}},
    osparams={"debootstrap": {"arch": "amd64"}, "debootstrap+buster": {"suite": "buster"}},
    osparams_private_cluster={"debootstrap": {"apikey": "cluster-private"}},
)


def dumped(inst: Instance | None = None) -> str:
    inst = inst or instance()
    files = [d.uuid for d in inst.disks]
    return config_ini.dump(config(CLUSTER), inst, "node-uuid", files, "none", timestamp=1700000000)


def test_dump_has_ganeti_sections_in_order() -> None:
    ini = configparser.ConfigParser()
    ini.read_string(dumped())
    assert ini.sections() == ["export", "instance", "hypervisor", "backend", "os", "os_private"]
    assert dict(ini["export"]) == {
        "version": "0",
        "timestamp": "1700000000",
        "source": "node-uuid",
        "os": "debootstrap+buster",
        "compression": "none",
    }


def test_dump_fills_parameters_as_ganeti_exports_them() -> None:
    inst = instance()
    ini = configparser.ConfigParser()
    ini.read_string(dumped(inst))
    sect = ini["instance"]
    assert (sect["maxmem"], sect["memory"], sect["vcpus"]) == ("512", "512", "2")
    assert sect["tags"] == "web prod"
    assert sect["nic0_ip"] == "192.0.2.5" and sect["nic0_link"] == "br1"
    assert sect["nic0_mode"] == "bridged" and sect["nic0_vlan"] == ""
    assert (sect["nic1_name"], sect["nic1_network"], sect["nic0_name"]) == ("data", "net1", "None")
    assert sect["disk0_dump"] == inst.disks[0].uuid and sect["disk1_size"] == "64"
    assert (sect["disk0_name"], sect["disk1_name"]) == ("root", "None")
    assert (sect["nic_count"], sect["disk_count"]) == ("2", "2")
    # Cluster-wide hypervisor parameters are never exported.
    assert "migration_port" not in ini["hypervisor"]
    assert ini["hypervisor"]["kernel_path"] == "/boot/vmlinuz-100%"
    assert ini["backend"]["auto_balance"] == "True"
    # Public OS parameters filled from the cluster's (base and variant), never
    # the cluster's private ones; the instance's private ones as they are.
    assert dict(ini["os"]) == {
        "arch": "amd64",
        "suite": "buster",
        "mirror": "http://deb.example/",
    }
    assert dict(ini["os_private"]) == {"password": "s3cret"}


def test_dump_of_a_diskless_instance() -> None:
    info = config_ini.parse(dumped(instance(disks=[], disk_template="diskless")))
    assert info.disks == [] and info.disk_template == "diskless"


def test_dump_refuses_a_wrong_number_of_dump_files() -> None:
    with pytest.raises(ValueError, match="1 dump files for 2 disks"):
        config_ini.dump(config(CLUSTER), instance(), "n", ["x"], "none")


def test_round_trip() -> None:
    inst = instance()
    info = config_ini.parse(dumped(inst))
    assert (info.version, info.timestamp, info.source) == (0, 1700000000, "node-uuid")
    assert (info.os, info.name, info.hypervisor) == (inst.os, inst.name, "kvm")
    assert (info.disk_template, info.compression, info.tags) == ("file", "none", ["web", "prod"])
    assert [(d.ivname, d.dump, d.size, d.name) for d in info.disks] == [
        ("disk/0", inst.disks[0].uuid, 1024, "root"),
        ("disk/1", inst.disks[1].uuid, 64, None),
    ]
    assert [n.spec() for n in info.nics] == [
        {
            "mac": "aa:00:00:00:00:01",
            "ip": "192.0.2.5",
            "name": None,
            "link": "br1",
            "mode": "bridged",
            "vlan": "",
        },
        {"mac": "aa:00:00:00:00:02", "ip": None, "name": "data", "network": "net1"},
    ]
    assert info.hvparams["kernel_path"] == "/boot/vmlinuz-100%"
    assert info.beparams["maxmem"] == "512"
    assert info.osparams_private == {"password": "s3cret"}


def test_parse_ganeti_sample() -> None:
    info = config_ini.parse(GANETI_SAMPLE)
    assert info.name == "ganeti-src.example.com" and info.os == "envdump+default"
    assert info.disks[0].dump == "5bbf9362-4d8f-491b-9a0a-4828e5a9ac88"
    assert info.nics[0].spec()["vlan"] == "" and info.nics[0].network is None
    assert info.hvparams == {} and info.osparams == {"greeting": "hello"}


def test_beparams_of_exports_older_than_the_backend_section() -> None:
    old = GANETI_SAMPLE.split("[hypervisor]")[0]
    assert config_ini.parse(old).beparams == {"maxmem": "128", "minmem": "128", "vcpus": "1"}


def test_disks_found_by_size_as_ganeti_reads_them() -> None:
    text = GANETI_SAMPLE.replace("disk0_size = 8", "disk0_size = 8\ndisk3_size = 5")
    info = config_ini.parse(text)
    assert [d.size for d in info.disks] == [8, 5]
    assert info.disks[1].dump is None  # Ganeti looks for disk1_dump


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "section \\[export\\] missing"),
        ("garbage without a section", "File contains no section headers"),
        (GANETI_SAMPLE.replace("version = 0", "version = 1"), "Wrong export version 1"),
        (GANETI_SAMPLE.replace("version = 0", "version = x"), "export version 'x'"),
        (GANETI_SAMPLE.replace("[instance]", "[inst]"), "section \\[instance\\] missing"),
        (GANETI_SAMPLE.replace("disk0_size = 8", "disk0_size = big"), "not a number: 'big'"),
        (GANETI_SAMPLE.replace("disk0_size = 8", "disk0_size = -1"), "negative size"),
        (GANETI_SAMPLE.replace("nic0_link = gnt-br0\n", ""), "'nic0_link' missing"),
        (GANETI_SAMPLE + "[os]\nx = 1\n", "already exists"),
        (GANETI_SAMPLE.replace("greeting = hello", "greeting = 100%"), "'%' must be followed"),
    ],
)
def test_parse_refuses_bad_input(text: str, message: str) -> None:
    with pytest.raises(errors.OpPrereqError, match=message):
        config_ini.parse(text)
