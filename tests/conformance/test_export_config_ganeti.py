"""Ganeti 3.0.2 and Corral read each other's export ``config.ini``.

Ganeti's side is its own code, run by Debian's Python with Ganeti's library:
``backend.FinalizeExport`` writes the file (its export directory pointed at a
scratch directory) and ``LUInstanceCreate._ReadExportParams`` (on a stand-in
for the unit: it only reads and fills ``op``) reads it, after
``SerializableConfigParser.Loads`` and the version check ``_ReadExportInfo``
makes.  ``tests/data/ganeti-export/config.ini`` is the file FinalizeExport
writes for :data:`SAMPLE` (the import tests use it): the first test keeps it
honest.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from corral.config.manager import ConfigManager
from corral.exports import config_ini
from corral.objects import NIC, Cluster, Disk, Instance
from tests.conformance.ganeti import ganeti_library
from tests.helpers.noded import REPO_ROOT

SAMPLE_FILE = REPO_ROOT / "tests" / "data" / "ganeti-export" / "config.ini"
# The instance of the sample (an import test on the fake hypervisor uses it).
SAMPLE: dict[str, Any] = {
    "name": "ganeti-src.example.com",
    "primary_node": "8bf2bafe-bb9c-4af1-b9f0-932846e88455",
    "os": "envdump+default",
    "hypervisor": "fake",
    "hvparams": {"migration_mode": "live"},
    "beparams": {
        "maxmem": 128,
        "minmem": 128,
        "vcpus": 1,
        "auto_balance": True,
        "always_failover": False,
        "spindle_use": 1,
    },
    "osparams": {"greeting": "hello"},
    "osparams_private": {"private_note": "privvalue"},
    "tags": ["from-ganeti"],
    "nics": [
        {
            "mac": "aa:00:00:4c:13:59",
            "ip": None,
            "network": None,
            "name": None,
            "nicparams": {"mode": "bridged", "link": "gnt-br0", "vlan": ""},
        }
    ],
    "disks": [
        {
            "dev_type": "file",
            "size": 8,
            "iv_name": "disk/0",
            "uuid": "5bbf9362-4d8f-491b-9a0a-4828e5a9ac88",
            "name": None,
        }
    ],
    "timestamp": 1795319080,
}

FINALIZE = """
import json, sys, tempfile, time, os
from ganeti import backend, objects, serializer
spec = json.load(sys.stdin)
backend.pathutils.EXPORT_DIR = tempfile.mkdtemp()
os.mkdir(os.path.join(backend.pathutils.EXPORT_DIR, spec["name"] + ".new"))
backend.time.time = lambda: spec["timestamp"]
nics = [objects.NIC(**n) for n in spec["nics"]]
disks = [objects.Disk(**d) for d in spec["disks"]]
inst = objects.Instance(
    name=spec["name"], primary_node=spec["primary_node"], os=spec["os"],
    hypervisor=spec["hypervisor"], hvparams=spec["hvparams"], beparams=spec["beparams"],
    osparams=spec["osparams"],
    osparams_private=serializer.PrivateDict(spec["osparams_private"]),
    tags=set(spec["tags"]), nics=nics)
backend.FinalizeExport(inst, disks)
sys.stdout.write(open(os.path.join(backend.pathutils.EXPORT_DIR, spec["name"],
                                   "config.ini")).read())
"""

READ = """
import json, sys, types
from ganeti import objects, constants
from ganeti.cmdlib.instance_create import LUInstanceCreate
einfo = objects.SerializableConfigParser.Loads(sys.stdin.read())
assert einfo.has_section(constants.INISECT_EXP)
assert int(einfo.get(constants.INISECT_EXP, "version")) == constants.EXPORT_VERSION
op = types.SimpleNamespace(os_type=None, disks=[], nics=[], tags=[], hypervisor=None,
                           hvparams={}, beparams={}, osparams={}, osparams_private={},
                           disk_template="file")
