"""Bad input for instances and OSes, against real daemons: each is refused with
exit code 1 and a clear error naming what is wrong, and changes nothing (no
instance, no disk file, no running instance, no config change)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import (
    add,
    config_serial,
    failed,
    fake_state_dir,
    files_under,
    ok,
    rows,
)
from tests.helpers.osdef import make_os

# Instances with disks, so that the OS create script would run.
DISK = ("-t", "file", "-s", "8m")
FIELDS = ["name", "os", "status", "disk.sizes", "nic.macs", "nic.ips", "be/maxmem", "tags"]


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with a good OS ("good", variants default and other; parameters
    "size" and "colour", where verify refuses size=huge), a variantless OS
    ("plain"), and two instances: "running" (started) and "stopped"."""
    with running_cluster(tmp_path_factory.mktemp("instance-bad-input")) as cluster:
        verify = (
            '#!/bin/sh\nif [ "$OSP_SIZE" = huge ]; then\n'
            '  echo "line one of the complaint"\n  echo "size huge is not acceptable" >&2\n'
            "  exit 1\nfi\n"
        )
        make_os(
            cluster.paths,
            "good",
            variants=("default", "other"),
            parameters={"size": "how big", "colour": "which colour"},
            scripts={"verify": verify},
        )
        make_os(cluster.paths, "plain", variants=None)
        ok(add(cluster, "running", *DISK, "-o", "good+default", "--net", "0:ip=198.18.2.1"))
        ok(add(cluster, "stopped", *DISK, "-o", "plain", "--no-start"))
        yield cluster


def snapshot(cl: TestCluster) -> dict[str, Any]:
    """Everything a refused command must leave as it was."""
    return {
        "instances": rows(cl, FIELDS),
        "serial": config_serial(cl),
        "files": files_under(cl.paths.file_storage_dir),
        "running": sorted(p.name for p in fake_state_dir(cl).iterdir()),
    }


@pytest.fixture
def unchanged(cl: TestCluster) -> Iterator[None]:
    before = snapshot(cl)
    yield
    assert snapshot(cl) == before


@pytest.fixture
def broken_os(cl: TestCluster) -> Iterator[Callable[[Callable[[Path], None]], None]]:
    """Make the OS "broken" and break it; removed afterwards."""
    made: list[Path] = []

    def make(breakage: Callable[[Path], None]) -> None:
        path = make_os(cl.paths, "broken", variants=None, parameters={"p": "a parameter"})
        made.append(path)
        breakage(path)

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def refused(result: Result, *texts: str) -> str:
    return failed(result, *texts, rc=1)


# The OS
def test_unknown_os(cl: TestCluster, unchanged: None) -> None:
    refused(add(cl, "new1", *DISK, "-o", "nosuchos"), "nosuchos", "wrong_input")


def test_variant_not_in_variants_list(cl: TestCluster, unchanged: None) -> None:
    err = refused(add(cl, "new1", *DISK, "-o", "good+purple"), "purple", "variant")
    assert "default" in err  # names what is supported


def test_no_variant_for_an_os_with_variants(cl: TestCluster, unchanged: None) -> None:
    refused(add(cl, "new1", *DISK, "-o", "good"), "good", "variant")


def test_variant_for_an_os_without_variants(cl: TestCluster, unchanged: None) -> None:
    refused(add(cl, "new1", *DISK, "-o", "plain+x"), "plain", "variant")


BROKEN = [
    pytest.param(lambda p: (p / "rename").unlink(), ["rename", "missing"], id="missing-script"),
    pytest.param(
        lambda p: (p / "create").chmod(0o644), ["create", "not executable"], id="non-exec"
    ),
    pytest.param(
        lambda p: (p / "ganeti_api_version").write_text("2x\n"),
        ["ganeti_api_version", "2x"],
        id="bad-api-version",
    ),
    pytest.param(
        lambda p: (p / "ganeti_api_version").write_text("5\n"), ["API version", "5"], id="api-5"
    ),
    pytest.param(
        lambda p: (p / "ganeti_api_version").unlink(),
        ["ganeti_api_version", "missing"],
        id="missing-api-version",
    ),
    pytest.param(
        lambda p: (p / "parameters.list").write_text("p a parameter\n\nq another\n"),
        ["parameters.list", "empty"],
        id="empty-parameters-line",
    ),
]


@pytest.mark.parametrize(("breakage", "texts"), BROKEN)
def test_broken_os(
    cl: TestCluster,
    unchanged: None,
    broken_os: Callable[[Callable[[Path], None]], None],
    breakage: Callable[[Path], None],
    texts: list[str],
) -> None:
    broken_os(breakage)
    refused(add(cl, "new1", *DISK, "-o", "broken"), "'broken'", "not valid", *texts)
    refused(cl.gnt("instance", "reinstall", "-f", "-o", "broken", "stopped"), "'broken'", *texts)


