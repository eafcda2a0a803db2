"""``gnt-network``: Ganeti 3.0.2's command and Corral's print the same, against
a Corral cluster; changes run on twin networks (made alike, one by each tool)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.compare import assert_same, assert_same_on_twins
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.osdef import make_os

TWINS = ("twina", "twinb")
INSTANCE_NICS = "name,nic.ips,nic.networks.names,nic.network.name/0,nic.modes,nic.links"
STATE = "name,network,gateway,network6,gateway6,mac_prefix,free_count,reserved_count,map," \
        "external_reservations,group_list,inst_list,tags,serial_no"  # fmt: skip


@pytest.fixture(scope="module")
def ncl(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("networks")) as cl:
        make_os(cl.paths, "debootstrap")
        for argv in (
            ["add", "--network=10.10.0.0/24", "--gateway=10.10.0.1", "--network6=2001:db8::/64",
             "--gateway6=2001:db8::1", "--mac-prefix=aa:00:01", "--tags=blue,red",
             "--add-reserved-ips=10.10.0.2,10.10.0.200", "lan"],
            ["add", "--network=10.20.0.0/28", "small"],
            ["add", "--network=10.0.0.0/16", "wide"],
            ["add", "--network=10.30.0.0/26", "--gateway=10.30.0.1", *TWINS[:1]],
            ["add", "--network=10.30.0.0/26", "--gateway=10.30.0.1", *TWINS[1:]],
        ):  # fmt: skip
            result = cl.gnt("network", *argv)
            assert result.rc == 0, (argv, result.stderr)
        yield cl


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--no-headers", "--separator=|", "-o", f"+{STATE}"],
        ["list", "-o", "name,nosuchfield"],
        ["list", "-o", "name,group_cnt,inst_cnt,uuid", "small", "lan"],
        ["list", "lan", "no-such-network"],
        ["list-fields"],
        ["list-fields", "name", "map", "bogus"],
        ["info"],
        ["info", "small"],
        ["info", "no-such-network"],
        ["list-tags", "lan"],
        ["add", "--network=10.40.0.0/24", "lan"],
        ["add", "--network=10.40.0.0/8", "big"],
        ["add", "--network=10.40.0.0/24", "--gateway=10.41.0.1", "outside"],
        ["add", "--network=10.40.0.1/24", "hostbits"],
        ["add", "--network=10.40.0.0/24", "--mac-prefix=aa:bb", "badprefix"],
        ["add", "nonetwork"],
        ["add"],
        ["remove", "no-such-network"],
        ["modify", "lan"],
        ["modify", "--gateway=10.10.0.9", "--add-reserved-ips=10.10.0.3", "lan"],
        ["modify", "--gateway=10.10.0.200", "lan"],
        ["modify", "--mac-prefix=nonsense", "lan"],
        ["modify", "--mac-prefix=aa:00:02", "no-such-network"],
        ["connect", "lan", "no-such-group"],
        ["connect", "no-such-network"],
        ["connect"],
        ["disconnect", "no-such-network", "default"],
    ],
)
def test_read_only_commands(ncl: TestCluster, argv: list[str]) -> None:
    assert_same(ncl, ["gnt-network", *argv])


@pytest.mark.parametrize(
    "argv",
    [
        ["modify", "--add-reserved-ips=10.30.0.5,10.30.0.6,10.30.0.63,10.99.0.1", "{}"],
        ["modify", "--remove-reserved-ips=10.30.0.6,10.30.0.1,10.30.0.7", "{}"],
        ["modify", "--gateway=10.30.0.62", "{}"],
        ["modify", "--gateway=10.30.0.62", "{}"],
        ["modify", "--mac-prefix=AA:00:0F", "--network6=2001:db8:1::/64", "{}"],
        ["modify", "--gateway6=2001:db8:1::1", "{}"],
        ["modify", "--mac-prefix=none", "{}"],
        ["connect", "-N", "mode=routed,link=rt0,vlan=7", "{}", "default"],
        ["connect", "{}", "default"],
        ["remove", "{}"],
        ["disconnect", "{}"],
        ["disconnect", "{}", "default"],
        ["connect", "--no-conflicts-check", "{}"],
        ["add-tags", "{}", "a", "b"],
        ["remove-tags", "{}", "a"],
        ["remove-tags", "{}", "nosuchtag"],
    ],
)
def test_changes_on_twins(ncl: TestCluster, argv: list[str]) -> None:
    assert_same_on_twins(ncl, ["gnt-network", *argv], TWINS)
    assert_same_on_twins(ncl, ["gnt-network", "list", "-o", STATE, "{}"], TWINS)
    assert_same_on_twins(ncl, ["gnt-network", "info", "{}"], TWINS)


def test_instances_on_twins(ncl: TestCluster) -> None:
    """Instances with NICs on the twin networks (connected to the default group
    by test_changes_on_twins); the exit code each step must have."""
    inst = "{}.example.com"
    add = ["gnt-instance", "add", "-t", "diskless", "-o", "debootstrap+default", "--no-start",
           "--no-name-check", "--no-ip-check", "-n", ncl.node_name]  # fmt: skip
    for rc, argv in (
        (0, [*add, "--net", "0:network={},ip=pool", "--net", "1:network={}",
             "--net", "2:link=br5", inst]),
        (0, ["gnt-network", "info", "{}"]),
        (0, ["gnt-network", "list", "-o", STATE, "{}"]),
        (0, ["gnt-instance", "info", inst]),
        (0, ["gnt-instance", "list", "--separator=|", "-o", INSTANCE_NICS, inst]),
        (1, [*add, "--net", "0:network={},ip=10.30.0.1", "{}.x.example.com"]),
        (0, ["gnt-instance", "modify", "--net", "add:network={},ip=pool", inst]),
        (0, ["gnt-instance", "modify", "--net", "3:ip=10.30.0.40", inst]),
        (0, ["gnt-instance", "modify", "--net", "1:network=none", inst]),
        (1, ["gnt-instance", "modify", "--net", "3:link=br7", inst]),
        (0, ["gnt-instance", "list", "--separator=|", "-o", INSTANCE_NICS, inst]),
        (1, ["gnt-network", "disconnect", "{}"]),
        (0, ["gnt-network", "info", "{}"]),
        (0, ["gnt-instance", "remove", "-f", inst]),
        (0, ["gnt-network", "list", "-o", STATE, "{}"]),
    ):  # fmt: skip
        assert assert_same_on_twins(ncl, argv, TWINS).rc == rc, argv


def test_remove_twins(ncl: TestCluster) -> None:
    """Runs last: each tool disconnects and removes its twin."""
    assert_same_on_twins(ncl, ["gnt-network", "disconnect", "{}"], TWINS)
    assert_same_on_twins(ncl, ["gnt-network", "remove", "{}"], TWINS)
    assert_same(ncl, ["gnt-network", "list", "-o", "name"])
