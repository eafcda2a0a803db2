"""``gnt-backup``: Ganeti 3.0.2's command and Corral's print the same, and
submit the same opcodes.

Commands that submit a job run on twins with ``--submit``: Ganeti's tool for
one name, Corral's for the other; their outputs must match and so must the
opcodes of the two jobs (but for the name and the reason trail's client).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.compare import Output, assert_same, assert_same_on_twins, corral, ganeti
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.osdef import make_os

TWINS = ("twina.example.com", "twinb.example.com")
# Which of a stream's progress lines a job shows, and in which order, depends on
# when the master's status calls fall (in Ganeti too): compared apart.
_STREAM_LINE = re.compile(
    r"^<ctime> disk/\d+ (is (sending|receiving) data|sent |finished (sending|receiving)).*\n",
    re.M,
)


@pytest.fixture(scope="module")
def bcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with an OS definition and one instance."""
    with running_cluster(tmp_path_factory.mktemp("backup")) as cl:
        make_os(cl.paths, "debootstrap", variants=("default",))
        result = cl.gnt(
            "instance", "add", "-t", "file", "--disk", "0:size=16m", "-o",
            "debootstrap+default", "--no-name-check", "--no-ip-check", "--no-start",
            "web1.example.com",
        )  # fmt: skip
        assert result.rc == 0, result.stderr
        yield cl


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--no-headers"],
        ["list", "-o", "export,node", "--separator=:"],
        ["list", "-n", "node1.example.com"],
        ["list", "-n", "no-such-node"],
        ["list", "-o", "node,bogus"],
        ["list", "extra"],
        ["list-fields"],
        ["list-fields", "node", "bogus"],
        ["export", "web1.example.com"],
        ["export"],
        ["export", "-n", "node1.example.com"],
        ["export", "-n", "node1.example.com", "a", "b"],
        # Corral has no zeroing helper yet: refused at submission, by both.
        ["export", "-n", "node1.example.com", "--zero-free-space", "web1.example.com"],
        ["import"],
        ["import", "-t", "diskless", "--disk", "0:size=1g", "new.example.com"],
        ["import", "--disk", "0:adopt=lv", "new.example.com"],
        ["import", "--disk", "0:size=1g", "-s", "1g", "new.example.com"],
        ["import", "--disk", "x:size=1g", "new.example.com"],
        ["remove"],
        ["remove", "a", "b"],
    ],
)
def test_outputs(bcluster: TestCluster, argv: list[str]) -> None:
    assert_same(bcluster, ["gnt-backup", *argv])


def _ops(cl: TestCluster, output: str, name: str) -> list[dict[str, Any]]:
    """The opcodes of the job ``--submit`` named (``JobID: N``), ``name`` as ``<TWIN>``."""
    job_id = int(output.removeprefix("JobID: ").split()[0])
    with cl.client() as client:
        ((ops,),) = client.query_jobs([job_id], ["ops"])
    out = []
    for op in ops:
        op = {k: v for k, v in op.items() if k != "reason"}
        out.append({k: "<TWIN>" if v == name else v for k, v in op.items()})
    return out


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "-n", "node1.example.com", "{}"],
        ["export", "-n", "node1.example.com", "--noshutdown", "--remove-instance",
         "--ignore-remove-failures", "--shutdown-timeout=30", "--transport-compression=gzip",
         "--long-sleep", "{}"],
        ["import", "-n", "node1.example.com", "-t", "file", "--src-node", "node1.example.com",
         "--src-dir", "/srv/ganeti/export/x", "--no-name-check", "--no-ip-check", "{}"],
        ["import", "-n", "node1.example.com", "-t", "plain", "--disk", "0:size=1g",
         "--net", "0:mode=routed", "--identify-defaults", "--compress", "gzip", "-B",
         "vcpus=2", "-H", "fake:migration_mode=live", "-O", "a=b", "--tags", "x,y",
         "--no-name-check", "--no-ip-check", "--ignore-ipolicy", "{}"],
        ["import", "-I", "hail", "--no-nics", "--src-node", "node1.example.com", "{}"],
        ["remove", "{}"],
    ],
)  # fmt: skip
def test_submitted_opcodes(bcluster: TestCluster, argv: list[str]) -> None:
    full = ["gnt-backup", *argv[:1], "--submit", *argv[1:]]
    theirs = ganeti(bcluster, [a.replace("{}", TWINS[0]) for a in full])
    ours = corral(bcluster, [a.replace("{}", TWINS[1]) for a in full])
    assert Output.of(ours, {TWINS[1]: "<TWIN>"}) == Output.of(theirs, {TWINS[0]: "<TWIN>"})
    assert theirs.rc == 0, theirs.stderr
    assert _ops(bcluster, ours.stderr, TWINS[1]) == _ops(bcluster, theirs.stderr, TWINS[0])


