"""The tables of what Corral implements agree with the code behind them, and
the checks built on them refuse with one clear message."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from corral import capabilities, errors, hvparams, hypervisors
from corral import constants as C
from corral import params as P
from corral import storage_names as names
from corral.node import capabilities as node_caps
from corral.node.hypervisor import CLASSES, get_hypervisor
from corral.node.storage import qsd
from corral.opcodes.types import Hypervisor
from corral.paths import Paths
from corral.storage import templates
from corral.storage.units import StorageUnit
from tests.helpers.source_literals import CORRAL, compared_outside, spelled_outside

# Same spelling, other namespaces: QEMU's "kvm" accelerator, kvm's "chroot" directory.
HV_OTHER_USES = {
    (CORRAL / "node" / "hypervisor" / "kvm" / "cmdline.py", hypervisors.HT_KVM),
    (CORRAL / "node" / "hypervisor" / "kvm" / "runtime.py", hypervisors.HT_CHROOT),
}


def test_every_implemented_hypervisor_runs_on_a_node(tmp_path: Path) -> None:
    for name in hypervisors.HYPERVISORS:
        assert name == get_hypervisor(name, Paths(tmp_path)).NAME
        assert name in P.HV_TYPES
    assert set(hypervisors.HYPERVISORS) <= set(hypervisors.GANETI_HYPERVISORS)
    # The master's table, the nodes' classes and the parameter tables agree.
    assert set(CLASSES) == set(hvparams.TABLES) == set(hypervisors.HYPERVISORS)
    assert get_args(Hypervisor) == hypervisors.GANETI_HYPERVISORS


def test_no_hypervisor_name_is_spelled_outside_the_table() -> None:
    allowed = {CORRAL / "hypervisors.py"}
    assert spelled_outside(hypervisors.GANETI_HYPERVISORS, allowed, HV_OTHER_USES) == []


def test_no_behaviour_is_chosen_by_hypervisor_name() -> None:
    constants = [name for name in vars(hypervisors) if name.startswith("HT_")]
    assert len(constants) == len(hypervisors.GANETI_HYPERVISORS)
    assert compared_outside(constants, {CORRAL / "hypervisors.py"}) == []


def test_hypervisor_behaviour_is_declared_in_the_table() -> None:
    kvm, fake = hypervisors.HYPERVISORS["kvm"], hypervisors.HYPERVISORS["fake"]
    # Ganeti's HTS_REQ_PORT, for what Corral has; kvm copies file disks while migrating.
    assert {h.name for h in hypervisors.HYPERVISORS.values() if h.needs_port} == {"kvm"}
    assert hypervisors.needs_port("kvm") and not hypervisors.needs_port("xen-hvm")
    assert (kvm.copies_disks, fake.copies_disks) == (True, False)
    # The parameter allowing user shutdown is one of the hypervisor's.
    assert kvm.user_shutdown_param in hvparams.TABLES["kvm"].params
    assert fake.user_shutdown_param is None
    assert hypervisors.kind("xen-pvm") is None
    # Helper VMs (design-os's install mode) are kvm guests.
    assert hypervisors.runs_helper_vm("kvm") and not hypervisors.runs_helper_vm("fake")


def test_every_implemented_template_has_a_node_probe(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    paths.file_storage_dir.mkdir(parents=True)
    paths.shared_file_storage_dir.mkdir(parents=True)
    dirs = templates.StorageDirs(
        paths.to_wire(paths.file_storage_dir), paths.to_wire(paths.shared_file_storage_dir)
    )
    report = node_caps.report(paths, templates.capacity_units(dirs))
    assert report[capabilities.REPORT_DISK_TEMPLATES] == dict.fromkeys(templates.DISK_TEMPLATES)
    assert report[capabilities.REPORT_HYPERVISORS] == dict.fromkeys(hypervisors.HYPERVISORS)
    assert set(templates.DISK_TEMPLATES) <= set(names.DISK_TEMPLATE_NAMES)


def test_a_node_without_qemus_storage_daemon_cannot_serve_mirrored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = Paths(tmp_path)
    paths.file_storage_dir.mkdir(parents=True)
    monkeypatch.setattr(qsd, "QSD", str(tmp_path / "qemu-storage-daemon"))
    problem = node_caps.disk_template_problem(
        paths, names.DT_MIRRORED, {names.ST_FILE: paths.to_wire(paths.file_storage_dir)}
    )
    missing = f"{tmp_path}/qemu-storage-daemon is missing"
    assert problem == f"{missing} (Debian's package qemu-system-common)"


def test_a_missing_file_storage_directory_is_reported(tmp_path: Path) -> None:
    dirs = templates.StorageDirs("/srv/elsewhere", "/srv/shared")
    assert templates.capacity_units(dirs) == [
        StorageUnit("file", "/srv/elsewhere"),
        StorageUnit("sharedfile", "/srv/shared"),
    ]
    # The call's arguments: the storage units, as [type, key].
    report = node_caps.report_wire(Paths(tmp_path), [["file", "/srv/elsewhere"]])
    assert report[capabilities.REPORT_DISK_TEMPLATES]["sharedfile"] == (
        "no shared file storage directory is set"
    )
    report = node_caps.report(Paths(tmp_path), templates.capacity_units(dirs))
    assert report[capabilities.REPORT_DISK_TEMPLATES] == {
        "diskless": None,
        "file": "the file storage directory /srv/elsewhere does not exist",
        "sharedfile": "the shared file storage directory /srv/shared does not exist",
        "blockdev": None,
        "mirrored": "the file storage directory /srv/elsewhere does not exist",
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("ext", "Cannot use disk template 'ext': it is not implemented by Corral"),
        ("floppy", "'floppy' is not a valid disk template. Valid disk templates are:"),
    ],
)
def test_template_names(name: str, text: str) -> None:
    with pytest.raises(errors.OpPrereqError) as err:
        templates.check_implemented(name)
    assert text in err.value.message
    assert err.value.ecode == C.ECODE_INVAL


def test_reports_name_the_node_and_the_reason() -> None:
    good = {"hypervisors": {"fake": None}, "disk_templates": {"file": None}}
    bad = {"hypervisors": {"fake": None}, "disk_templates": {"file": "no directory"}}
    capabilities.check_reports({"n1": good}, ["fake"], ["file"])
    with pytest.raises(errors.OpPrereqError) as err:
        capabilities.check_reports({"n1": good, "n2": bad}, ["fake"], ["file"])
    assert err.value.message == (
        "Cannot enable disk template 'file': node n2 cannot serve it: no directory;"
        " fix the node or leave disk template 'file' disabled"
    )
    with pytest.raises(errors.OpPrereqError, match="node n3 did not say whether it can run it"):
        capabilities.check_reports({"n3": "Connection refused"}, ["fake"], [])