def test_undeclared_parameter(cl: TestCluster, unchanged: None) -> None:
    err = refused(add(cl, "new1", *DISK, "-o", "good+default", "-O", "flavour=sweet"), "flavour")
    assert "colour" in err and "size" in err  # the declared ones
    refused(
        add(cl, "new1", *DISK, "-o", "good+default", "--os-parameters-private", "flavour=x"),
        "flavour",
    )
    refused(cl.gnt("instance", "modify", "-O", "flavour=sweet", "running"), "flavour")
    refused(cl.gnt("os", "modify", "-O", "flavour=sweet", "good"), "flavour")


def test_verify_refuses_a_value(cl: TestCluster, unchanged: None) -> None:
    err = refused(add(cl, "new1", *DISK, "-o", "good+default", "-O", "size=huge"), "verify")
    assert "size huge is not acceptable" in err  # the script's own output
    refused(
        cl.gnt("instance", "reinstall", "-f", "-o", "good+other", "-O", "size=huge", "stopped"),
        "size huge is not acceptable",
    )
    refused(cl.gnt("os", "modify", "-O", "size=huge", "good+other"), "size huge is not acceptable")


def test_modify_of_an_os_no_node_has(cl: TestCluster) -> None:
    """As Ganeti: accepted (parameters may come before the OS), the parameters'
    check said to be skipped; the hidden and blacklisted lists take any name."""
    out = ok(cl.gnt("os", "modify", "-O", "mirror=local", "nosuchos"))
    assert f"OS nosuchos not found on node {cl.node_name}, validation skipped" in out
    try:
        ok(cl.gnt("os", "modify", "--blacklisted=yes", "nosuchos"))
        info = ok(cl.gnt("cluster", "info"))
        assert "Blacklisted OSes: nosuchos" in info and "mirror: local" in info
    finally:
        ok(cl.gnt("os", "modify", "--blacklisted=no", "nosuchos"))


def test_blacklisted_os_for_a_new_instance(cl: TestCluster) -> None:
    ok(cl.gnt("os", "modify", "--blacklisted=yes", "plain"))
    try:
        before = snapshot(cl)
        refused(add(cl, "new1", *DISK, "-o", "plain"), "'plain'", "blacklisted", "wrong_state")
        assert snapshot(cl) == before
    finally:
        ok(cl.gnt("os", "modify", "--blacklisted=no", "plain"))


# The instance's name, disks, NICs and resources
def test_duplicate_instance_name(cl: TestCluster, unchanged: None) -> None:
    refused(add(cl, "stopped", *DISK, "-o", "plain"), "'stopped'", "already", "already_exists")


@pytest.mark.parametrize(
    ("size", "why"),
    [("abc", "Invalid format"), ("-5g", "Invalid format"), ("1.5x", "Unknown unit: x")],
)
def test_bad_disk_size(cl: TestCluster, unchanged: None, size: str, why: str) -> None:
    # Ganeti's messages: the command refuses the size before submitting anything.
    refused(
        add(cl, "new1", "-t", "file", "--disk", f"0:size={size}", "-o", "plain"),
        f"Invalid disk size for disk 0: {why}",
    )
    refused(
        add(cl, "new1", "-t", "file", "-s", size, "-o", "plain"),
        f"Invalid value '{size}': {why}",
    )


@pytest.mark.parametrize(
    ("option", "text"),
    [(("--disk", "0:size=0"), "size must be positive"), (("-s", "0"), "No disk information")],
)
def test_empty_disk(cl: TestCluster, unchanged: None, option: tuple[str, str], text: str) -> None:
    refused(add(cl, "new1", "-t", "file", *option, "-o", "plain"), text)


@pytest.mark.parametrize(
    "mac", ["zz:00:00:00:00:01", "aa:00:00", "aa:00:00:00:00:00:00", "aa-00-00-00-00-01"]
)
def test_bad_mac(cl: TestCluster, unchanged: None, mac: str) -> None:
    refused(add(cl, "new1", *DISK, "-o", "plain", "--net", f"0:mac={mac}"), "MAC", mac)


def test_bad_ip(cl: TestCluster, unchanged: None) -> None:
    refused(add(cl, "new1", *DISK, "-o", "plain", "--net", "0:ip=300.1.2.3"), "300.1.2.3")


def test_taken_ip(cl: TestCluster, unchanged: None) -> None:
    refused(
        add(cl, "new1", *DISK, "-o", "plain", "--net", "0:ip=198.18.2.1"),
        "198.18.2.1",
        "resource_not_unique",
    )


