"""Ganeti 3.0.2's own ``gnt-cluster`` and luxi client against a Corral cluster:
Corral's ``gnt-cluster`` must print the same bytes and leave with the same
exit code, and QueryClusterInfo must have every key Ganeti's tools read.

Ganeti's command joins some frozensets when it prints (the ``max/0``/``min/0``
bounds, ``spindle-ratio``/``vcpu-ratio``), so their order follows Python's
string hashing; it is run with PYTHONHASHSEED=3, a seed under which that order
is the sorted one Corral prints.  Job ids and log timestamps differ from run
to run and are masked.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.conformance.ganeti import (
    SYSTEM_PYTHON,
    ganeti_tree,
    run_ganeti_python,
    run_in_namespace,
)
from tests.helpers.cluster import Result, TestCluster

# The keys of luxid's QueryClusterInfo answer (src/Ganeti/Query/Server.hs).
GANETI_KEYS = [
    "software_version",
    "protocol_version",
    "config_version",
    "os_api_version",
    "export_version",
    "vcs_version",
    "architecture",
    "name",
    "master",
    "default_hypervisor",
    "enabled_hypervisors",
    "hvparams",
    "os_hvp",
    "beparams",
    "osparams",
    "ipolicy",
    "nicparams",
    "ndparams",
    "diskparams",
    "candidate_pool_size",
    "max_running_jobs",
    "max_tracked_jobs",
    "mac_prefix",
    "master_netdev",
    "master_netmask",
    "use_external_mip_script",
    "volume_group_name",
    "drbd_usermode_helper",
    "file_storage_dir",
    "shared_file_storage_dir",
    "gluster_storage_dir",
    "maintain_node_health",
    "ctime",
    "mtime",
    "uuid",
    "tags",
    "uid_pool",
    "default_iallocator",
    "default_iallocator_params",
    "reserved_lvs",
    "primary_ip_version",
    "prealloc_wipe_disks",
    "hidden_os",
    "blacklisted_os",
    "enabled_disk_templates",
    "install_image",
    "instance_communication_network",
    "zeroing_image",
    "compression_tools",
    "enabled_user_shutdown",
    "enabled_data_collectors",
    "data_collector_interval",
    "modify_ssh_setup",
    "ssh_key_type",
    "ssh_key_bits",
]
BOUNDS = (
    "min:cpu-count=1,disk-count=1,disk-size=512,memory-size=128,nic-count=1,spindle-use=1"
    "/max:cpu-count=4,disk-count=4,disk-size=2g,memory-size=4g,nic-count=4,spindle-use=4"
)
_TIMESTAMP = re.compile(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} ", re.MULTILINE)
_JOB_IDS = re.compile(r"(Submitted jobs |Waiting for job |JobID: )[\d, ]+")


@pytest.fixture(autouse=True)
def same_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ganeti's commands run with TZ set (UTC unless given): Corral's too."""
    monkeypatch.setenv("TZ", os.environ.get("TZ", "UTC"))


@pytest.fixture
def cl(gcluster: TestCluster) -> TestCluster:
    """The module's cluster (the tests change its settings, in order)."""
    return gcluster


def ganeti_cluster(cl: TestCluster, *argv: str) -> Result:
    """Ganeti's ``gnt-cluster argv`` against the cluster."""
    command = [SYSTEM_PYTHON, str(ganeti_tree() / "gnt-cluster"), *argv]
    return run_in_namespace(cl.paths.root, command, env={"PYTHONHASHSEED": "3"})


def masked(result: Result) -> tuple[int, str, str]:
    def mask(text: str) -> str:
        return _JOB_IDS.sub(r"\1N", _TIMESTAMP.sub("<time> ", text))

    return result.rc, mask(result.stdout), mask(result.stderr)


def same(cl: TestCluster, *argv: str) -> Result:
    """Run Ganeti's, then Corral's ``gnt-cluster argv``; their outputs must match."""
    theirs = ganeti_cluster(cl, *argv)
    ours = cl.gnt("cluster", *argv)
    assert "Traceback" not in theirs.stderr, theirs.stderr
    assert masked(ours) == masked(theirs)
    return ours


