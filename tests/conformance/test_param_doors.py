"""Sizes given through each door are stored as Ganeti 3.0.2 stores them
through the same door, compared with Ganeti's own code: its commands round
every size up to a multiple of 4 MiB (ParseUnit); its masterd rounds a
backend parameter's size the same way whatever the door (ForceDictType),
and takes a disk's size through luxi or RAPI as given (ComputeDisks)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.ganeti import ganeti_library
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import add, ok, rows
from tests.helpers.jobs import wait_final
from tests.helpers.osdef import make_os
from tests.helpers.rapi import WRITE_USER, Rapi, add_users

MEMORY: list[Any] = ["1025", "1023", "1.5g", "2049m", 1025, 2048]
DISK: list[Any] = ["1025", 1025, 1021]

_GANETI = """
import json, sys
from ganeti import constants, objects, utils
from ganeti.cmdlib.instance_storage import ComputeDisks
cases = json.load(sys.stdin)
def backend(value):
    params = {"memory": value}
    objects.UpgradeBeParams(params)  # as LUInstanceCreate, before ForceDictType
    utils.ForceDictType(params, constants.BES_PARAMETER_TYPES)
    return params["maxmem"]
print(json.dumps({
    "cli_memory": [utils.ParseUnit(str(v)) for v in cases["memory"]],
    "api_memory": [backend(v) for v in cases["memory"]],
    "cli_disk": [utils.ParseUnit(str(v)) for v in cases["disk"]],
    "api_disk": [ComputeDisks([{"size": v}], constants.DT_FILE, "xenvg")[0]["size"]
                 for v in cases["disk"]],
}))
"""


@pytest.fixture(scope="module")
def ganeti_sizes(ganeti: Path) -> dict[str, list[int]]:
    result = ganeti_library(_GANETI, stdin=json.dumps({"memory": MEMORY, "disk": DISK}))
    assert result.rc == 0, result.stderr
    sizes: dict[str, list[int]] = json.loads(result.stdout)
    return sizes


@pytest.fixture(scope="module")
def cl(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("doors")) as cluster:
        make_os(cluster.paths, "doors")
        add_users(cluster)
        yield cluster


def create_op(name: str, memory: Any, disk: Any) -> dict[str, Any]:
    return {
        "instance_name": name,
        "mode": "create",
        "disk_template": "file",
        "disks": [{"size": disk}],
        "nics": [],
        "os_type": "doors+default",
        "beparams": {"memory": memory},
        "no_install": True,
        "start": False,
        "name_check": False,
        "ip_check": False,
    }


def by_cli(cl: TestCluster, name: str, memory: Any, disk: Any) -> None:
    ok(add(cl, name, "-t", "file", "--disk", f"0:size={disk}", "-B", f"memory={memory}",
           "-o", "doors+default", "--no-install", "--no-start"))  # fmt: skip


def by_luxi(cl: TestCluster, name: str, memory: Any, disk: Any) -> None:
    with cl.client() as client:
        job = client.submit_job([{"OP_ID": "OP_INSTANCE_CREATE", **create_op(name, memory, disk)}])
        ((status,),) = wait_final(client, [job], ("status",))
    assert status == "success"


def by_rapi(cl: TestCluster, name: str, memory: Any, disk: Any) -> None:
    body = create_op(name, memory, disk)
    body["name"] = body.pop("instance_name")
    body["os"] = body.pop("os_type")
    job = Rapi(cl, *WRITE_USER).job("POST", "/2/instances", {"__version__": 1, **body})
    with cl.client() as client:
        ((status,),) = wait_final(client, [job], ("status",))
    assert status == "success"


DOORS: dict[str, Callable[[TestCluster, str, Any, Any], None]] = {
    "cli": by_cli,
    "luxi": by_luxi,
    "rapi": by_rapi,
}


@pytest.mark.parametrize("door", list(DOORS))
def test_sizes_are_stored_as_ganeti_stores_them(
    cl: TestCluster, ganeti_sizes: dict[str, list[int]], door: str
) -> None:
    create = DOORS[door]
    expected = "cli" if door == "cli" else "api"
    for index, memory in enumerate(MEMORY):
        create(cl, f"{door}-m{index}", memory, 4)
    for index, disk in enumerate(DISK):
        create(cl, f"{door}-d{index}", 128, disk)
    stored = {row[0]: row[1:] for row in rows(cl, ["name", "be/maxmem", "disk.size/0"])}
    memory = [int(stored[f"{door}-m{i}"][0].rstrip("M")) for i in range(len(MEMORY))]
    disks = [int(stored[f"{door}-d{i}"][1].rstrip("M")) for i in range(len(DISK))]
    assert memory == ganeti_sizes[f"{expected}_memory"]
    assert disks == ganeti_sizes[f"{expected}_disk"]
