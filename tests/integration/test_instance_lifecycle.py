"""The instance life cycle on the fake hypervisor, through gnt-instance and real
daemons: add, list, info, start/stop/reboot, reinstall, rename, modify, remove,
tags, MAC and IP handling, memory and disk accounting."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import (
    add,
    disk_dir,
    disk_files,
    env_os,
    failed,
    fake_state,
    fake_state_dir,
    ok,
    query,
    read_env,
    rows,
)
from tests.helpers.osdef import make_os

MIB = 1024 * 1024
DEFAULT_HEADERS = ["Instance", "Hypervisor", "OS", "Primary_node", "Status", "Memory"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the OS scripts write their environments (outside the cluster's root)."""
    return tmp_path_factory.mktemp("os-env")


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory, out: Path) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("instances")) as cluster:
        env_os(
            cluster.paths,
            "dummy",
            out,
            parameters={"foo": "a public one", "bar": "another", "token": "a private one"},
        )
        make_os(cluster.paths, "plain", variants=None)
        yield cluster


def test_add_without_install_or_start(cl: TestCluster, out: Path) -> None:
    ok(add(cl, "bare", "-t", "diskless", "--no-install", "--no-start", "-o", "dummy+default"))
    assert fake_state(cl, "bare") is None
    assert rows(cl, ["name", "status", "disk_template", "disk.count", "os"], "bare") == [
        ["bare", "ADMIN_down", "diskless", "0", "dummy+default"]
    ]
    assert not disk_dir(cl, "bare").exists()
    # --no-install: the disk is made, the create script is not run
    small_disk = ("-t", "file", "-s", "8m")
    ok(add(cl, "bare-file", *small_disk, "--no-install", "--no-start", "-o", "dummy+default"))
    assert len(disk_files(cl, "bare-file")) == 1
    assert not (out / "create-bare-file").exists()
    # an instance without an OS
    ok(add(cl, "no-os", "-t", "diskless", "--no-install"))
    assert rows(cl, ["os", "status"], "no-os") == [["", "running"]]
    for name in ("bare", "bare-file", "no-os"):
        ok(cl.gnt("instance", "remove", "-f", name))


def test_add_file_instance_with_parameters(cl: TestCluster, out: Path) -> None:
    ok(
        add(
            cl,
            "full",
            "-t",
            "file",
            "--disk",
            "0:size=64m",
            "--disk",
            "1:size=1g",
            "-B",
            "memory=256M,vcpus=2",
            "-H",
            "fake:migration_mode=non-live",
            "--net",
            "0:mac=aa:00:00:12:34:56,ip=198.18.2.10",
            "-n",
            cl.node_name,
            "--tags",
            "web,prod",
            "-o",
            "dummy+default",
            "-O",
            "foo=1",
        )
    )
    info = query(
        cl,
        [
            "status",
            "be/maxmem",
            "be/minmem",
            "be/vcpus",
            "custom_hvparams",
            "disk.sizes",
            "nic.macs",
            "nic.ips",
            "tags",
            "pnode",
            "oper_ram",
            "oper_vcpus",
            "custom_osparams",
        ],
        "full",
    )["full"]
    assert info["status"] == "running"
    assert (info["be/maxmem"], info["be/minmem"], info["be/vcpus"]) == (256, 256, 2)
    # migration_mode is cluster-wide in Ganeti: "hvparams" leaves it out, as luxid's does.
    assert info["custom_hvparams"] == {"migration_mode": "non-live"}
    assert info["disk.sizes"] == [64, 1024]
    assert info["nic.macs"] == ["aa:00:00:12:34:56"]
    assert info["nic.ips"] == ["198.18.2.10"]
    assert sorted(info["tags"]) == ["prod", "web"]
    assert info["pnode"] == cl.node_name
    assert (info["oper_ram"], info["oper_vcpus"]) == (256, 2)
    assert info["custom_osparams"] == {"foo": "1"}
    # as text: lists joined with ","
    ((sizes, macs, ips, tags),) = rows(cl, ["disk.sizes", "nic.macs", "nic.ips", "tags"], "full")
    assert (sizes, macs, ips) == ("64,1024", "aa:00:00:12:34:56", "198.18.2.10")
    assert sorted(tags.split(",")) == ["prod", "web"]
    # "-o +field" adds to the default fields
    header = ok(cl.gnt("instance", "list", "-o", "+disk.sizes", "full")).splitlines()[0]
    assert header.split() == [*DEFAULT_HEADERS, "Disk_sizes"]
    # the fake hypervisor's runtime state
    state = fake_state(cl, "full")
    assert state is not None
    assert (state["memory"], state["vcpus"], state["state"]) == (256, 2, "running")
    # sparse disk files of the right sizes under the file storage directory
    files = disk_files(cl, "full")
    assert [f.stat().st_size for f in files] == [64 * MIB, 1024 * MIB]
    assert all(f.stat().st_blocks * 512 < MIB for f in files)
    # what the create script saw
    env = read_env(out / "create-full")
    assert env["DISK_COUNT"] == "2"
    assert (env["DISK_0_SIZE"], env["DISK_1_SIZE"]) == ("64", "1024")
    assert env["DISK_0_BACKEND_TYPE"] == "file:loop"
    assert env["DISK_0_PATH"] == str(files[0])
    assert (env["NIC_0_MAC"], env["NIC_0_IP"]) == ("aa:00:00:12:34:56", "198.18.2.10")
    assert (env["INSTANCE_BE_maxmem"], env["INSTANCE_BE_vcpus"]) == ("256", "2")
    assert env["INSTANCE_HV_migration_mode"] == "non-live"
    assert (env["OS_NAME"], env["OS_VARIANT"], env["INSTANCE_OS"]) == (
        "dummy",
        "default",
        "dummy+default",
    )
    assert env["OSP_FOO"] == "1"
    assert "INSTANCE_REINSTALL" not in env


