"""``gnt-os``: Ganeti 3.0.2's command and Corral's print the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.compare import assert_same, assert_same_on_twins, ganeti
from tests.conformance.test_rapi_client import ganeti_rapi, ok
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.osdef import make_os


@pytest.fixture(scope="module")
def ocluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with OS definitions of every kind: with and without variants,
    old API versions, a broken one, a hidden and a blacklisted one."""
    with running_cluster(tmp_path_factory.mktemp("os")) as cl:
        make_os(cl.paths, "debootstrap", variants=("default", "minimal"),
                parameters={"dhcp": "Use DHCP", "partition": "Partition style"})  # fmt: skip
        make_os(cl.paths, "plain", variants=None)
        make_os(cl.paths, "legacy", api_versions=(10, 15), variants=("a",))
        make_os(cl.paths, "ancient", api_versions=(5,))
        broken = make_os(cl.paths, "broken", variants=None)
        (broken / "create").chmod(0o644)
        for name in ("twinosa", "twinosb", "hideme", "blockme"):
            make_os(cl.paths, name, parameters={"size": "A size"})
        for argv in (
            ["modify", "--hidden=yes", "hideme"],
            ["modify", "--blacklisted=yes", "blockme"],
            ["modify", "-O", "dhcp=no", "debootstrap"],
            ["modify", "--os-parameters-private", "partition=gpt", "debootstrap+minimal"],
        ):
            assert cl.gnt("os", *argv).rc == 0
        yield cl


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--no-headers"],
        ["diagnose"],
        ["info"],
        ["info", "debootstrap"],
        ["info", "debootstrap", "plain"],
        ["info", "no-such-os"],
        ["show", "legacy"],
        ["info", "debootstrap+minimal"],
        ["modify"],
        ["modify", "debootstrap"],
        ["modify", "a", "b"],
        ["list", "extra"],
    ],
)
def test_read_only_commands(ocluster: TestCluster, argv: list[str]) -> None:
    assert_same(ocluster, ["gnt-os", *argv])


@pytest.mark.parametrize(
    "argv",
    [
        ["modify", "--hidden=yes", "{}"],
        ["modify", "--hidden=no", "{}"],
        ["modify", "--blacklisted=yes", "{}"],
        ["modify", "--blacklisted=no", "{}"],
        ["modify", "-O", "size=big", "{}"],
        ["modify", "-O", "-size", "{}"],
        ["modify", "--os-parameters-private", "size=secret", "{}"],
        ["modify", "-O", "nosuchparam=1", "{}"],
        ["modify", "--hidden=maybe", "{}"],
        ["modify", "-H", "fake:migration_mode=non-live", "{}"],
        ["modify", "--submit", "--hidden=yes", "{}"],
    ],
)
def test_modify_on_twins(ocluster: TestCluster, argv: list[str]) -> None:
    twins = ("twinosa", "twinosb")
    assert_same_on_twins(ocluster, ["gnt-os", *argv], twins)
    assert_same_on_twins(ocluster, ["gnt-os", "info", "{}"], twins)


def test_rapi_lists_the_oses_gnt_os_lists(ocluster: TestCluster) -> None:
    """``GET /2/os`` through Ganeti's RAPI client: as its OpOsDiagnose, which
    ``gnt-os list`` shows too, without the hidden, blacklisted and invalid OSes."""
    listed = ganeti(ocluster, ["gnt-os", "list", "--no-headers"])
    assert listed.rc == 0, listed.stderr
    names = ok(ganeti_rapi(ocluster, 'call("os", N.GetOperatingSystems)'), "os")
    assert names == listed.stdout.split()
    assert "debootstrap+minimal" in names and "plain" in names
    assert not {"hideme+default", "blockme+default", "broken", "ancient"} & set(names)
