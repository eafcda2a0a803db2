"""Ganeti's validation, as its QA suite checks it, through Ganeti 3.0.2's own
commands against Corral: what Ganeti refuses is refused (with its message,
changing nothing), what it accepts is accepted (and stored as it stores it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.compare import assert_same, corral, ganeti
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import NO_CHECKS, ok
from tests.helpers.jobs import cluster_state as _with_jobs
from tests.helpers.jobs import wait_final
from tests.helpers.osdef import make_os

FILE_INST = "file1.example.com"
BARE_INST = "bare1.example.com"


@pytest.fixture(scope="module")
def vcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with a file instance and a diskless one, both stopped."""
    with running_cluster(tmp_path_factory.mktemp("validation")) as cl:
        make_os(cl.paths, "os1", variants=None)
        common = [*NO_CHECKS, "-o", "os1", "--no-start", "-n", cl.node_name]
        ok(cl.gnt("instance", "add", *common, "-t", "file", "--disk", "0:size=16m", FILE_INST))
        ok(cl.gnt("instance", "add", *common, "-t", "diskless", BARE_INST))
        yield cl


def cluster_state(cl: TestCluster) -> dict[str, Any]:
    """The configuration (its serial) and the cluster: a refused job is a job."""
    state = _with_jobs(cl)
    del state["jobs"]
    return state


def refused(result: Result, *texts: str) -> None:
    assert result.rc == 1, (result.stdout, result.stderr)
    for text in texts:
        assert text in result.stderr, (text, result.stderr)


def test_auto_balance_takes_true_or_false_only(vcluster: TestCluster) -> None:
    """QA's TestClusterModifyBe: -B auto_balance=1 fails, False and True work
    (Ganeti's ForceDictType takes only true or false, in any case, as text)."""
    cl = vcluster
    assert ganeti(cl, ["gnt-cluster", "modify", "-B", "auto_balance=False"]).rc == 0
    before = cluster_state(cl)
    out = assert_same(cl, ["gnt-cluster", "modify", "-B", "auto_balance=1"])
    assert (out.rc, out.stderr) == (
        1,
        "Parameter Error: 'auto_balance' (value 1) is not a valid boolean\n",
    )
    assert cluster_state(cl) == before
    assert ganeti(cl, ["gnt-cluster", "modify", "-B", "auto_balance=True"]).rc == 0
    info = ganeti(cl, ["gnt-cluster", "info"]).stdout
    assert "\n    auto_balance: True\n" in info
    # Through luxi, as Ganeti's logical unit converts what reaches it.
    with cl.client() as client:
        texts = {}
        for value in ("1", "yes", "FALSE", 0, ""):
            op = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "beparams": {"auto_balance": value}}
            texts[value] = wait_final(client, [client.submit_job([op])])[0][0]
        assert texts == {
            "1": "error",
            "yes": "error",
            "FALSE": "success",
            0: "success",
            "": "success",
        }


def test_disabling_a_disk_template_in_use_is_refused(vcluster: TestCluster) -> None:
    cl = vcluster
    before = cluster_state(cl)
    for keep, gone, what in (("diskless", "file", "disk"), ("file", "diskless", "instance")):
        argv = ["gnt-cluster", "modify", f"--enabled-disk-templates={keep}",
                f"--ipolicy-disk-templates={keep}"]  # fmt: skip
        refused(
            ganeti(cl, argv),
            f"Cannot disable disk template '{gone}', because there is at least one {what}"
            " using it:\n * ",
        )
    out = ganeti(cl, ["gnt-cluster", "modify", "--enabled-disk-templates=diskless",
                      "--ipolicy-disk-templates=diskless"]).stderr  # fmt: skip
    assert "size=16m)> (on file1.example.com)\n" in out, out
    assert cluster_state(cl) == before


def test_spindles_need_exclusive_storage(vcluster: TestCluster) -> None:
    """QA's TestInstanceModifyDisks: a disk with spindles is refused where
    exclusive storage is off, one without them is added."""
    cl = vcluster
    text = "Spindles in instance disks cannot be specified when exclusive storage is not active"
    before = cluster_state(cl)
    refused(ganeti(cl, ["gnt-instance", "modify", "--disk", "add:size=16m,spindles=1", FILE_INST]),
            text)  # fmt: skip
    refused(ganeti(cl, ["gnt-instance", "add", *NO_CHECKS, "-o", "os1", "--no-start", "-n",
                        cl.node_name, "-t", "file", "--disk", "0:size=16m,spindles=1",
                        "spindly.example.com"]), text)  # fmt: skip
    assert cluster_state(cl) == before
    assert ganeti(cl, ["gnt-instance", "modify", "--disk", "add:size=16m", FILE_INST]).rc == 0
    assert ganeti(cl, ["gnt-instance", "modify", "--disk", "remove", FILE_INST]).rc == 0