@pytest.mark.parametrize(("size", "mib"), [("100m", 100), ("2g", 2048), ("300", 300)])
def test_add_with_single_disk_size(cl: TestCluster, size: str, mib: int) -> None:
    name = f"single{mib}"
    ok(add(cl, name, "-t", "file", "-s", size, "--no-start", "-o", "plain"))
    assert query(cl, ["disk.sizes"], name)[name]["disk.sizes"] == [mib]
    assert [f.stat().st_size for f in disk_files(cl, name)] == [mib * MIB]
    ok(cl.gnt("instance", "remove", "-f", name))


def test_list_statuses_and_formats(cl: TestCluster) -> None:
    names = ["st-run", "st-down", "st-errdown", "st-errup"]
    for name in names:
        ok(add(cl, name, "-t", "diskless", "-o", "plain", "--no-start"))
    ok(cl.gnt("instance", "startup", "--force-multiple", "st-run", "st-errdown"))
    # marked up, but the hypervisor lost it
    (fake_state_dir(cl) / "st-errdown").unlink()
    # marked down, but running
    state = {"name": "st-errup", "memory": 128, "vcpus": 1, "state": "running"}
    (fake_state_dir(cl) / "st-errup").write_text(json.dumps({**state, "started": time.time()}))
    statuses = {name: status for name, status in rows(cl, ["name", "status"], *names)}
    assert statuses == {
        "st-run": "running",
        "st-down": "ADMIN_down",
        "st-errdown": "ERROR_down",
        "st-errup": "ERROR_up",
    }
    # default fields, with headers
    lines = ok(cl.gnt("instance", "list", *names)).splitlines()
    assert lines[0].split() == DEFAULT_HEADERS
    table = {line.split()[0]: line.split() for line in lines[1:]}
    assert table["st-run"] == ["st-run", "fake", "plain", cl.node_name, "running", "128M"]
    assert table["st-down"] == ["st-down", "fake", "plain", cl.node_name, "ADMIN_down", "-"]
    # --no-headers and --separator
    no_headers = ok(cl.gnt("instance", "list", "--no-headers", "st-run")).splitlines()
    assert len(no_headers) == 1 and no_headers[0].split()[0] == "st-run"
    assert rows(cl, ["name", "status", "oper_ram"], "st-run") == [["st-run", "running", "128"]]
    # a filter (Ganeti's -F/--filter: the one argument is a filter expression)
    selection = " or ".join(f'name == "{name}"' for name in names)
    running = ok(
        cl.gnt(
            "instance",
            "list",
            "--no-headers",
            "-o",
            "name",
            "--filter",
            f'status == "running" and ({selection})',
        )
    )
    assert sorted(running.split()) == ["st-run"]
    admin_up = ok(
        cl.gnt(
            "instance",
            "list",
            "--no-headers",
            "-o",
            "name",
            "-F",
            f'admin_state == "up" and ({selection})',
        )
    )
    assert sorted(admin_up.split()) == ["st-errdown", "st-run"]
    # cleanup
    (fake_state_dir(cl) / "st-errup").unlink()
    for name in names:
        ok(cl.gnt("instance", "remove", "-f", name))


