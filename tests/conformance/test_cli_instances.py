"""``gnt-instance``: Ganeti 3.0.2's command and Corral's print the same.

Commands that change an instance run on twins: two instances made alike,
with names of the same length, one changed by Ganeti's tool, the other by
Corral's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.compare import (
    Output,
    assert_same,
    assert_same_on_twins,
    corral,
    corral_on_terminal,
    difference,
    ganeti,
    ganeti_on_terminal,
    normalized,
)
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import dump_script, read_env
from tests.helpers.osdef import make_os

WEB = "web1.example.com"
DB = "db1.example.com"
OS_PARAMS = {"dhcp": "Use DHCP", "token": "A private token"}


def add(cl: TestCluster, name: str, *extra: str) -> None:
    result = cl.gnt(
        "instance", "add", "-t", "file", "--disk", "0:size=16m", "-o", "debootstrap+default",
        "--no-name-check", "--no-ip-check", *extra, name,
    )  # fmt: skip
    assert result.rc == 0, result.stderr


@pytest.fixture(scope="module")
def renames(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the OS rename script writes its environment (``rename-<instance>``)."""
    return tmp_path_factory.mktemp("renames")


@pytest.fixture(scope="module")
def icluster(
    ganeti: Path, tmp_path_factory: pytest.TempPathFactory, renames: Path
) -> Iterator[TestCluster]:
    """A cluster with an OS definition and two instances to look at."""
    with running_cluster(tmp_path_factory.mktemp("instances")) as cl:
        make_os(cl.paths, "debootstrap", variants=("default", "minimal"), parameters=OS_PARAMS,
                scripts={"rename": dump_script(renames, "rename")})  # fmt: skip
        add(cl, WEB, "-O", "dhcp=yes", "--os-parameters-private", "token=s3cret",
            "--net", "0:ip=198.18.0.10", "--tags", "web,prod")  # fmt: skip
        add(cl, DB, "--no-start", "-B", "vcpus=2,maxmem=256m,minmem=128m")
        yield cl


@pytest.fixture
def twins(icluster: TestCluster) -> Iterator[tuple[str, str]]:
    """Two running instances alike but for their names (removed afterwards)."""
    pair = ("twina.example.com", "twinb.example.com")
    for name in pair:
        add(icluster, name)
    yield pair
    for name in pair:
        icluster.gnt("instance", "remove", "-f", name)


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--no-headers"],
        ["list", "--separator=:"],
        ["list", "-o", "name,status,admin_state,oper_state,disk_template,be/vcpus,tags"],
        ["list", "-o", "+nic.ips,nic.macs,disk.sizes,network_port,snodes"],
        ["list", "-o", "name,be/maxmem,disk_usage", "--units", "g"],
        ["list", "--units", "m"],
        ["list", WEB],
        ["list", "web*"],
        ["list", "*.example.com", DB],
        ["list", 'admin_state == "up"'],
        ["list", "-F", "be/vcpus > 1"],
        ["list", "no-such-instance"],
        ["list", "-o", "name,bogus"],
        ["list", "-v"],
        ["list-fields"],
        ["list-fields", "name", "status", "bogus"],
        ["info", WEB],
        ["info", DB, WEB],
        ["info", "-s", WEB],
        ["info", "--static", DB],
        ["info", "no-such-instance"],
        ["list-tags", WEB],
        ["list-tags", "no-such-instance"],
        ["list-tags"],
        ["startup"],
        ["startup", "no-such-instance"],
        ["shutdown", "no-such-instance"],
        ["reboot", "no-such-instance"],
        ["remove"],
        ["remove", "-f", "no-such-instance"],
        ["rename", WEB],
        ["modify", WEB],
        ["modify", "no-such-instance", "-B", "vcpus=2"],
        ["grow-disk", WEB, "0"],
        ["reinstall", "-f", "no-such-instance"],
        ["activate-disks", WEB],
        ["activate-disks", "--ignore-size", "--wait-for-sync", DB],
        ["activate-disks"],
        ["deactivate-disks", WEB],
        ["recreate-disks", WEB],
        ["recreate-disks", DB],
        ["recreate-disks", "-n", "node1.example.com", "-I", "hail", DB],
        ["recreate-disks", "--disk", "0:size=1x", DB],
        ["recreate-disks", "--disk", "0:spindles=2", DB],
        ["recreate-disks", "--disk", "0:size=32m", "--disk", "0:mode=ro", DB],
    ],
)
def test_read_only_commands(icluster: TestCluster, argv: list[str]) -> None:
    assert_same(icluster, ["gnt-instance", *argv])


