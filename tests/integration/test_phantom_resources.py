"""Only what exists can be enabled: disk templates and hypervisors that Corral
does not implement, or that a node cannot serve, are refused at ``gnt-cluster
init`` and ``modify`` and at ``gnt-instance add``; a hypervisor failing on a
node hides only its own instances, an unreachable node only its own."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corral.config.manager import ConfigManager, ConfigTransaction
from corral.objects import Cluster, Instance
from corral.process.daemons import start_daemon, stop_daemon
from tests.helpers.cluster import TestCluster, new_root, running_cluster
from tests.helpers.instances import add, config_serial, failed, files_under, ok, rows
from tests.helpers.multinode import add_node
from tests.helpers.noded import daemon_env
from tests.helpers.offline_config import change_offline
from tests.helpers.osdef import make_os

# (Ganeti's drbd asks for Corral's mirrored: tests/unit/test_lu_mirrored.py.)
PHANTOM_TEMPLATES = ("plain", "rbd", "ext", "gluster")
IMPLEMENTED = "diskless, file, sharedfile, blockdev, mirrored"
# plain names what the machine lacks, when it lacks it.
_KERNEL_NEEDS = {
    "plain": ("/dev/mapper/control", "this machine has no device-mapper (LVM)"),
}


def why_not(template: str) -> str:
    """Why Corral refuses ``template`` on this machine."""
    probe, lacking = _KERNEL_NEEDS.get(template, ("/", ""))
    return lacking if not os.path.exists(probe) else "it is not implemented by Corral"


PHANTOM_HYPERVISORS = ("xen-pvm", "xen-hvm", "lxc", "chroot")
NODE2 = "node2.example.com"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("phantom")) as cluster:
        make_os(cluster.paths, "plain", variants=None)
        yield cluster


@pytest.fixture
def root(tmp_path: Path) -> Iterator[TestCluster]:
    """An empty root; daemons an init wrongly started are stopped afterwards."""
    cl = new_root(tmp_path)
    try:
        yield cl
    finally:
        cl.stop()


def cluster_state(cl: TestCluster) -> tuple[str, int]:
    return ok(cl.gnt("cluster", "info")), config_serial(cl)


def edit_config(cl: TestCluster, edit: Callable[[ConfigManager, ConfigTransaction], None]) -> None:
    """Change the configuration directly (masterd stopped meanwhile), as an
    older Corral, which enabled anything, may have left it."""
    stop_daemon(cl.paths, "corral-masterd")
    change_offline(cl.paths, edit)
    start_daemon([sys.executable, "-m", "corral.daemons.masterd"], daemon_env(cl.paths))


def enable_in_config(cl: TestCluster, hypervisors: list[str], disk_templates: list[str]) -> None:
    def edit(cfg: ConfigManager, tx: ConfigTransaction) -> None:
        cluster = cfg.cluster.copy_for_update()
        assert isinstance(cluster, Cluster)
        cluster.enabled_hypervisors = hypervisors
        cluster.enabled_disk_templates = disk_templates
        tx.update(cluster)

    edit_config(cl, edit)


# gnt-cluster init


@pytest.mark.parametrize("template", PHANTOM_TEMPLATES)
def test_init_refuses_a_template_corral_lacks(root: TestCluster, template: str) -> None:
    failed(
        root.init("--enabled-disk-templates", f"file,{template}"),
        f"disk template '{template}': {why_not(template)}",
        f"use one of: {IMPLEMENTED}",
    )
    assert not root.paths.config_db.exists()
    assert not root.paths.pid_file("corral-noded").exists()


@pytest.mark.parametrize("hypervisor", PHANTOM_HYPERVISORS)
def test_init_refuses_a_hypervisor_corral_lacks(root: TestCluster, hypervisor: str) -> None:
    failed(
        root.init("--enabled-hypervisors", f"fake,{hypervisor}"),
        f"hypervisor '{hypervisor}': it is not implemented by Corral",
    )
    assert not root.paths.config_db.exists()


def test_init_refuses_unknown_names_as_ganeti(root: TestCluster) -> None:
    failed(
        root.init("--enabled-disk-templates", "file,floppy"),
        "Enabled disk templates list contains invalid entries: {'floppy'}",
    )
    failed(
        root.init("--enabled-hypervisors", "qemu"),
        "Enabled hypervisors contains invalid entries: {'qemu'}",
    )
    assert not root.paths.config_db.exists()


def test_init_refuses_a_hypervisor_the_node_cannot_run(root: TestCluster) -> None:
    # The fake hypervisor keeps its state in a directory; a file there breaks it.
    root.paths.run_dir.mkdir(parents=True)
    (root.paths.run_dir / "fake-hypervisor").write_text("not a directory")
    failed(
        root.init(),
        "Cannot enable hypervisor 'fake': node node1.example.com cannot run it:"
        " cannot read its state: Not a directory",
    )
    assert not root.paths.config_db.exists()


def test_init_makes_a_file_storage_dir_that_does_not_exist(root: TestCluster) -> None:
    # As Ganeti's init; the node is then asked whether it can serve "file" there.
    try:
        ok(root.init("--file-storage-dir", "/srv/site/files"))
        assert root.paths.from_wire("/srv/site/files").is_dir()
    finally:
        root.stop()


# gnt-cluster modify


@pytest.mark.parametrize("template", PHANTOM_TEMPLATES)
def test_modify_refuses_a_template_corral_lacks(cl: TestCluster, template: str) -> None:
    before = cluster_state(cl)
    failed(
        cl.gnt("cluster", "modify", "--enabled-disk-templates", f"file,diskless,{template}"),
        f"disk template '{template}': {why_not(template)}",
    )
    assert cluster_state(cl) == before


@pytest.mark.parametrize("hypervisor", PHANTOM_HYPERVISORS)
def test_modify_refuses_a_hypervisor_corral_lacks(cl: TestCluster, hypervisor: str) -> None:
    before = cluster_state(cl)
    failed(
        cl.gnt("cluster", "modify", "--enabled-hypervisors", f"fake,{hypervisor}"),
        f"hypervisor '{hypervisor}': it is not implemented by Corral",
    )
    assert cluster_state(cl) == before


# gnt-instance add with an old configuration


def test_add_refuses_phantom_templates_an_old_config_enables(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        make_os(cl.paths, "plain", variants=None)
        enable_in_config(cl, ["fake", "lxc"], ["plain", *PHANTOM_TEMPLATES[1:], "file"])
        before = (config_serial(cl), files_under(cl.paths.file_storage_dir))
        for template in PHANTOM_TEMPLATES:
            failed(
                add(cl, "new1", "-t", template, "-s", "1M", "-o", "plain"),
                f"Cannot use disk template '{template}': {why_not(template)}",
            )
        # Without -t, the first enabled template (here a phantom one) is refused too.
        failed(add(cl, "new1", "-s", "1M", "-o", "plain"), f"'plain': {why_not('plain')}")
        failed(
            add(cl, "new1", "-t", "file", "-s", "1M", "-o", "plain", "-H", "lxc"),
            "Cannot use hypervisor 'lxc': it is not implemented by Corral",
        )
        assert (config_serial(cl), files_under(cl.paths.file_storage_dir)) == before
        assert rows(cl, ["name"]) == []
        # Re-listing the phantom template is no way around it.
        failed(
            cl.gnt("cluster", "modify", "--enabled-disk-templates", "plain,file"),
            f"'plain': {why_not('plain')}",
        )
        ok(add(cl, "new1", "-t", "file", "-s", "1M", "-o", "plain", "--no-start"))


# Live state


def test_a_failing_hypervisor_hides_only_its_own_instances(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        make_os(cl.paths, "plain", variants=None)
        ok(add(cl, "up1", "-t", "diskless", "-o", "plain"))

        def lxc_twin(cfg: ConfigManager, tx: ConfigTransaction) -> None:
            # An instance of a hypervisor the node lacks, as an old config may hold.
            twin = cfg.lookup(Instance, "up1").model_copy(deep=True)
            twin.uuid, twin.name, twin.hypervisor, twin.nics = "lxc-twin", "lxc1", "lxc", []
            cluster = cfg.cluster.copy_for_update()
            assert isinstance(cluster, Cluster)
            cluster.enabled_hypervisors = ["fake", "lxc"]
            tx.update(cluster)
            tx.add(twin)

        edit_config(cl, lxc_twin)
        assert rows(cl, ["name", "status", "oper_state"]) == [
            ["lxc1", "ERROR_nodedown", "?"],
            ["up1", "running", "Y"],
        ]
        info = ok(cl.gnt("instance", "info", "up1"))
        assert "configured to be up, actual state is up" in info
        info = ok(cl.gnt("instance", "info", "lxc1"))
        assert "actual state" not in info
        assert "WARNING: Cannot get the state of instance lxc1 from node" in info


@pytest.mark.slow
def test_nodes_are_judged_each_on_its_own(tmp_path: Path) -> None:
    with running_cluster(tmp_path, "--enabled-disk-templates", "diskless") as cl:
        make_os(cl.paths, "plain", variants=None)
        node2 = add_node(cl, tmp_path / "node2")
        try:
            make_os(node2.paths, "plain", variants=None)
            # node2 cannot serve file disks: its storage directory is a file.
            node2.paths.file_storage_dir.rmdir()
            node2.paths.file_storage_dir.write_text("")
            before = cluster_state(cl)
            failed(
                cl.gnt("cluster", "modify", "--enabled-disk-templates", "diskless,file"),
                f"Cannot enable disk template 'file': node {NODE2} cannot serve it:"
                " the file storage directory /srv/ganeti/file-storage is not a directory",
            )
            assert cluster_state(cl) == before
            node2.paths.file_storage_dir.unlink()
            node2.paths.file_storage_dir.mkdir()
            ok(cl.gnt("cluster", "modify", "--enabled-disk-templates", "diskless,file"))

            ok(add(cl, "on1", "-t", "diskless", "-o", "plain", "-n", cl.node_name))
            ok(add(cl, "on2", "-t", "diskless", "-o", "plain", "-n", NODE2))
        finally:
            node2.stop()
        assert rows(cl, ["name", "status"]) == [["on1", "running"], ["on2", "ERROR_nodedown"]]
        # A node that does not answer cannot vouch for a template enabled anew.
        ok(cl.gnt("cluster", "modify", "--enabled-disk-templates", "diskless"))
        before = cluster_state(cl)
        failed(
            cl.gnt("cluster", "modify", "--enabled-disk-templates", "diskless,file"),
            f"Cannot enable disk template 'file': node {NODE2} did not say whether it can serve it",
        )
        assert cluster_state(cl) == before