def test_list_fields(cl: TestCluster) -> None:
    lines = ok(cl.gnt("instance", "list-fields")).splitlines()
    assert lines[0].split() == ["Name", "Type", "Title", "Description"]
    names = {line.split()[0] for line in lines[1:]}
    for field in (
        "name",
        "status",
        "oper_ram",
        "os",
        "pnode",
        "hypervisor",
        "admin_state",
        "disk.sizes",
        "nic.macs",
        "be/vcpus",
        "tags",
        "disk_template",
    ):
        assert field in names, field
    selected = ok(cl.gnt("instance", "list-fields", "--no-headers", "name", "status"))
    assert [line.split()[:3] for line in selected.splitlines()] == [
        ["name", "Text", "Instance"],
        ["status", "Text", "Status"],
    ]


def test_info_shows_state_and_redacts_private_parameters(cl: TestCluster) -> None:
    ok(
        add(
            cl,
            "inf",
            "-t",
            "diskless",
            "-o",
            "dummy+default",
            "-O",
            "foo=visible",
            "--os-parameters-private",
            "token=hush-hush",
        )
    )
    text = ok(cl.gnt("instance", "info", "inf"))
    assert "Instance name: inf" in text
    assert "State: configured to be up, actual state is up" in text
    assert "  foo: visible" in text
    assert "  token: <redacted>" in text
    assert "hush-hush" not in text
    ok(cl.gnt("instance", "shutdown", "inf"))
    text = ok(cl.gnt("instance", "info", "inf"))
    assert "State: configured to be down, actual state is down" in text
    static = ok(cl.gnt("instance", "info", "-s", "inf"))
    assert "State: configured to be down" in static
    ok(cl.gnt("instance", "remove", "-f", "inf"))


def test_startup_shutdown_reboot(cl: TestCluster) -> None:
    ok(add(cl, "cycle", "-t", "diskless", "-o", "plain", "--no-start", "-B", "memory=160M"))
    assert fake_state(cl, "cycle") is None
    ok(cl.gnt("instance", "startup", "cycle"))
    first = fake_state(cl, "cycle")
    assert first is not None and first["memory"] == 160
    assert rows(cl, ["status", "admin_state"], "cycle") == [["running", "up"]]
    ok(cl.gnt("instance", "shutdown", "cycle"))
    assert fake_state(cl, "cycle") is None
    assert rows(cl, ["status", "admin_state"], "cycle") == [["ADMIN_down", "down"]]
    ok(cl.gnt("instance", "start", "cycle"))  # the alias
    started = fake_state(cl, "cycle")
    assert started is not None
    # A new memory size reaches the hypervisor on a hard or full reboot, not a soft one.
    ok(cl.gnt("instance", "modify", "-B", "memory=192M", "cycle"))
    last = started["started"]
    for kind, memory in (("soft", 160), ("hard", 192), ("full", 192)):
        ok(cl.gnt("instance", "reboot", "-t", kind, "cycle"))
        state = fake_state(cl, "cycle")
        assert state is not None, kind
        assert state["state"] == "running", kind
        assert state["memory"] == memory, kind
        assert state["started"] > last, kind
        last = state["started"]
    # reboot of a stopped instance starts it
    ok(cl.gnt("instance", "stop", "cycle"))
    ok(cl.gnt("instance", "reboot", "cycle"))
    assert fake_state(cl, "cycle") is not None
    assert rows(cl, ["status"], "cycle") == [["running"]]
    ok(cl.gnt("instance", "remove", "-f", "cycle"))
    assert fake_state(cl, "cycle") is None