@pytest.mark.parametrize(
    "argv",
    [
        ["shutdown", "{}"],
        ["startup", "{}"],
        ["reboot", "{}"],
        ["reboot", "--type=soft", "{}"],
        ["shutdown", "--timeout=5", "{}"],
        ["modify", "-B", "vcpus=2,maxmem=256m", "{}"],
        ["modify", "-O", "dhcp=no", "{}"],
        ["modify", "--net", "add", "{}"],
        ["modify", "--disk", "add:size=8m", "{}"],
        ["modify", "--os-type", "debootstrap+minimal", "{}"],
        ["grow-disk", "{}", "0", "8m"],
        ["grow-disk", "--absolute", "{}", "0", "32m"],
        ["add-tags", "{}", "a", "b"],
        ["remove-tags", "{}", "x"],
        ["startup", "--submit", "{}"],
        ["modify", "-B", "bogus=1", "{}"],
        ["modify", "--disk", "0:size=1g", "{}"],
    ],
)
def test_changes_on_twins(icluster: TestCluster, twins: tuple[str, str], argv: list[str]) -> None:
    assert_same_on_twins(icluster, ["gnt-instance", *argv], twins)
    assert_same_on_twins(icluster, ["gnt-instance", "info", "{}"], twins)


def test_detach_and_attach_on_twins(icluster: TestCluster, twins: tuple[str, str]) -> None:
    """A disk detached, refused attaches, then attached back by name at an index."""
    for argv in (
        ["modify", "--disk", "0:detach", "{}"],  # running: refused
        ["shutdown", "{}"],
        ["modify", "--disk", "add:size=8m,name=d-{}", "{}"],
        ["modify", "--disk", "d-{}:detach", "{}"],
        ["modify", "--disk", "0:detach,mode=ro", "{}"],
        ["modify", "--disk", "attach:name=no-such-disk", "{}"],
        ["modify", "--disk", "attach:name=d-{},size=8m", "{}"],
        ["modify", "--disk", "0:attach,name=d-{}", "{}"],
        # Not info: the disks' names differ by more than the twins' names.
        ["list", "--no-headers", "-o", "disk.count,disk.sizes,disk_usage", "{}"],
    ):
        assert_same_on_twins(icluster, ["gnt-instance", *argv], twins)


def test_reinstall_on_twins(icluster: TestCluster, twins: tuple[str, str]) -> None:
    for argv in (
        ["shutdown", "{}"],
        ["reinstall", "-f", "{}"],
        ["reinstall", "-f", "-o", "debootstrap+minimal", "-O", "dhcp=yes", "{}"],
    ):
        assert_same_on_twins(icluster, ["gnt-instance", *argv], twins)


def test_rename_to_the_own_name_on_twins(
    icluster: TestCluster, twins: tuple[str, str], renames: Path
) -> None:
    """Accepted, as Ganeti's burnin expects: the OS rename script runs with the
    same old and new name."""
    assert_same_on_twins(icluster, ["gnt-instance", "shutdown", "{}"], twins)
    argv = ["gnt-instance", "rename", "-f", "--no-name-check", "--no-ip-check", "{}", "{}"]
    assert assert_same_on_twins(icluster, argv, twins).rc == 0
    for name in twins:
        env = read_env(renames / f"rename-{name}")
        assert (env["INSTANCE_NAME"], env["OLD_INSTANCE_NAME"]) == (name, name)
    assert_same_on_twins(icluster, ["gnt-instance", "info", "{}"], twins)