def test_shutdown_of_an_offline_instance_needs_force(vcluster: TestCluster) -> None:
    cl = vcluster
    assert ganeti(cl, ["gnt-instance", "modify", "--offline", BARE_INST]).rc == 0
    try:
        before = cluster_state(cl)
        refused(
            ganeti(cl, ["gnt-instance", "shutdown", BARE_INST]),
            f"Instance '{BARE_INST}' is marked to be offline, can't use instance from outside"
            " down, up states",
        )
        assert cluster_state(cl) == before
        forced = ganeti(cl, ["gnt-instance", "shutdown", "--force", BARE_INST])
        assert forced.rc == 0, forced.stderr
        assert "WARNING: Ignoring offline instance check" in forced.stdout + forced.stderr
        state = ganeti(cl, ["gnt-instance", "list", "--no-headers", "-o", "admin_state", BARE_INST])
        assert state.stdout.strip() == "offline"  # a forced shutdown leaves it offline
    finally:
        assert ganeti(cl, ["gnt-instance", "modify", "--online", BARE_INST]).rc == 0


def _verify_fails(cl: TestCluster) -> bool:
    return ganeti(cl, ["gnt-cluster", "verify"]).rc != 0


def test_file_storage_dir_as_ganeti_checks_it(vcluster: TestCluster) -> None:
    """QA's TestClusterModifyFileStorageDir, in order: a forbidden directory is
    taken (verify then fails while file storage is enabled), unsetting it
    is refused while file storage is enabled and taken when it is not."""
    cl = vcluster
    default = cl.gnt("cluster", "info").stdout.split("file storage path: ")[1].split("\n")[0]
    modify = ["gnt-cluster", "modify"]
    assert ganeti(cl, [*modify, "--file-storage-dir=/boot/"]).rc == 0
    assert _verify_fails(cl)
    refused(
        ganeti(cl, [*modify, "--file-storage-dir="]),
        "Unsetting the 'file' storage directory while having 'file' storage enabled is not"
        " permitted.",
    )
    assert ganeti(cl, [*modify, f"--file-storage-dir={default}"]).rc == 0
    assert not _verify_fails(cl)


def test_os_hypervisor_parameters_of_any_ganeti_hypervisor(vcluster: TestCluster) -> None:
    """QA's TestOsModifyValid and TestOsModifyInvalid: parameters of Xen's
    hypervisors are stored for an OS (typed, as Ganeti stores them); an unknown
    hypervisor is refused."""
    cl = vcluster
    argv = ["gnt-os", "modify", "-H", "xen-pvm:root_path=/dev/sda5",
            "-H", "xen-hvm:acpi=False,pae=True", "temp-os"]  # fmt: skip
    assert ganeti(cl, argv).rc == 0
    with cl.client() as client:
        os_hvp: dict[str, Any] = client.call("QueryClusterInfo")["os_hvp"]
    assert os_hvp["temp-os"] == {
        "xen-pvm": {"root_path": "/dev/sda5"},
        "xen-hvm": {"acpi": False, "pae": True},
    }
    before = cluster_state(cl)
    assert ganeti(cl, ["gnt-os", "modify", "-H", "blahblahblubb:bar=", "temp-os"]).rc == 1
    assert ganeti(cl, ["gnt-os", "modify", "-H", "xen-pvm:acpi=True", "temp-os"]).rc == 1
    assert cluster_state(cl) == before


@pytest.mark.parametrize(
    ("version", "text"),
    [
        ("x", "Invalid primary ip version value: invalid literal for int()"),
        ("5", "Invalid primary ip version: 5."),
        ("6", "is not a valid IPv6 address."),
    ],
)
def test_primary_ip_version_refused(tmp_path: Path, version: str, text: str) -> None:
    """gnt-cluster init checks --primary-ip-version as Ganeti's (the node's
    address must be of that version)."""
    from tests.helpers.cluster import new_root

    cl = new_root(tmp_path)
    result = cl.init(f"--primary-ip-version={version}")
    assert result.rc == 1 and text in result.stderr, result.stderr
    assert not cl.paths.master_socket.exists()


def test_primary_ip_version_4_accepted(tmp_path: Path) -> None:
    with running_cluster(tmp_path, "--primary-ip-version=4") as cl:
        info = corral(cl, ["gnt-cluster", "info"]).stdout
        assert "primary ip version: 4" in info