def test_reinstall(cl: TestCluster, out: Path) -> None:
    ok(add(cl, "re", "-t", "file", "-s", "32m", "-o", "plain"))
    # refused while running (and marked up)
    failed(cl.gnt("instance", "reinstall", "-f", "re"), "is marked to be up, cannot reinstall")
    ok(cl.gnt("instance", "shutdown", "re"))
    # another OS, with parameters
    ok(cl.gnt("instance", "reinstall", "-f", "-o", "dummy+default", "-O", "foo=one,bar=two", "re"))
    env = read_env(out / "create-re")
    assert env["INSTANCE_REINSTALL"] == "1"
    assert (env["OS_NAME"], env["INSTANCE_OS"]) == ("dummy", "dummy+default")
    assert (env["OSP_FOO"], env["OSP_BAR"]) == ("one", "two")
    assert env["DISK_0_PATH"] == str(disk_files(cl, "re")[0])
    info = query(cl, ["os", "custom_osparams", "status"], "re")["re"]
    assert info == {
        "os": "dummy+default",
        "custom_osparams": {"foo": "one", "bar": "two"},
        "status": "ADMIN_down",
    }
    # the same OS again with a changed parameter; the others stay
    ok(cl.gnt("instance", "reinstall", "-f", "-O", "foo=three", "re"))
    env = read_env(out / "create-re")
    assert (env["OSP_FOO"], env["OSP_BAR"]) == ("three", "two")
    assert query(cl, ["custom_osparams"], "re")["re"]["custom_osparams"] == {
        "foo": "three",
        "bar": "two",
    }
    ok(cl.gnt("instance", "remove", "-f", "re"))


def test_rename_runs_the_rename_script_and_moves_the_disks(cl: TestCluster, out: Path) -> None:
    ok(add(cl, "oldname", "-t", "file", "-s", "16m", "-o", "dummy+default", "--no-start"))
    (old_file,) = disk_files(cl, "oldname")
    ok(cl.gnt("instance", "rename", "-f", "--no-name-check", "--no-ip-check", "oldname", "newname"))
    env = read_env(out / "rename-newname")
    assert env["OLD_INSTANCE_NAME"] == "oldname"
    assert env["INSTANCE_NAME"] == "newname"
    (new_file,) = disk_files(cl, "newname")
    assert not disk_dir(cl, "oldname").exists()
    assert new_file.name == old_file.name
    assert new_file.stat().st_size == 16 * MIB
    assert env["DISK_0_PATH"] == str(new_file)
    assert [r[0] for r in rows(cl, ["name"], "newname")] == ["newname"]
    failed(cl.gnt("instance", "info", "oldname"), "unknown_entity", "'oldname'")
    # refused while running
    ok(cl.gnt("instance", "startup", "newname"))
    failed(
        cl.gnt(
            "instance", "rename", "-f", "--no-name-check", "--no-ip-check", "newname", "thirdname"
        ),
        "shut it down",
    )
    ok(cl.gnt("instance", "remove", "-f", "newname"))


def test_modify_parameters(cl: TestCluster) -> None:
    ok(add(cl, "mod", "-t", "diskless", "-o", "dummy+default", "--no-start", "-O", "foo=1"))
    ok(cl.gnt("instance", "modify", "-B", "vcpus=3,memory=512M", "mod"))
    ok(cl.gnt("instance", "modify", "-H", "migration_mode=non-live", "mod"))
    ok(cl.gnt("instance", "modify", "-O", "bar=2", "mod"))
    ok(cl.gnt("instance", "modify", "--os-parameters-private", "token=t0p", "mod"))
    info = query(
        cl,
        ["be/vcpus", "be/maxmem", "custom_hvparams", "custom_osparams", "custom_beparams"],
        "mod",
    )["mod"]
    assert (info["be/vcpus"], info["be/maxmem"]) == (3, 512)
    assert info["custom_hvparams"]["migration_mode"] == "non-live"
    assert info["custom_osparams"] == {"foo": "1", "bar": "2"}
    text = ok(cl.gnt("instance", "info", "mod"))
    assert "  token: <redacted>" in text and "t0p" not in text
    # "-key" removes an OS parameter; "default" resets a backend parameter
    ok(cl.gnt("instance", "modify", "-O", "-foo", "mod"))
    ok(cl.gnt("instance", "modify", "-B", "vcpus=default", "mod"))
    info = query(cl, ["be/vcpus", "custom_osparams", "custom_beparams"], "mod")["mod"]
    assert info["custom_osparams"] == {"bar": "2"}
    assert "vcpus" not in info["custom_beparams"]
    assert info["be/vcpus"] == 1
    # another OS: the old OS's parameters must be declared by the new one
    failed(cl.gnt("instance", "modify", "--os-type", "plain", "mod"), "bar")
    ok(cl.gnt("instance", "modify", "-O", "-bar", "mod"))
    ok(cl.gnt("instance", "modify", "--os-parameters-private", "-token", "mod"))
    ok(cl.gnt("instance", "modify", "--os-type", "plain", "mod"))
    assert query(cl, ["os"], "mod")["mod"]["os"] == "plain"
    ok(cl.gnt("instance", "remove", "-f", "mod"))