def test_remove_twins(icluster: TestCluster, twins: tuple[str, str]) -> None:
    assert_same_on_twins(icluster, ["gnt-instance", "remove", "-f", "{}"], twins)
    assert_same_on_twins(icluster, ["gnt-instance", "info", "{}"], twins)


def test_add_twins(icluster: TestCluster) -> None:
    argv = [
        "gnt-instance", "add", "-t", "file", "--disk", "0:size=16m", "--disk", "1:size=8m",
        "-o", "debootstrap+default", "-B", "vcpus=2", "--net", "0:mode=bridged",
        "--no-name-check", "--no-ip-check", "{}",
    ]  # fmt: skip
    pair = ("newtwina.example.com", "newtwinb.example.com")
    try:
        out = assert_same_on_twins(icluster, argv, pair)
        assert out.rc == 0
        assert_same_on_twins(icluster, ["gnt-instance", "info", "{}"], pair)
    finally:
        for name in pair:
            icluster.gnt("instance", "remove", "-f", name)


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "-t", "file", "--disk", "0:size=16m", "-o", "no-such-os", "--no-name-check",
         "--no-ip-check", "x.example.com"],
        ["add", "-t", "file", "-o", "debootstrap+default", "--no-name-check", "--no-ip-check",
         "x.example.com"],
        ["add", "-t", "file", "--disk", "0:size=16m", "-o", "debootstrap+default",
         "--no-name-check", "--no-ip-check", WEB],
        ["add", "--disk", "0:size=16m", "-o", "debootstrap", "--no-name-check",
         "--no-ip-check", "x.example.com"],
    ],
)  # fmt: skip
def test_refused_adds(icluster: TestCluster, argv: list[str]) -> None:
    assert_same(icluster, ["gnt-instance", *argv])


@pytest.mark.parametrize("answer", ["n", "y"])
def test_remove_asks_first(icluster: TestCluster, twins: tuple[str, str], answer: str) -> None:
    theirs = ganeti_on_terminal(icluster, ["gnt-instance", "remove", twins[0]], answer)
    ours = corral_on_terminal(icluster, ["gnt-instance", "remove", twins[1]], answer)
    assert ours[0] == theirs[0]
    assert normalized(ours[1], {twins[1]: "<TWIN>"}) == normalized(theirs[1], {twins[0]: "<TWIN>"})


@pytest.mark.parametrize("answer", ["n", "y"])
def test_rename_without_name_check_asks_first(
    icluster: TestCluster, twins: tuple[str, str], answer: str
) -> None:
    new = ("twinc.example.com", "twind.example.com")
    theirs = ganeti_on_terminal(
        icluster, ["gnt-instance", "rename", "--no-name-check", twins[0], new[0]], answer
    )
    ours = corral_on_terminal(
        icluster, ["gnt-instance", "rename", "--no-name-check", twins[1], new[1]], answer
    )
    assert ours[0] == theirs[0]
    names_g = {twins[0]: "<TWIN>", new[0]: "<NEW>"}
    names_c = {twins[1]: "<TWIN>", new[1]: "<NEW>"}
    assert normalized(ours[1], names_c) == normalized(theirs[1], names_g)
    if answer == "y":
        for name in new:
            icluster.gnt("instance", "remove", "-f", name)


def test_shutdown_all_asks_first(icluster: TestCluster) -> None:
    theirs = ganeti_on_terminal(icluster, ["gnt-instance", "shutdown", "--all"], "n")
    ours = corral_on_terminal(icluster, ["gnt-instance", "shutdown", "--all"], "n")
    assert (ours[0], normalized(ours[1])) == (theirs[0], normalized(theirs[1]))


def test_startup_of_two_instances(icluster: TestCluster) -> None:
    theirs = ganeti(icluster, ["gnt-instance", "startup", "--force-multiple", WEB, DB])
    ours = corral(icluster, ["gnt-instance", "startup", "--force-multiple", WEB, DB])
    assert theirs.rc == ours.rc


