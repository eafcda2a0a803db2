"""``gnt-cluster verify`` reports what no instance owns on a node, as Ganeti
reports unknown volumes (ENODEORPHANLV, a warning) and unknown running
instances (ENODEORPHANINSTANCE, an error)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import add, disk_files, fake_state_dir, ok

NODE = "node1.example.com"
STAMP = re.compile(r"^\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4} ")


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("orphans")) as cluster:
        ok(add(cluster, "owned.example.com", "-t", "file", "--disk", "0:size=4m", "--no-install"))
        yield cluster


def verify_lines(cl: TestCluster) -> tuple[int, list[str]]:
    result = cl.gnt("cluster", "verify", "--error-codes")
    assert "Traceback" not in result.stderr, result.stderr
    # Each feedback line starts with its time (ctime layout): dropped.
    return result.rc, [STAMP.sub("", line).strip() for line in result.stdout.splitlines()]


def findings(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith(("- ERROR", "- WARNING"))]


def test_a_cluster_with_only_owned_disks_verifies_clean(cl: TestCluster) -> None:
    assert disk_files(cl, "owned.example.com")
    rc, lines = verify_lines(cl)
    assert rc == 0 and findings(lines) == [], lines
    assert "* Verifying orphan volumes" in lines


def test_a_hand_made_file_is_an_unknown_volume(cl: TestCluster) -> None:
    storage = cl.paths.file_storage_dir
    stray = [storage / "gone.example.com" / "0123.file.disk0", storage / "loose-file"]
    for path in stray:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    try:
        rc, lines = verify_lines(cl)
        wire = [cl.paths.to_wire(path) for path in stray]
        assert sorted(findings(lines)) == sorted(
            f"- WARNING:ENODEORPHANLV:node:{NODE}:volume {path} is unknown" for path in wire
        ), lines
        assert rc == 0  # a warning, as in Ganeti
        plain = cl.gnt("cluster", "verify")
        assert f"- WARNING: node {NODE}: volume {wire[0]} is unknown" in plain.stdout
    finally:
        for path in stray:
            path.unlink()
        (storage / "gone.example.com").rmdir()
    assert findings(verify_lines(cl)[1]) == []


def test_hypervisor_state_of_an_unknown_instance_is_an_error(cl: TestCluster) -> None:
    state = fake_state_dir(cl) / "ghost.example.com"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"memory": 128, "vcpus": 1, "state": "running", "started": 0}))
    try:
        rc, lines = verify_lines(cl)
        assert findings(lines) == [
            f"- ERROR:ENODEORPHANINSTANCE:node:{NODE}:node is running unknown instance"
            " ghost.example.com"
        ], lines
        assert rc == 1
    finally:
        state.unlink()
    assert verify_lines(cl)[0] == 0


def test_the_storage_listing_is_bounded_to_two_levels(cl: TestCluster) -> None:
    deep = cl.paths.file_storage_dir / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "file").write_bytes(b"x")
    try:
        # Disks sit at <storage dir>/<instance>/<file>: deeper files are not looked at.
        assert findings(verify_lines(cl)[1]) == []
    finally:
        (deep / "file").unlink()
        for path in (deep, deep.parent, deep.parent.parent):
            Path(path).rmdir()