def test_modify_disks(cl: TestCluster) -> None:
    ok(add(cl, "disks", "-t", "file", "--disk", "0:size=16m", "-o", "plain"))
    # add to a running instance
    ok(cl.gnt("instance", "modify", "--disk", "add:size=32m", "disks"))
    files = disk_files(cl, "disks")
    assert [f.stat().st_size for f in files] == [16 * MIB, 32 * MIB]
    assert query(cl, ["disk.sizes"], "disks")["disks"]["disk.sizes"] == [16, 32]
    # grow
    ok(cl.gnt("instance", "grow-disk", "disks", "1", "16m"))
    ok(cl.gnt("instance", "grow-disk", "--absolute", "disks", "0", "1g"))
    assert query(cl, ["disk.sizes"], "disks")["disks"]["disk.sizes"] == [1024, 48]
    assert [f.stat().st_size for f in disk_files(cl, "disks")] == [1024 * MIB, 48 * MIB]
    failed(cl.gnt("instance", "grow-disk", "--absolute", "disks", "0", "16m"), "shrink")
    # remove: not while running
    failed(
        cl.gnt("instance", "modify", "--disk", "1:remove", "disks"),
        "Instance disks is running, can't remove volume from a running instance without"
        " using hotplug",
    )
    ok(cl.gnt("instance", "shutdown", "disks"))
    ok(cl.gnt("instance", "modify", "--disk", "1:remove", "disks"))
    assert query(cl, ["disk.sizes"], "disks")["disks"]["disk.sizes"] == [1024]
    assert [f.stat().st_size for f in disk_files(cl, "disks")] == [1024 * MIB]
    assert files[1] not in disk_files(cl, "disks")
    ok(cl.gnt("instance", "remove", "-f", "disks"))


def test_modify_nics(cl: TestCluster) -> None:
    ok(add(cl, "nics", "-t", "diskless", "-o", "plain", "--no-start"))
    ok(cl.gnt("instance", "modify", "--net", "add", "nics"))
    ok(cl.gnt("instance", "modify", "--net", "add:ip=198.18.2.77", "nics"))
    info = query(cl, ["nic.macs", "nic.ips", "nic.count"], "nics")["nics"]
    assert info["nic.count"] == 3
    assert info["nic.ips"] == [None, None, "198.18.2.77"]
    assert len(set(info["nic.macs"])) == 3
    ok(cl.gnt("instance", "modify", "--net", "0:modify,ip=198.18.2.78", "nics"))
    ok(cl.gnt("instance", "modify", "--net", "1:remove", "nics"))
    after = query(cl, ["nic.macs", "nic.ips"], "nics")["nics"]
    assert after["nic.ips"] == ["198.18.2.78", "198.18.2.77"]
    assert after["nic.macs"] == [info["nic.macs"][0], info["nic.macs"][2]]
    ok(cl.gnt("instance", "remove", "-f", "nics"))


def test_remove_deletes_disks_and_state(cl: TestCluster) -> None:
    ok(add(cl, "gone", "-t", "file", "--disk", "0:size=8m", "--disk", "1:size=8m", "-o", "plain"))
    assert fake_state(cl, "gone") is not None
    assert len(disk_files(cl, "gone")) == 2
    ok(cl.gnt("instance", "remove", "-f", "gone"))
    assert fake_state(cl, "gone") is None
    assert not disk_dir(cl, "gone").exists()
    assert rows(cl, ["name"], "gone") == []
    assert "gone" not in ok(cl.gnt("instance", "list", "--no-headers", "-o", "name")).split()


def test_tags(cl: TestCluster) -> None:
    ok(add(cl, "tagged", "-t", "diskless", "--no-install", "--no-start", "--tags", "one"))
    ok(cl.gnt("instance", "add-tags", "tagged", "two", "three"))
    assert ok(cl.gnt("instance", "list-tags", "tagged")).split() == ["one", "three", "two"]
    ok(cl.gnt("instance", "remove-tags", "tagged", "one", "three"))
    assert ok(cl.gnt("instance", "list-tags", "tagged")).split() == ["two"]
    assert query(cl, ["tags"], "tagged")["tagged"]["tags"] == ["two"]
    ok(cl.gnt("instance", "remove", "-f", "tagged"))