def test_remove_unknown_export_on_twins(bcluster: TestCluster) -> None:
    assert_same_on_twins(bcluster, ["gnt-backup", "remove", "{}"], TWINS)


def test_export_list_remove_on_twins(bcluster: TestCluster) -> None:
    """Real exports of two stopped instances alike: the same job output, list, removal."""
    twins = ("exporta.example.com", "exportb.example.com")
    for name in twins:
        result = bcluster.gnt(
            "instance", "add", "-t", "file", "--disk", "0:size=8m", "-o", "debootstrap+default",
            "--no-name-check", "--no-ip-check", "--no-start", name,
        )  # fmt: skip
        assert result.rc == 0, result.stderr
    try:
        argv = ["gnt-backup", "export", "-n", "node1.example.com"]
        theirs = Output.of(ganeti(bcluster, [*argv, twins[0]]), {twins[0]: "<TWIN>"})
        ours = Output.of(corral(bcluster, [*argv, twins[1]]), {twins[1]: "<TWIN>"})
        for out in (theirs, ours):
            assert out.rc == 0 and "Finalizing export on node1.example.com" in out.stdout
            assert "<ctime> disk/0 finished receiving data\n" in out.stdout
        assert (ours.stderr, _STREAM_LINE.sub("", ours.stdout)) == (
            theirs.stderr,
            _STREAM_LINE.sub("", theirs.stdout),
        )
        assert_same(bcluster, ["gnt-backup", "list"])
        assert_same(bcluster, ["gnt-backup", "list", "-o", "export", "--no-headers"])
        assert_same_on_twins(bcluster, ["gnt-backup", "remove", "{}"], twins)
        assert_same(bcluster, ["gnt-backup", "list"])
    finally:
        for name in twins:
            bcluster.gnt("instance", "remove", "-f", name)


def test_export_of_a_running_diskless_instance(bcluster: TestCluster) -> None:
    """QA's TestInstanceExport on a diskless instance: it has no disk to
    snapshot, so Ganeti's export needs no --long-sleep; the instance is
    stopped, exported and running again."""
    cl, name = bcluster, "bare1.example.com"
    added = cl.gnt("instance", "add", "-t", "diskless", "-o", "debootstrap+default",
                   "--no-name-check", "--no-ip-check", name)  # fmt: skip
    assert added.rc == 0, added.stderr
    try:
        exported = ganeti(cl, ["gnt-backup", "export", "-n", "node1.example.com", name])
        assert exported.rc == 0, exported.stderr
        status = corral(cl, ["gnt-instance", "list", "--no-headers", "-o", "status", name])
        assert status.stdout.strip() == "running"
        listed = ganeti(cl, ["gnt-backup", "list", "--no-headers", "-o", "export"])
        assert name in listed.stdout.split()
    finally:
        corral(cl, ["gnt-backup", "remove", name])
        corral(cl, ["gnt-instance", "remove", "-f", name])
