"""design-os's install modes, against real nodes in-process (fake hypervisor):
the cluster's install image, where an OS create script may run (bad input
creates nothing and says why), and self_install's state.  The helper VM
itself boots in tests/integration/test_install_modes_kvm.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.node.helper_vm import helper_env, installer_drive
from tests.helpers.inprocess import InProcessCluster, create_op, in_process_cluster
from tests.helpers.osdef import make_os

INST = "inst1.example.com"
UNTRUSTED = "untrusted"


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path / "cluster", nodes=1) as cluster:
        os_dir = make_os(cluster.node(1).paths, UNTRUSTED, variants=None)
        (os_dir / "create").unlink()
        # Would leave its trace if it ever ran on the node.
        trace = tmp_path / "ran-on-the-node"
        (os_dir / "create_untrusted").write_text(f"#!/bin/sh\ntouch {trace}\n")
        (os_dir / "create_untrusted").chmod(0o755)
        (os_dir / "verify").write_text(f"#!/bin/sh\ntouch {trace}\n")
        yield cluster


def create(**fields: Any) -> dict[str, Any]:
    op = create_op(INST, testbed.node_name(1), "file", [{"size": 16}])
    return {**op, **fields}


async def set_image(cl: InProcessCluster, image: str) -> Any:
    return await cl.run({"OP_ID": "OP_CLUSTER_SET_PARAMS", "install_image": image})


async def assert_refused(cl: InProcessCluster, op: dict[str, Any], message: str) -> None:
    job = await cl.run(op)
    assert job.status == C.JOB_STATUS_ERROR, job.log
    assert message in job.error, job.error
    assert cl.instance(INST) is None and cl.disk_files(1) == []


async def test_the_install_image_is_a_cluster_parameter(cl: InProcessCluster) -> None:
    job = await set_image(cl, "/srv/corral/installer.img")
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert cl.cfg.cluster.install_image == "/srv/corral/installer.img"
    job = await set_image(cl, "http://images.example.com/installer.img")
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    # Ganeti's check and words: a path or a URL; nothing changes otherwise.
    job = await set_image(cl, "installer.img")
    assert job.status == C.JOB_STATUS_ERROR
    assert "Install image must be an absolute path or a URL" in job.error
    assert cl.cfg.cluster.install_image == "http://images.example.com/installer.img"
    # Corral's: "" unsets it (Ganeti 3.0.2 cannot).
    assert (await set_image(cl, "")).status == C.JOB_STATUS_SUCCESS
    assert cl.cfg.cluster.install_image == ""


async def test_an_untrusted_os_needs_a_helper_vm(cl: InProcessCluster, tmp_path: Path) -> None:
    await assert_refused(
        cl,
        create(os_type=UNTRUSTED, osparams={"enable-safe-install": "no"}),
        f"OS '{UNTRUSTED}' is not trusted (it has create_untrusted only): it can be"
        " installed only in the helper VM; drop --enable-safe-install=no",
    )
    # The helper VM is a kvm guest (Ganeti's words).
    await assert_refused(
        cl,
        create(os_type=UNTRUSTED),
        "Cannot run OS scripts in a virtualized environment for hypervisor 'fake'",
    )
    # Neither its create script nor its verify script ran on the node.
    assert not (tmp_path / "ran-on-the-node").exists()


async def test_a_trusted_os_in_the_helper_vm_on_request(cl: InProcessCluster) -> None:
    await assert_refused(
        cl,
        create(osparams={"enable-safe-install": "yes"}),
        "Cannot run OS scripts in a virtualized environment for hypervisor 'fake'",
    )
    job = await cl.run(create(osparams={"enable-safe-install": "no"}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error


async def test_self_install_lasts_until_the_first_start(cl: InProcessCluster) -> None:
    job = await cl.run(create(osparams={"install-hv-migration_mode": "non-live"}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None and inst.self_install and inst.hvparams == {}
    job = await cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert "First start after the install done with the install parameters" in job.log
    inst = cl.instance(INST)
    assert inst is not None and not inst.self_install
    assert inst.osparams == {"install-hv-migration_mode": "non-live"}  # kept for a reinstall
    await cl.run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST, "timeout": 0})
    job = await cl.run({"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": INST})
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None and inst.self_install


async def test_install_settings_are_checked(cl: InProcessCluster) -> None:
    await assert_refused(
        cl,
        create(osparams={"install-hv-boot_order": "cdrom"}),
        "Unknown fake hypervisor parameter 'boot_order'",
    )
    await assert_refused(
        cl,
        create(osparams={"enable-safe-install": "maybe"}),
        "The OS parameter 'enable-safe-install' must be yes or no (got 'maybe')",
    )
    await assert_refused(
        cl,
        create(osparams_secret={"install-hv-migration_mode": "live"}),
        "The OS parameter 'install-hv-migration_mode' cannot be secret;"
        " give it with --os-parameters",
    )


def test_the_helper_vm_sees_the_instance_disks_and_no_parameter() -> None:
    env = {
        "INSTANCE_NAME": "inst1",
        "DISK_COUNT": "2",
        "DISK_0_PATH": "/srv/ganeti/file-storage/inst1/disk0",
        "DISK_0_URI": "file:///x",
        "DISK_0_SIZE": "16",
        "DISK_1_PATH": "/dev/vg/x",
        "OSP_PASSWORD": "secret",
        "OSP_RELEASE": "bookworm",
    }
    assert helper_env(env, 2, reinstall=True) == {
        "INSTANCE_NAME": "inst1",
        "DISK_COUNT": "2",
        "DISK_0_PATH": "/dev/vda",
        "DISK_0_SIZE": "16",
        "DISK_1_PATH": "/dev/vdb",
        "OS_SCRIPT": "create_untrusted",
        "INSTANCE_REINSTALL": "1",
    }


def test_the_install_image_is_attached_read_only_and_booted_first() -> None:
    assert installer_drive("/srv/img", "qcow2") == (
        "-drive", "file=/srv/img,format=qcow2,if=none,id=installer,readonly=on",
        "-device", "virtio-blk-pci,drive=installer,id=installer-dev,bootindex=0",
    )  # fmt: skip