def test_bad_backend_and_hypervisor_parameters(cl: TestCluster, unchanged: None) -> None:
    refused(add(cl, "new1", *DISK, "-o", "plain", "-B", "colour=red"), "colour")
    refused(add(cl, "new1", *DISK, "-o", "plain", "-B", "vcpus=many"), "vcpus", "many")
    refused(add(cl, "new1", *DISK, "-o", "plain", "-H", "fake:speed=9"), "speed")
    refused(
        add(cl, "new1", *DISK, "-o", "plain", "-H", "fake:migration_mode=teleport"),
        "migration_mode",
        "teleport",
    )
    refused(add(cl, "new1", *DISK, "-o", "plain", "-H", "xen-pvm"), "xen-pvm")


def test_not_enough_memory(cl: TestCluster, unchanged: None) -> None:
    refused(
        add(cl, "new1", "-t", "diskless", "-o", "plain", "-B", "memory=100000000"),
        "memory",
        "insufficient_resources",
    )
    refused(
        cl.gnt("instance", "startup", "-B", "memory=100000000", "stopped"),
        "memory",
        "insufficient_resources",
    )


def test_not_enough_disk(cl: TestCluster, unchanged: None) -> None:
    refused(
        add(cl, "new1", "-t", "file", "--disk", "0:size=100t", "-o", "plain", "--no-start"),
        "disk space",
        "insufficient_resources",
    )
    refused(
        cl.gnt("instance", "modify", "--disk", "add:size=100t", "stopped"),
        "disk space",
        "insufficient_resources",
    )
    refused(cl.gnt("instance", "grow-disk", "stopped", "0", "100t"), "disk space")


# Existing instances
COMMANDS = [
    pytest.param(("remove", "-f"), id="remove"),
    pytest.param(("startup",), id="startup"),
    pytest.param(("shutdown",), id="shutdown"),
    pytest.param(("reboot",), id="reboot"),
    pytest.param(("info",), id="info"),
    pytest.param(("modify", "-B", "vcpus=2"), id="modify"),
    pytest.param(("reinstall", "-f"), id="reinstall"),
    pytest.param(("rename", "-f", "--no-name-check", "--no-ip-check", "_", "newname"), id="rename"),
    pytest.param(("grow-disk", "_", "0", "1g"), id="grow-disk"),
    pytest.param(("list-tags",), id="list-tags"),
    pytest.param(("add-tags", "_", "tag1"), id="add-tags"),
    pytest.param(("remove-tags", "_", "tag1"), id="remove-tags"),
]


# The commands that act on several instances look the names up first, and
# luxid answers nothing for an unknown name (ganeti/ganeti#922): Ganeti's words.
BY_SELECTION = {"startup", "shutdown", "reboot", "reinstall"}


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_instance(cl: TestCluster, unchanged: None, command: tuple[str, ...]) -> None:
    args = [a if a != "_" else "nosuch" for a in command]
    if "nosuch" not in args:
        args.append("nosuch")
    if command[0] in BY_SELECTION:
        refused(
            cl.gnt("instance", *args),
            "wrong_input",
            "Selection filter does not match any instances",
        )
    else:
        refused(cl.gnt("instance", *args), "nosuch", "unknown_entity")


def test_rename_to_an_existing_name(cl: TestCluster, unchanged: None) -> None:
    refused(
        cl.gnt(
            "instance", "rename", "-f", "--no-name-check", "--no-ip-check", "stopped", "running"
        ),
        "'running'",
        "already",
    )


def test_rename_of_a_running_instance_to_its_own_name(cl: TestCluster, unchanged: None) -> None:
    # A stopped one's is accepted, as Ganeti's (tests/conformance/test_cli_instances.py).
    refused(
        cl.gnt(
            "instance", "rename", "-f", "--no-name-check", "--no-ip-check", "running", "running"
        ),
        "'running' is running",
        "wrong_state",
    )


def test_modify_without_changes(cl: TestCluster, unchanged: None) -> None:
    result = cl.gnt("instance", "modify", "stopped")
    assert result.rc == 1
    assert "parameters" in result.stderr or "No changes" in result.stderr


def test_reinstall_of_a_running_instance(cl: TestCluster, unchanged: None) -> None:
    refused(cl.gnt("instance", "reinstall", "-f", "running"), "running", "wrong_state")


def test_bad_disk_and_nic_modifications(cl: TestCluster, unchanged: None) -> None:
    refused(cl.gnt("instance", "modify", "--disk", "5:remove", "stopped"), "5")
    refused(cl.gnt("instance", "modify", "--net", "3:remove", "stopped"), "3")
    refused(cl.gnt("instance", "modify", "--disk", "add:size=abc", "stopped"), "Invalid format")
    refused(cl.gnt("instance", "grow-disk", "stopped", "7", "1g"), "7")
    refused(cl.gnt("instance", "modify", "--net", "0:modify,mac=nothex", "stopped"), "nothex")
    refused(cl.gnt("instance", "modify", "--net", "0:modify,ip=auto", "stopped"), "'auto'")
    refused(cl.gnt("instance", "modify", "--net", "add:ip=10.1.2", "stopped"), "10.1.2")