def test_query_cluster_info_keys(cl: TestCluster) -> None:
    code = "print(serializer.DumpJson(luxi.Client().QueryClusterInfo()).decode())"
    result = run_ganeti_python(cl.paths.root, code)
    assert result.rc == 0, result.stderr
    theirs = json.loads(result.stdout)
    assert sorted(theirs) == sorted(GANETI_KEYS)
    with cl.client() as client:
        assert client.call("QueryClusterInfo") == theirs


@pytest.mark.parametrize(
    "argv",
    [
        ["info"],
        ["show"],
        ["info", "--roman"],
        ["version"],
        ["getmaster"],
        ["master-ping"],
        ["show-ispecs-cmd"],
        ["queue", "info"],
        ["watcher", "info"],
        ["list-tags"],
        ["search-tags", "nothing-matches-this"],
        ["destroy"],
        ["modify"],
        ["verify"],
        ["verify", "--error-codes", "--debug-simulate-errors"],
        ["verify-disks"],
        ["verify-disks", "-g", "default", "--priority", "low"],
        ["repair-disk-sizes"],
    ],
    ids=" ".join,
)
def test_read_only_commands(cl: TestCluster, argv: list[str]) -> None:
    same(cl, *argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["version", "extra"],
        ["info", "extra"],
        ["search-tags"],
        ["list-tags", "extra"],
        ["queue"],
        ["queue", "drain", "now"],
        ["queue", "bogus"],
        ["watcher"],
        ["watcher", "pause"],
        ["watcher", "pause", "1h", "now"],
        ["watcher", "pause", "5x"],
        ["watcher", "pause", "h"],
        ["watcher", "sleep"],
        ["add-tags"],
        ["remove-tags"],
        ["modify", "--master-netmask", "abc"],
        ["modify", "--vg-name", "xenvg"],
        ["modify", "--uid-pool", "1-2-3"],
        ["modify", "--prealloc-wipe-disks", "maybe"],
        ["modify", "--ipolicy-vcpu-ratio", "0"],
        ["modify", "--ipolicy-vcpu-ratio", "default"],
        ["modify", "--ipolicy-disk-templates", "floppy"],
        ["modify", "--ipolicy-disk-templates", "plain"],
        ["modify", "--ipolicy-disk-templates="],
        ["modify", "--ipolicy-std-specs", "cpu-count=many"],
        ["modify", "--ipolicy-std-specs", "colour=1"],
        ["modify", "--ipolicy-std-specs", "memory-size=1x"],
        ["modify", "--ipolicy-std-specs", "cpu-count=-1"],
        ["modify", "--ipolicy-bounds-specs", "low:cpu-count=1"],
        ["modify", "--ipolicy-bounds-specs", BOUNDS.replace("min:cpu-count=1", "min:cpu-count=8")],
        ["modify", "--enabled-disk-templates", "file"],
        ["verify-disks", "extra"],
        ["verify-disks", "-g", "no-such-group"],
        ["repair-disk-sizes", "no-such-instance.example.com"],
        ["modify", "-D", "plain:stripes=abc"],
        ["modify", "-D", "file:foo=1"],
        ["modify", "-D", "no_plain"],
        ["modify", "-D", "plain:stripes=2"],
    ],
    ids=" ".join,
)
def test_refusals(cl: TestCluster, argv: list[str]) -> None:
    before = cl.gnt("cluster", "info").stdout
    result = same(cl, *argv)
    assert result.rc != 0
    assert cl.gnt("cluster", "info").stdout == before


