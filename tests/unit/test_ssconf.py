"""The ssconf files, in-process: every key of Ganeti 3.0.2, each as its wconfd
writes it (Ganeti.WConfd.Ssconf.mkSSConf and SimpleStore.WriteFiles), kept
current on the master at once and on the other nodes by the distributor.
(Ganeti's own reader reads them in tests/conformance/test_ssconf_ganeti.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import __version__, testbed
from corral import constants as C
from corral.objects import Cluster
from corral.paths import Paths
from tests.helpers.inprocess import OS_NAME, InProcessCluster, in_process_cluster
from tests.helpers.waiting import wait_until_async

# Ganeti 3.0.2's constants.VALID_SS_KEYS.
GANETI_KEYS = {
    "cluster_name", "cluster_tags", "file_storage_dir", "shared_file_storage_dir",
    "gluster_storage_dir", "master_candidates", "master_candidates_ips",
    "master_candidates_certs", "master_ip", "master_netdev", "master_netmask", "master_node",
    "node_list", "node_primary_ips", "node_secondary_ips", "node_vm_capable", "offline_nodes",
    "online_nodes", "primary_ip_family", "instance_list", "release_version", "hypervisor_list",
    "maintain_node_health", "uid_pool", "nodegroups", "networks", "enabled_user_shutdown",
    "ssh_ports", "hvparams_chroot", "hvparams_lxc", "hvparams_fake", "hvparams_xen-hvm",
    "hvparams_kvm", "hvparams_xen-pvm",
}  # fmt: skip
# Names whose nice order (web9 before web10) is not their plain order.
INSTANCES = ("web10.example.com", "web9.example.com", "db1.example.com")


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        yield cluster


def files(paths: Paths) -> dict[str, str]:
    """Every ssconf file under ``paths`` by key."""
    return {
        p.name.removeprefix("ssconf_"): p.read_text()
        for p in paths.data_dir.glob("ssconf_*")
        if not p.name.startswith(".")
    }


async def ok(cl: InProcessCluster, op: dict[str, Any]) -> None:
    job = await cl.run(op)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error


def create(name: str) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "create",
        "disk_template": "diskless",
        "disks": [],
        "nics": [],
        "os_type": OS_NAME,
        "pnode": testbed.node_name(2),
        "name_check": False,
        "ip_check": False,
        "start": False,
    }


async def test_every_key_as_ganeti_writes_it(cl: InProcessCluster) -> None:
    for name in INSTANCES:
        await ok(cl, create(name))
    await ok(cl, {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["zeta", "alpha"]})
    await ok(cl, {"OP_ID": "OP_CLUSTER_SET_PARAMS", "uid_pool": [[3000, 3000], [1000, 1009]]})
    n1, n2 = cl.config_node(1), cl.config_node(2)
    [group] = cl.cfg.groups()
    candidates = sorted([n1, n2], key=lambda n: n.uuid)
    cluster = cl.cfg.cluster
    expected = {
        "cluster_name": "cluster.example.com\n",
        "cluster_tags": "alpha\nzeta\n",
        "file_storage_dir": f"{cluster.file_storage_dir}\n",
        "shared_file_storage_dir": f"{cluster.shared_file_storage_dir}\n",
        "gluster_storage_dir": "",
        "master_candidates": "".join(f"{n.name}\n" for n in candidates),
        "master_candidates_ips": "".join(f"{n.primary_ip}\n" for n in candidates),
        "master_candidates_certs": "",
        "master_ip": f"{cluster.master_ip}\n",
        "master_netdev": "lo\n",
        "master_netmask": "32\n",
        "master_node": f"{n1.name}\n",
        "node_list": f"{n1.name}\n{n2.name}\n",
        "node_primary_ips": f"{n1.name} {n1.primary_ip}\n{n2.name} {n2.primary_ip}\n",
        "node_secondary_ips": f"{n1.name} {n1.secondary_ip}\n{n2.name} {n2.secondary_ip}\n",
        "node_vm_capable": f"{n1.name}=True\n{n2.name}=True\n",
        "offline_nodes": "",
        "online_nodes": f"{n1.name}\n{n2.name}\n",
        "primary_ip_family": "2\n",
        "instance_list": "db1.example.com\nweb9.example.com\nweb10.example.com\n",
        "release_version": f"{__version__}\n",
        "hypervisor_list": "fake\n",
        "maintain_node_health": "False\n",
        "uid_pool": "3000\n1000-1009\n",  # in the order given, as Ganeti keeps it
        "nodegroups": f"{group.uuid} {group.name}\n",
        "networks": "",
        "enabled_user_shutdown": "False\n",
        "ssh_ports": f"{n1.name}=22\n{n2.name}=22\n",
        "hvparams_fake": "migration_mode=live\n",
        **{f"hvparams_{hv}": "" for hv in ("chroot", "lxc", "xen-hvm", "kvm", "xen-pvm")},
    }
    assert set(expected) == GANETI_KEYS
    assert files(cl.paths) == expected
    node2 = cl.node(2).paths
    await wait_until_async(lambda: files(node2) == expected, what="node2's ssconf files")


async def test_instance_list_follows_adds_renames_and_removes(cl: InProcessCluster) -> None:
    node2 = cl.node(2).paths

    async def listed(*names: str) -> None:
        text = "".join(f"{n}\n" for n in names)
        assert cl.paths.ssconf_file("instance_list").read_text() == text
        await wait_until_async(
            lambda: node2.ssconf_file("instance_list").read_text() == text, what=text
        )

    await listed()
    await ok(cl, create("web10.example.com"))
    await ok(cl, create("web9.example.com"))
    await listed("web9.example.com", "web10.example.com")
    rename = {"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web10.example.com"}
    await ok(cl, {**rename, "new_name": "web1.example.com", "name_check": False, "ip_check": False})
    await listed("web1.example.com", "web9.example.com")
    await ok(cl, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "web9.example.com"})
    await listed("web1.example.com")


async def test_hypervisor_parameters_are_shown_as_wconfd_shows_them(
    cl: InProcessCluster,
) -> None:
    """Strings bare, booleans True/False, numbers as numbers, lists as JSON;
    sorted by name."""
    cluster = cl.cfg.cluster.copy_for_update()
    assert isinstance(cluster, Cluster)
    cluster.hvparams["kvm"] = {
        "kernel_args": "ro",
        "acpi": True,
        "migration_port": 8102,
        "cpu_cores": 0,
        "migration_downtime": 30.0,
        "ratio": 0.5,
        "list": ["a", 1],
        "serial_console": False,
    }
    tx = cl.cfg.transaction()
    tx.update(cluster)
    await tx.commit()
    await cl.ssconf.current(cl.cfg.serial)  # the master's files are written after commits
    assert cl.paths.ssconf_file("hvparams_kvm").read_text() == (
        'acpi=True\ncpu_cores=0\nkernel_args=ro\nlist=["a",1]\nmigration_downtime=30\n'
        "migration_port=8102\nratio=0.5\nserial_console=False\n"
    )


async def test_non_candidates_and_offline_nodes(cl: InProcessCluster) -> None:
    await ok(cl, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": testbed.node_name(2),
                  "master_candidate": False, "auto_promote": False})  # fmt: skip
    await ok(cl, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": testbed.node_name(2),
                  "offline": True})  # fmt: skip
    n1, n2 = cl.config_node(1), cl.config_node(2)
    assert not n2.master_candidate and n2.offline
    got = files(cl.paths)
    assert (got["master_candidates"], got["master_candidates_ips"]) == (
        f"{n1.name}\n",
        f"{n1.primary_ip}\n",
    )
    assert (got["offline_nodes"], got["online_nodes"]) == (f"{n2.name}\n", f"{n1.name}\n")
    assert got["node_list"] == f"{n1.name}\n{n2.name}\n"