def test_macs_come_from_the_cluster_prefix_and_are_unique(cl: TestCluster) -> None:
    with cl.client() as client:
        prefix = client.call("QueryClusterInfo")["mac_prefix"]
    names = [f"mac{i}" for i in range(4)]
    for name in names:
        ok(
            add(
                cl, name, "-t", "diskless", "--no-install", "--no-start", "--net", "0", "--net", "1"
            )
        )
    macs = [m for info in query(cl, ["nic.macs"], *names).values() for m in info["nic.macs"]]
    assert len(macs) == 8
    assert len(set(macs)) == 8
    assert all(m.startswith(prefix + ":") and len(m) == 17 for m in macs)
    # a MAC already in use is refused
    failed(
        add(cl, "macdup", "-t", "diskless", "--no-install", "--net", f"0:mac={macs[0]}"),
        f"MAC address {macs[0]}",
        "already in use",
        "resource_not_unique",
    )
    for name in names:
        ok(cl.gnt("instance", "remove", "-f", name))


def test_ip_conflicts(cl: TestCluster) -> None:
    ip = "198.51.100.7"
    ok(add(cl, "ip1", "-t", "diskless", "--no-install", "--no-start", "--net", f"0:ip={ip}"))
    failed(
        add(cl, "ip2", "-t", "diskless", "--no-install", "--no-start", "--net", f"0:ip={ip}"),
        f"IP address {ip} is already used",
        "resource_not_unique",
    )
    assert rows(cl, ["name"], "ip2") == []
    ok(
        add(
            cl,
            "ip2",
            "-t",
            "diskless",
            "--no-install",
            "--no-start",
            "--net",
            f"0:ip={ip}",
            "--no-conflicts-check",
        )
    )
    ok(add(cl, "ip3", "-t", "diskless", "--no-install", "--no-start"))
    failed(
        cl.gnt("instance", "modify", "--net", f"0:modify,ip={ip}", "ip3"),
        f"IP address {ip} is already used",
    )
    failed(cl.gnt("instance", "modify", "--net", f"add:ip={ip}", "ip3"), "already used")
    ok(cl.gnt("instance", "modify", "--no-conflicts-check", "--net", f"0:modify,ip={ip}", "ip3"))
    for name in ("ip1", "ip2", "ip3"):
        ok(cl.gnt("instance", "remove", "-f", name))


def test_memory_and_disk_accounting(cl: TestCluster) -> None:
    before = rows(cl, ["name"])
    failed(
        add(cl, "huge", "-t", "diskless", "-o", "plain", "-B", "memory=100000000"),
        "insufficient_resources",
        "Not enough memory",
    )
    failed(
        add(cl, "huge", "-t", "file", "--disk", "0:size=100t", "-o", "plain", "--no-start"),
        "insufficient_resources",
        "Not enough disk space",
    )
    assert rows(cl, ["name"]) == before
    assert not disk_dir(cl, "huge").exists()
    # not started: memory is not needed; starting it then is refused
    ok(add(cl, "huge", "-t", "diskless", "-o", "plain", "--no-start", "-B", "memory=100000000"))
    failed(cl.gnt("instance", "startup", "huge"), "insufficient_resources", "Not enough memory")
    assert fake_state(cl, "huge") is None
    assert rows(cl, ["admin_state"], "huge") == [["down"]]
    ok(cl.gnt("instance", "remove", "-f", "huge"))
    # What runs on the node takes its memory: with a (fake) instance using it all,
    # even a small instance does not fit.
    ok(add(cl, "small", "-t", "diskless", "-o", "plain", "--no-start"))
    hog = fake_state_dir(cl) / "hog"
    state = {"name": "hog", "memory": 10**9, "vcpus": 1, "state": "running"}
    hog.write_text(json.dumps({**state, "started": time.time()}))
    try:
        failed(cl.gnt("instance", "startup", "small"), "Not enough memory")
    finally:
        hog.unlink()
    ok(cl.gnt("instance", "startup", "small"))
    ok(cl.gnt("instance", "remove", "-f", "small"))
