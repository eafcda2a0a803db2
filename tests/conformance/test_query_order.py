"""Rows in Ganeti's order, checked as Ganeti's QA (qa_utils.GenericQueryTest,
GenericQueryFieldsTest) checks them, with Ganeti's own tools and NiceSort:
naturally sorted when no names are given, in the order asked (once per time
asked, as luxid answers) when they are.  The names are chosen so that the
natural order is not the plain one (``inst9`` before ``inst10``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.ganeti import ganeti_library, run_ganeti, run_ganeti_python
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import NO_CHECKS, ok
from tests.helpers.multinode import add_node
from tests.helpers.osdef import make_os

NODES = ("node10.example.com", "node9.example.com")  # and the master, node1.example.com
INSTANCES = ("inst10.example.com", "inst9.example.com", "inst1.example.com")
GROUPS = ("group10", "group9")
OSES = ("os10", "os9", "os1")
LISTS = ("gnt-instance", "gnt-node", "gnt-group")


@pytest.fixture(scope="module")
def qcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    root = tmp_path_factory.mktemp("order")
    with running_cluster(root / "master") as cl:
        added = []
        try:
            for name in NODES:
                added.append(add_node(cl, root / name, name))
            for paths in (cl.paths, *(noded.paths for noded in added)):
                for os_name in OSES:
                    make_os(paths, os_name, variants=None)
            for group in GROUPS:
                ok(cl.gnt("group", "add", group))
            for name in INSTANCES:
                ok(cl.gnt("instance", "add", *NO_CHECKS, "-t", "diskless", "-o", "os1",
                          "--no-start", "-n", cl.node_name, name))  # fmt: skip
            yield cl
        finally:
            for noded in added:
                noded.stop()


def nice_sorted(names: list[str]) -> list[str]:
    """``names`` as Ganeti's utils.NiceSort orders them."""
    code = (
        "import json, sys\nfrom ganeti import utils\n"
        "print(json.dumps(utils.NiceSort(json.load(sys.stdin))))"
    )
    result = ganeti_library(code, stdin=json.dumps(names))
    assert result.rc == 0, result.stderr
    return list(json.loads(result.stdout))


def listed(cl: TestCluster, command: str, field: str, *names: str) -> list[str]:
    """Ganeti's ``<command> list`` of one field, as its QA runs it."""
    argv = [command, "list", "--separator=|", "--no-headers", "--output", field, *names]
    result = run_ganeti(cl.paths.root, argv)
    assert result.rc == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("command", LISTS)
def test_without_names_nicely_sorted(qcluster: TestCluster, command: str) -> None:
    names = listed(qcluster, command, "name")
    assert names == nice_sorted(names)
    assert names != sorted(names)


@pytest.mark.parametrize("command", LISTS)
def test_with_names_in_the_order_asked(qcluster: TestCluster, command: str) -> None:
    names = listed(qcluster, command, "name")
    for asked in (names[::-1], [names[2], names[0], names[1]], [names[1], names[0], names[1]]):
        assert listed(qcluster, command, "name", *asked) == asked


def test_jobs_in_the_order_asked_once_each(qcluster: TestCluster) -> None:
    ids = listed(qcluster, "gnt-job", "id")
    assert ids == [str(i) for i in sorted(int(i) for i in ids)]
    asked = [ids[2], ids[0], ids[1], ids[0]]
    assert listed(qcluster, "gnt-job", "id", *asked) == asked[:3]


@pytest.mark.parametrize("command", [*LISTS, "gnt-job"])
def test_fields_nicely_sorted(qcluster: TestCluster, command: str) -> None:
    result = run_ganeti(qcluster.paths.root, [command, "list-fields", "--separator=|",
                                              "--no-headers"])  # fmt: skip
    assert result.rc == 0, result.stderr
    fields = [line.split("|", 1)[0] for line in result.stdout.splitlines()]
    assert fields == nice_sorted(fields)


def test_oses_nicely_sorted_and_named_once_each(qcluster: TestCluster) -> None:
    """gnt-os list (an OS diagnose) in NiceSort order; a query naming OSes
    answers in that order, each once (Ganeti's Python query, LUQuery)."""
    result = run_ganeti(qcluster.paths.root, ["gnt-os", "list", "--no-headers"])
    assert result.rc == 0, result.stderr
    names = result.stdout.split()
    assert names == nice_sorted(list(OSES)) != sorted(OSES)
    code = (
        "import json\n"
        "qfilter = ['|', ['=', 'name', 'os9'], ['=', 'name', 'os10'], ['=', 'name', 'os9']]\n"
        "print(json.dumps(luxi.Client().Query('os', ['name'], qfilter).data))"
    )
    queried = run_ganeti_python(qcluster.paths.root, code)
    assert queried.rc == 0, queried.stderr
    assert json.loads(queried.stdout) == [[[0, "os9"]], [[0, "os10"]]]


def test_classic_queries_nicely_sorted(qcluster: TestCluster) -> None:
    """luxid's classic queries (QueryInstances: by name or uuid) answer in
    natural order whatever the order asked, and nothing for a name unknown."""
    asked = ["inst9.example.com", "no-such-instance", "inst10.example.com", "inst1.example.com"]
    query = f"luxi.Client().QueryInstances({asked!r}, ['name'], False)"
    code = f"import json\nprint(json.dumps({query}))"
    result = run_ganeti_python(qcluster.paths.root, code)
    assert result.rc == 0, result.stderr
    assert json.loads(result.stdout) == [[n] for n in nice_sorted(list(INSTANCES))]