def test_devices_named_by_name(icluster: TestCluster) -> None:
    """QA's TestInstanceDeviceNames with Ganeti's gnt-instance: disks and NICs
    are named by name where an index is taken (modify, remove); names are
    unique and never purely numeric."""
    name = "names1.example.com"
    add(icluster, name, "--no-start", "--disk", "0:size=16m,name=orig")

    def modify(*options: str) -> tuple[int, str]:
        result = ganeti(icluster, ["gnt-instance", "modify", *options, name])
        return result.rc, result.stderr

    try:
        for dev, size in (("disk", ",size=16m"), ("net", "")):
            assert modify(f"--{dev}=-1:add,name=test_device{size}")[0] == 0
            assert modify(f"--{dev}=test_device:remove")[0] == 0
            rc, err = modify(*[f"--{dev}=-1:add,name=test_device{size}"] * 2)
            assert rc == 1 and "name 'test_device' already used" in err, err
            rc, err = modify(f"--{dev}=-1:add,name=2{size}")
            assert rc == 1 and "Invalid name '2'. Purely numeric" in err, err
        assert modify("--disk=0:modify,name=renamed")[0] == 0
        assert modify("--disk=renamed:modify,name=orig")[0] == 0
        rc, err = modify("--disk=nosuchdisk:remove")
        assert rc == 1 and "Cannot find disk with identifier nosuchdisk" in err, err
        fields = ["gnt-instance", "list", "--no-headers", "-o", "disk.names,nic.count", name]
        assert ganeti(icluster, fields).stdout.split() == ["['orig']", "1"]
    finally:
        icluster.gnt("instance", "remove", "-f", name)


_COMM_ADDRESS = re.compile(r"\b169\.254\.\d+\.\d+\b")


def _same_on_twins_but_addresses(
    cl: TestCluster, argv: list[str], twins: tuple[str, str]
) -> Output:
    """As assert_same_on_twins, the communication NICs' pool addresses
    (one per twin) blanked."""
    outputs = []
    for name, run in zip(twins, (ganeti, corral), strict=True):
        out = Output.of(run(cl, [a.replace("{}", name) for a in argv]), {name: "<TWIN>"})
        outputs.append(
            Output(
                out.rc, _COMM_ADDRESS.sub("<ip>", out.stdout), _COMM_ADDRESS.sub("<ip>", out.stderr)
            )
        )
    theirs, ours = outputs
    assert ours == theirs, f"{argv}\n{difference(theirs, ours)}"
    return theirs


def test_communication_nic_on_twins(icluster: TestCluster, twins: tuple[str, str]) -> None:
    """``modify -c yes/no`` adds and removes the NIC as Ganeti's does (``-c``
    of ``add`` is the same option on the same opcode field)."""
    ok = icluster.gnt("cluster", "modify", "--instance-communication-network=commnet")
    assert ok.rc == 0, ok.stderr
    try:
        for argv in (
            ["modify", "-c", "yes", "{}"],
            [
                "list",
                "--no-headers",
                "-o",
                "nic.names,nic.networks.names,nic.modes,nic.links,nic.ips",
                "{}",
            ],
            ["info", "{}"],
            ["modify", "-c", "yes", "{}"],
            ["modify", "-c", "maybe", "{}"],
            ["modify", "-c", "no", "{}"],
            ["info", "{}"],
        ):
            _same_on_twins_but_addresses(icluster, ["gnt-instance", *argv], twins)
        added = ("commtwina.example.com", "commtwinb.example.com")
        add_argv = ["add", "-t", "diskless", "-o", "debootstrap+default", "--no-name-check",
                    "--no-ip-check", "--no-start", "-c", "yes", "{}"]  # fmt: skip
        try:
            out = _same_on_twins_but_addresses(icluster, ["gnt-instance", *add_argv], added)
            assert out.rc == 0, out.stderr
            _same_on_twins_but_addresses(icluster, ["gnt-instance", "info", "{}"], added)
        finally:
            for name in added:
                icluster.gnt("instance", "remove", "-f", name)
    finally:
        icluster.gnt("cluster", "modify", "--instance-communication-network=")
        icluster.gnt("network", "disconnect", "commnet")
        icluster.gnt("network", "remove", "commnet")