@pytest.mark.parametrize(
    "argv",
    [
        ["modify", "--ipolicy-vcpu-ratio", "3"],
        ["modify", "--ipolicy-spindle-ratio", "16.5", "--ipolicy-disk-templates", "file"],
        ["modify", "--ipolicy-std-specs", "memory-size=256,cpu-count=2"],
        ["modify", "--ipolicy-bounds-specs", BOUNDS],
        ["modify", "--ipolicy-bounds-specs", f"{BOUNDS}//{BOUNDS.replace('=1,', '=2,')}"],
        ["modify", "-C", "7", "--max-running-jobs", "15", "--max-tracked-jobs", "30"],
        ["modify", "--maintain-node-health", "yes", "--modify-etc-hosts", "no"],
        ["modify", "-B", "vcpus=2", "-N", "link=br7"],
        ["modify", "-D", "drbd:resync-rate=61440,protocol=C", "-D", "plain:stripes=1"],
    ],
    ids=" ".join,
)
def test_changes(cl: TestCluster, argv: list[str]) -> None:
    """Each change is made by Ganeti's command, then again by Corral's (the
    second run finds it made): same output, and ``info`` shows it the same."""
    same(cl, *argv)
    same(cl, "info")
    same(cl, "show-ispecs-cmd")


def test_state_changing_commands(cl: TestCluster) -> None:
    for action in ("drain", "undrain"):
        same(cl, "queue", action)
        same(cl, "queue", "info")
    same(cl, "add-tags", "web", "db10", "db9")
    same(cl, "list-tags")
    same(cl, "search-tags", "^db")
    same(cl, "info")
    theirs = ganeti_cluster(cl, "remove-tags", "web")
    ok = cl.gnt("cluster", "add-tags", "web")
    assert ok.rc == 0
    assert masked(cl.gnt("cluster", "remove-tags", "web")) == masked(theirs)
    same(cl, "remove-tags", "no-such-tag")


def test_watcher(cl: TestCluster) -> None:
    theirs = ganeti_cluster(cl, "watcher", "pause", "1h")
    ours = cl.gnt("cluster", "watcher", "pause", "1h")
    paused = re.compile(r"^The watcher is paused until \w{3} \w{3} [ \d]\d [\d:]{8} \d{4}\.\n$")
    assert (theirs.rc, ours.rc) == (0, 0)
    assert paused.match(theirs.stdout) and paused.match(ours.stdout), (theirs, ours)
    same(cl, "watcher", "info")
    same(cl, "watcher", "continue")
    same(cl, "watcher", "info")


@pytest.mark.parametrize(
    "argv",
    [["verify", "--bogus"], ["info", "-z"], ["bogus"], ["--bogus"], []],
    ids=lambda argv: " ".join(argv) or "nothing",
)
def test_usage_errors_exit_as_ganetis(cl: TestCluster, argv: list[str]) -> None:
    """A command's unknown option exits 2 (optparse's), an unknown or missing
    command 1; the wording is argparse's, not optparse's."""
    theirs, ours = ganeti_cluster(cl, *argv), cl.gnt("cluster", *argv)
    assert "Traceback" not in theirs.stderr, theirs.stderr
    assert ours.rc == theirs.rc, (theirs, ours)


def test_instance_communication_network(cl: TestCluster) -> None:
    """Ganeti's command sets the network (created, connected to the group) and
    unsets it; once the network is gone again Corral's does the same, and says
    it the same."""
    arg = "--instance-communication-network=commnet"
    created = ganeti_cluster(cl, "modify", arg)
    assert created.rc == 0, created.stderr
    theirs = cl.gnt("network", "list", "-o", _NETWORK_FIELDS, "commnet").stdout
    disabled = ganeti_cluster(cl, "modify", "--instance-communication-network=")
    assert disabled.rc == 0, disabled.stderr
    _remove_network(cl, "commnet")
    try:
        assert masked(cl.gnt("cluster", "modify", arg)) == masked(created)
        assert cl.gnt("network", "list", "-o", _NETWORK_FIELDS, "commnet").stdout == theirs
        assert "default (routed, communication_rt, )" in theirs
        same(cl, "info")
        assert masked(cl.gnt("cluster", "modify", "--instance-communication-network=")) == (
            masked(disabled)
        )
    finally:
        cl.gnt("cluster", "modify", "--instance-communication-network=")
        _remove_network(cl, "commnet")


_NETWORK_FIELDS = "name,network,network6,gateway,gateway6,mac_prefix,group_list"


def _remove_network(cl: TestCluster, name: str) -> None:
    for argv in (("disconnect", name), ("remove", name)):
        result = cl.gnt("network", *argv)
        assert result.rc == 0, result.stderr
