"""Cluster disk parameters against Ganeti 3.0.2's own checks: its
``LUClusterSetParams.CheckArguments`` (ForceDictType, VerifyDictOptions, the
access mode check) on each case, and Corral's OP_CLUSTER_SET_PARAMS on the
same.  What Ganeti refuses Corral refuses with the same error; what it
accepts Corral accepts at Ganeti's defaults, and refuses otherwise (the
templates that have disk parameters are not built yet).  ``gnt-cluster
modify -D`` and ``init -D`` are compared in test_cluster.py and below."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.ganeti import ganeti_library
from tests.helpers.cluster import TestCluster, new_root, running_cluster
from tests.helpers.jobs import wait_final

CASES: list[dict[str, dict[str, Any]]] = [
    {"plain": {"stripes": 1}},
    {"drbd": {"resync-rate": 61440, "protocol": "C", "dynamic-resync": False}},
    {"plain": {"stripes": "1"}, "rbd": {"access": "kernelspace"}},
    {"file": {}, "diskless": {}},
    {"plain": {"stripes": 2}},
    {"ext": {"access": "userspace"}},
    {"drbd": {"dynamic-resync": "true"}},
    {"plain": {"stripes": "abc"}},
    {"file": {"foo": 1}},
    {"file": {"stripes": 1}},
    {"plain": {"pool": "rbd"}},
    {"rbd": {"access": "pink"}},
    {"gluster": {"port": "24007x"}},
]

_GANETI = r"""
import json, sys
from types import SimpleNamespace
from ganeti import constants, errors, opcodes
from ganeti.cmdlib.cluster import LUClusterSetParams
out = []
for diskparams in json.load(sys.stdin):
    lu = SimpleNamespace(op=opcodes.OpClusterSetParams(diskparams=diskparams))
    try:
        LUClusterSetParams.CheckArguments(lu)
        out.append(["ok", lu.op.diskparams])
    except errors.GenericError as err:
        out.append([type(err).__name__, list(err.args)])
print(json.dumps({"cases": out, "defaults": constants.DISK_DT_DEFAULTS}))
"""


@pytest.fixture(scope="module")
def theirs(ganeti: Path) -> dict[str, Any]:
    # A hash seed under which Ganeti joins its access modes in sorted order.
    result = ganeti_library(_GANETI, stdin=json.dumps(CASES), env={"PYTHONHASHSEED": "3"})
    assert result.rc == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def ours(cl: TestCluster, diskparams: dict[str, Any]) -> list[Any]:
    """Corral's answer to OP_CLUSTER_SET_PARAMS with ``diskparams``: ["ok", None]
    or the error class and arguments."""
    op = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "diskparams": diskparams}
    with cl.client() as client:
        job = client.submit_job([op])
        [[status, [result]]] = wait_final(client, [job], ("status", "opresult"))
    return ["ok", result] if status == "success" else result


def at_defaults(diskparams: dict[str, dict[str, Any]], defaults: dict[str, Any]) -> bool:
    return all(
        value == defaults[dt][key] and type(value) is type(defaults[dt][key])
        for dt, params in diskparams.items()
        for key, value in params.items()
    )


def test_as_ganeti_checks_them(gcluster: TestCluster, theirs: dict[str, Any]) -> None:
    defaults = theirs["defaults"]
    for diskparams, their in zip(CASES, theirs["cases"], strict=True):
        our = ours(gcluster, diskparams)
        if their[0] != "ok":
            assert our == their, diskparams
        elif at_defaults(their[1], defaults):
            assert our == ["ok", None], diskparams
        else:
            assert our[0] == "OpPrereqError", (diskparams, our)
            assert "not supported by Corral yet" in our[1][0] and our[1][1] == "wrong_input"
    with gcluster.client() as client:
        assert client.call("QueryClusterInfo")["diskparams"] == defaults


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ("plain:stripes=2", "Disk parameter 'plain:stripes' is not supported by Corral yet"),
        ("plain:stripes=x", "Parameter Error: 'stripes' (value x) is not a valid integer"),
        ("plain:stripes=1,pool=rbd", "Invalid parameters for disk template plain: pool"),
        ("file:stripes=1", "Invalid parameters for disk template file: stripes"),
        (
            "plain:pool=rbd",
            "While verify diskparam options: ('Provided option keys not supported: plain/pool',"
            " 'wrong_input')",
        ),
    ],
)
def test_init_refuses_as_ganeti(ganeti: Path, tmp_path: Path, option: str, error: str) -> None:
    """As Ganeti's gnt-cluster init and bootstrap (their messages); nothing made."""
    cl = new_root(tmp_path)
    result = cl.init("-D", option)
    assert result.rc == 1 and error in result.stderr, result.stderr
    assert not cl.paths.config_db.exists()


def test_init_takes_ganeti_defaults(ganeti: Path, tmp_path: Path) -> None:
    options = ("-D", "plain:stripes=1", "-D", "drbd:protocol=C")
    with running_cluster(tmp_path, *options) as cl, cl.client() as client:
        info = client.call("QueryClusterInfo")
    result = ganeti_library(
        "from ganeti import constants, serializer\n"
        "print(serializer.DumpJson(constants.DISK_DT_DEFAULTS).decode())"
    )
    assert info["diskparams"] == json.loads(result.stdout)
