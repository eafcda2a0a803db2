"""ExtStorage providers: the node's checks (Ganeti's ExtStorageFromDisk) and
how the master combines the nodes' answers (Ganeti's ExtStorageQuery)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.node.storage.extstorage import InvalidProvider, check_provider, diagnose
from corral.objects import Node, NodeGroup
from corral.paths import Paths
from corral.rpc.wire import ExtStorageWire
from corral.services.extstorage import combine
from tests.helpers.extstorage import ALL_SCRIPTS, make_provider, node_provider


def reason(es_dir: Path) -> str:
    with pytest.raises(InvalidProvider) as caught:
        check_provider(es_dir, f"/shown/{es_dir.name}")
    return str(caught.value)


def test_a_valid_provider_gives_its_parameters(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "rbd", "pool The RADOS pool\nsize  Size in MiB\nflag\n")
    assert check_provider(es_dir, "/shown/rbd") == [
        ["pool", "The RADOS pool"],
        ["size", "Size in MiB"],
        ["flag", ""],
    ]


def test_optional_scripts_may_be_missing_but_not_unusable(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "es")  # no snapshot, open, close
    assert check_provider(es_dir, "/shown/es") == []
    (es_dir / "snapshot").write_text("#!/bin/sh\n")
    assert reason(es_dir) == "File 'snapshot' under path '/shown/es' is not executable"


@pytest.mark.parametrize("script", ["attach", "create", "detach", "grow", "remove", "setinfo",
                                    "verify"])  # fmt: skip
def test_a_missing_required_script(tmp_path: Path, script: str) -> None:
    es_dir = make_provider(tmp_path, "es", scripts=ALL_SCRIPTS)
    (es_dir / script).unlink()
    assert reason(es_dir) == f"File '{script}' under path '/shown/es' is missing (ENOENT)"


def test_a_script_that_is_not_executable(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "es")
    (es_dir / "grow").chmod(0o644)
    assert reason(es_dir) == "File 'grow' under path '/shown/es' is not executable"


def test_a_script_that_is_a_directory(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "es")
    (es_dir / "verify").unlink()
    (es_dir / "verify").mkdir()
    assert reason(es_dir) == "File 'verify' under path '/shown/es' is not a regular file"


def test_parameters_list_missing_or_not_a_file(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "es", parameters=None)
    assert reason(es_dir) == "File 'parameters.list' under path '/shown/es' is missing (ENOENT)"
    (es_dir / "parameters.list").mkdir()
    assert reason(es_dir) == "File 'parameters.list' under path '/shown/es' is not a regular file"


def test_parameters_list_with_an_empty_line(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "es", "pool The pool\n\nsize The size\n")
    assert reason(es_dir) == (
        "Line 2 of the EXT parameters file at /shown/es/parameters.list is empty"
    )


def test_parameters_list_needs_no_execute_bit(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "es", "pool The pool\n")
    (es_dir / "parameters.list").chmod(0o644)
    assert check_provider(es_dir, "/shown/es") == [["pool", "The pool"]]


def test_a_name_ganeti_refuses_or_a_plain_file(tmp_path: Path) -> None:
    es_dir = make_provider(tmp_path, "bad.name")
    assert reason(es_dir) == (
        "Directory for External Storage Provider bad.name not found in search path"
    )
    (tmp_path / "file").write_text("")
    assert reason(tmp_path / "file") == (
        "Directory for External Storage Provider file not found in search path"
    )


def test_diagnose_lists_every_directory_of_the_search_path(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    node_provider(paths, "zeta", "a A\n")
    node_provider(paths, "alpha", None)
    make_provider(paths.es_search_path[2], "zeta", "b B\n")
    (paths.es_search_path[0] / ".hidden").mkdir()
    (paths.es_search_path[0] / "notes.txt").write_text("")
    entries = diagnose(paths)
    assert [(e["name"], e["path"], e["valid"]) for e in entries] == [
        ("alpha", "/srv/ganeti/extstorage/alpha", False),
        ("notes.txt", "/srv/ganeti/extstorage/notes.txt", False),
        ("zeta", "/srv/ganeti/extstorage/zeta", True),
        ("zeta", "/usr/lib/ganeti/extstorage/zeta", True),
    ]
    assert entries[0]["diagnose"] == (
        "File 'parameters.list' under path '/srv/ganeti/extstorage/alpha' is missing (ENOENT)"
    )
    assert [e["parameters"] for e in entries[2:]] == [[["a", "A"]], [["b", "B"]]]


def test_diagnose_never_runs_a_script(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    es_dir = node_provider(paths, "es")
    for script in ALL_SCRIPTS:
        (es_dir / script).write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n")
        (es_dir / script).chmod(0o755)
    assert [e["valid"] for e in diagnose(paths)] == [True]
    assert not (tmp_path / "ran").exists()


def test_diagnose_of_a_node_without_providers(tmp_path: Path) -> None:
    assert diagnose(Paths(tmp_path)) == []


# What the master combines: nodes n1, n2 in group "default", n3 in "other".
DEFAULT, OTHER = NodeGroup(name="default"), NodeGroup(name="other")
NODES = [
    Node(name=name, primary_ip="127.0.0.1", secondary_ip="127.0.0.1", group=group.uuid)
    for name, group in (("n1", DEFAULT), ("n2", DEFAULT), ("n3", OTHER))
]


def entry(name: str, valid: bool = True, params: list[list[str]] | None = None) -> ExtStorageWire:
    return ExtStorageWire(
        name=name,
        path=f"/srv/ganeti/extstorage/{name}",
        valid=valid,
        diagnose="" if valid else "broken",
        parameters=params or [],
    )


def test_combine_per_node_and_per_group() -> None:
    rows = combine(
        {
            "n1": [entry("es", params=[["a", "A"], ["b", "B"]]), entry("only1")],
            "n2": [entry("es", params=[["b", "B"], ["a", "A"]]), entry("only1", False)],
            "n3": [entry("es", params=[["a", "other doc"], ["b", "B"]])],
        },
        NODES,
        [DEFAULT, OTHER],
    )
    assert [row.name for row in rows] == ["es", "only1"]
    es, only1 = rows
    assert es.nodegroup_status == {"default": True, "other": True}
    # Parameters every node declares alike, in the first node's order.
    assert es.parameters == [["b", "B"]]
    assert es.node_status["n1"] == [
        ["/srv/ganeti/extstorage/es", True, "", [["a", "A"], ["b", "B"]]]
    ]
    # Missing on n3, invalid on n2: both groups are invalid.
    assert only1.node_status["n3"] == []
    assert only1.node_status["n2"][0][1:3] == [False, "broken"]
    assert only1.nodegroup_status == {"default": False, "other": False}
    # The nodes where it is valid give the parameters.
    assert only1.parameters == []


def test_a_failed_node_makes_no_provider_invalid() -> None:
    rows = combine({"n1": [entry("es")], "n2": None, "n3": None}, NODES, [DEFAULT, OTHER])
    (es,) = rows
    assert es.node_status == {"n1": [["/srv/ganeti/extstorage/es", True, "", []]]}
    # "other" has no node that answered: nothing makes it invalid (as Ganeti).
    assert es.nodegroup_status == {"default": True, "other": True}


def test_the_first_directory_of_the_search_path_decides() -> None:
    rows = combine(
        {"n1": [entry("es", False), entry("es", True, [["a", "A"]])]}, NODES[:1], [DEFAULT]
    )
    assert rows[0].nodegroup_status == {"default": False}
    assert rows[0].parameters == []
    assert len(rows[0].node_status["n1"]) == 2


def test_providers_in_nice_order() -> None:
    answer = [entry(name) for name in ("es10", "es9", "Es2")]
    assert [row.name for row in combine({"n1": answer}, NODES[:1], [DEFAULT])] == [
        "Es2",
        "es9",
        "es10",
    ]
