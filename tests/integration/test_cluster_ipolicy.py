"""The instance policy on a real cluster: Ganeti's defaults at init, changes
with gnt-cluster modify (bad ones refused, nothing changed), and enforcement
at instance create, modify and grow-disk (refused, or warnings with
``ignore_ipolicy``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import ipolicy as IP
from tests.helpers.cluster import TestCluster, new_root, running_cluster
from tests.helpers.instances import add, config_serial, disk_files, failed, ok, rows
from tests.helpers.jobs import wait_final
from tests.helpers.osdef import make_os

# Any policy option makes the test cluster keep Ganeti's default policy.
DEFAULT_POLICY = ("--ipolicy-vcpu-ratio", "4")
BOUNDS = (
    "min:cpu-count=1,disk-count=1,disk-size=1g,memory-size=128,nic-count=1,spindle-use=1"
    "/max:cpu-count=2,disk-count=2,disk-size=2g,memory-size=512,nic-count=2,spindle-use=2"
)


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("ipolicy"), *DEFAULT_POLICY) as cluster:
        make_os(cluster.paths, "plain", variants=None)
        yield cluster


def policy(cl: TestCluster) -> dict[str, Any]:
    with cl.client() as client:
        return dict(client.call("QueryClusterInfo")["ipolicy"])


def run_op(cl: TestCluster, op: dict[str, Any]) -> tuple[str, Any, list[str]]:
    """Submit one opcode over luxi: its status, result and log messages."""
    with cl.client() as client:
        job_id = client.submit_job([op])
        ((status, result, log),) = wait_final(client, [job_id], ("opresult", "oplog"))
    return status, result[0], [entry[3] for entry in log[0]]


def create_op(name: str, size: int, **extra: Any) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "create",
        "disk_template": "file",
        "disks": [{"size": size}],
        "nics": [{}],
        "os_type": "plain",
        "name_check": False,
        "ip_check": False,
        "start": False,
        **extra,
    }


def test_new_cluster_has_ganetis_default_policy(cl: TestCluster) -> None:
    assert policy(cl) == IP.initial_ipolicy({}, ["file", "diskless"])


@pytest.mark.parametrize(
    ("options", "texts"),
    [
        (
            ("--ipolicy-bounds-specs", BOUNDS.replace("max:cpu-count=2", "max:cpu-count=0")),
            ("wrong_input", "Invalid specification of min/max values for cpu-count: 1/0"),
        ),
        (("--ipolicy-std-specs", "memory-size=64"), ("Invalid std specifications",)),
        (("--ipolicy-std-specs", "colour=1"), ("Parameter Error: Unknown parameter 'colour'",)),
        (("--ipolicy-disk-templates", "plain"), ("not enabled on the cluster: plain",)),
        (("--ipolicy-disk-templates", "floppy"), ("Invalid disk template(s) floppy",)),
        (("--ipolicy-vcpu-ratio", "0"), ("Can't unset ipolicy attribute 'vcpu-ratio'",)),
        (("--ipolicy-bounds-specs", "min:cpu-count=1"), ("Missing parameters in ipolicy spec",)),
        (("--enabled-disk-templates", "file"), ("allowed by the ipolicy, but not enabled",)),
    ],
)
def test_bad_policy_changes_change_nothing(
    cl: TestCluster, options: tuple[str, ...], texts: tuple[str, ...]
) -> None:
    before = (policy(cl), config_serial(cl))
    failed(cl.gnt("cluster", "modify", *options), *texts)
    assert (policy(cl), config_serial(cl)) == before


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"colour": 1}, "Invalid key in new ipolicy: colour"),
        ({"vcpu-ratio": "lots"}, "Invalid value for attribute 'vcpu-ratio'"),
        ({"minmax": "everything"}, "minmax must be a list"),
        ({"minmax": [{"min": {"cpu-count": "x"}}]}, "'cpu-count' (value x) is not a valid"),
        ({"minmax": []}, "Can't unset ipolicy attribute 'minmax'"),
        ({"disk-templates": []}, "Can't unset ipolicy attribute 'disk-templates'"),
    ],
)
def test_bad_policies_over_luxi(cl: TestCluster, change: dict[str, Any], error: str) -> None:
    before = (policy(cl), config_serial(cl))
    status, result, _ = run_op(cl, {"OP_ID": "OP_CLUSTER_SET_PARAMS", "ipolicy": change})
    assert status == "error" and error in str(result), result
    assert (policy(cl), config_serial(cl)) == before


def test_violations_at_create_modify_and_grow(cl: TestCluster) -> None:
    # Ganeti's defaults: a disk of 1 GiB at least.
    err = failed(add(cl, "small", "-t", "file", "--disk", "0:size=512m", "-o", "plain"))
    assert "Instance allocation to group" in err and "(default) violates policy:" in err
    assert "disk-size/0 value 512 is not in range [1024, 1048576]" in err
    assert rows(cl, ["name"], "small") == [] and disk_files(cl, "small") == []
    status, _, log = run_op(cl, create_op("small", 512, ignore_ipolicy=True))
    assert status == "success"
    assert any("WARNING: Instance allocation to group" in line for line in log), log
    assert rows(cl, ["disk.sizes"], "small") == [["512"]]

    ok(add(cl, "ok1", "-t", "file", "--disk", "0:size=1g", "-o", "plain", "--no-start"))
    err = failed(cl.gnt("instance", "modify", "-B", "vcpus=16", "ok1"))
    assert "cpu-count value 16 is not in range [1, 8]" in err
    assert rows(cl, ["be/vcpus"], "ok1") == [["1"]]
    status, _, log = run_op(
        cl,
        {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "ok1", "beparams": {"vcpus": 16},
         "ignore_ipolicy": True},
    )  # fmt: skip
    assert status == "success" and any("cpu-count value 16" in line for line in log), log


def test_policy_change_warns_about_violating_instances(cl: TestCluster) -> None:
    # On the node named: the allocator would refuse it (the earlier tests' instances
    # already use more vCPUs than the node's vcpu-ratio allows).
    ok(
        add(
            cl, "mid", "-t", "file", "--disk", "0:size=1g", "-o", "plain", "--no-start",
            "-n", cl.node_name,
        )
    )  # fmt: skip
    # "ok1" (16 VCPUs) and "small" (512 MiB disk) violate the old policy and the new one.
    out = ok(cl.gnt("cluster", "modify", "--ipolicy-bounds-specs", BOUNDS))
    assert "following instances violate them" not in out
    assert policy(cl)["minmax"][0]["max"]["disk-size"] == 2048
    bigger = BOUNDS.replace("memory-size=128", "memory-size=256")
    out = ok(cl.gnt("cluster", "modify", "--ipolicy-std-specs", "memory-size=256",
                    "--ipolicy-bounds-specs", bigger))  # fmt: skip
    assert "After the ipolicy change the following instances violate them: mid" in out


def test_grow_disk_beyond_the_policy(cl: TestCluster) -> None:
    ok(cl.gnt("cluster", "modify", "--ipolicy-bounds-specs", BOUNDS))
    err = failed(cl.gnt("instance", "grow-disk", "mid", "0", "2g"))
    assert (
        "Growing disk 0 violates policy: disk-size/0 value 3072 is not in range [1024, 2048]" in err
    )
    assert rows(cl, ["disk.sizes"], "mid") == [["1024"]]
    op = {"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "mid", "disk": 0, "amount": 2048}
    status, _, log = run_op(cl, {**op, "ignore_ipolicy": True})
    assert status == "success" and any("WARNING: Growing disk 0 violates" in m for m in log), log
    assert rows(cl, ["disk.sizes"], "mid") == [["3072"]]


def test_init_with_policy_options(tmp_path: Path) -> None:
    with running_cluster(
        tmp_path, "--specs-mem-size", "min=64,std=256", "--ipolicy-disk-templates", "file"
    ) as cl:
        got = policy(cl)
        assert got["minmax"][0]["min"]["memory-size"] == 64
        assert got["std"]["memory-size"] == 256
        assert got["disk-templates"] == ["file"]


def test_init_with_a_bad_policy_creates_nothing(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    try:
        failed(cl.init("--specs-cpu-count", "min=4,max=2"), "Invalid instance policy")
        assert not cl.paths.config_db.exists()
    finally:
        cl.stop()