LUInstanceCreate._ReadExportParams(types.SimpleNamespace(op=op), einfo)
images = [einfo.get(constants.INISECT_INS, "disk%d_dump" % i) for i in range(len(op.disks))]
out = dict(vars(op))
out["osparams_private"] = {k: v.Get() for k, v in op.osparams_private.items()}
out["images"] = images
out["name"] = einfo.get(constants.INISECT_INS, "name")
json.dump(out, sys.stdout)
"""


def ganeti_finalize_export(spec: dict[str, Any]) -> str:
    result = ganeti_library(FINALIZE, stdin=json.dumps(spec))
    assert result.rc == 0, result.stderr
    return result.stdout


def ganeti_read_export(text: str) -> dict[str, Any]:
    result = ganeti_library(READ, stdin=text)
    assert result.rc == 0, result.stderr
    return cast(dict[str, Any], json.loads(result.stdout))


def test_the_sample_is_what_ganeti_writes(ganeti: Path) -> None:
    assert ganeti_finalize_export(SAMPLE) == SAMPLE_FILE.read_text()


def test_corral_reads_what_ganeti_writes(ganeti: Path) -> None:
    spec = {
        **SAMPLE,
        "hypervisor": "kvm",
        "hvparams": {"kernel_path": "/boot/vmlinuz", "migration_port": 8102, "acpi": True},
        "tags": ["a"],
        "nics": [
            *SAMPLE["nics"],
            {
                "mac": "aa:00:00:00:00:02",
                "ip": "192.0.2.9",
                "network": "net1",
                "name": "data",
                "nicparams": {},
            },
        ],
        "disks": [
            *SAMPLE["disks"],
            {"dev_type": "file", "size": 20, "iv_name": "disk/1", "uuid": "d2", "name": "var"},
        ],
    }
    info = config_ini.parse(ganeti_finalize_export(spec))
    assert (info.name, info.os, info.hypervisor) == (spec["name"], "envdump+default", "kvm")
    assert (info.source, info.timestamp, info.compression) == (
        spec["primary_node"],
        spec["timestamp"],
        "none",
    )
    assert (info.disk_template, info.tags) == ("file", ["a"])
    assert [(d.ivname, d.dump, d.size, d.name) for d in info.disks] == [
        ("disk/0", "5bbf9362-4d8f-491b-9a0a-4828e5a9ac88", 8, None),
        ("disk/1", "d2", 20, "var"),
    ]
    assert [n.spec() for n in info.nics] == [
        {
            "mac": "aa:00:00:4c:13:59",
            "ip": None,
            "name": None,
            "link": "gnt-br0",
            "mode": "bridged",
            "vlan": "",
        },
        {"mac": "aa:00:00:00:00:02", "ip": "192.0.2.9", "name": "data", "network": "net1"},
    ]
    assert info.hvparams == {"kernel_path": "/boot/vmlinuz", "acpi": "True"}
    assert info.beparams["auto_balance"] == "True" and info.beparams["maxmem"] == "128"
    assert (info.osparams, info.osparams_private) == (
        {"greeting": "hello"},
        {"private_note": "privvalue"},
    )


def corral_dump() -> tuple[Instance, str]:
    cluster = Cluster(
        name="cluster.example.com",
        master_node="m",
        master_ip="192.0.2.1",
        nicparams={"default": {"mode": "bridged", "link": "br0", "vlan": ""}},
        osparams={"envdump": {"greeting": "hi"}},
    )
    inst = Instance(
        name="corral-src.example.com",
        primary_node="node-uuid",
        os="envdump+default",
        hypervisor="kvm",
        hvparams={"kernel_path": "/boot/vmlinuz", "migration_mode": "live", "kernel_args": "a%b"},
        beparams={"maxmem": 256, "minmem": 256},
        osparams={"extra": "x"},
        osparams_private={"private_note": "privvalue"},
        disk_template="file",
        disks=[
            Disk(size=100, dev_type="file", iv_name="disk/0"),
            Disk(size=20, dev_type="file", iv_name="disk/1", name="var"),
        ],
        nics=[
            NIC(mac="aa:00:00:00:00:01", ip="192.0.2.5"),
            NIC(mac="aa:00:00:00:00:02", network="net1"),
        ],
        tags=["t1", "t2"],
    )
    cfg = cast(ConfigManager, SimpleNamespace(cluster=cluster))
    files = [d.uuid for d in inst.disks]
    return inst, config_ini.dump(cfg, inst, inst.primary_node, files, "none")


def test_ganeti_reads_what_corral_writes(ganeti: Path) -> None:
    inst, text = corral_dump()
    op = ganeti_read_export(text)
    assert op["name"] == inst.name and op["os_type"] == inst.os
    assert (op["hypervisor"], op["tags"]) == ("kvm", ["t1", "t2"])
    assert op["disks"] == [{"size": 100, "name": None}, {"size": 20, "name": "var"}]
    assert op["images"] == [d.uuid for d in inst.disks]
    assert op["nics"] == [
        {
            "ip": "192.0.2.5",
            "mac": "aa:00:00:00:00:01",
            "name": None,
            "link": "br0",
            "mode": "bridged",
            "vlan": "",
        },
        {"ip": None, "mac": "aa:00:00:00:00:02", "name": None, "network": "net1"},
    ]
    # Every filled value, as strings, cluster-wide ones left out; a '%' survives.
    assert op["hvparams"]["kernel_path"] == "/boot/vmlinuz"
    assert op["hvparams"]["kernel_args"] == "a%b"
    assert "migration_mode" not in op["hvparams"]
    assert op["beparams"] == {
        "always_failover": "False",
        "auto_balance": "True",
        "maxmem": "256",
        "minmem": "256",
        "spindle_use": "1",
        "vcpus": "1",
    }
    assert op["osparams"] == {"greeting": "hi", "extra": "x"}
    assert op["osparams_private"] == {"private_note": "privvalue"}
