"""The tables of what Corral implements agree with the code behind them, and
the checks built on them refuse with one clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import capabilities, errors
from corral import constants as C
from corral import params as P
from corral.node import capabilities as node_caps
from corral.node.hypervisor import get_hypervisor
from corral.paths import Paths
from corral.storage import templates


def test_every_implemented_hypervisor_runs_on_a_node(tmp_path: Path) -> None:
    for name in capabilities.HYPERVISORS:
        assert name == get_hypervisor(name, Paths(tmp_path)).NAME
        assert name in P.HV_TYPES
    assert set(capabilities.HYPERVISORS) <= set(capabilities.GANETI_HYPERVISORS)


def test_every_implemented_template_has_a_node_probe(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    paths.file_storage_dir.mkdir(parents=True)
    paths.shared_file_storage_dir.mkdir(parents=True)
    report = node_caps.report(paths, paths.to_wire(paths.file_storage_dir))
    assert report[capabilities.REPORT_DISK_TEMPLATES] == dict.fromkeys(templates.DISK_TEMPLATES)
    assert report[capabilities.REPORT_HYPERVISORS] == dict.fromkeys(capabilities.HYPERVISORS)
    assert set(templates.DISK_TEMPLATES) <= set(templates.GANETI_DISK_TEMPLATES)


def test_a_missing_file_storage_directory_is_reported(tmp_path: Path) -> None:
    report = node_caps.report(Paths(tmp_path), "/srv/elsewhere", "/srv/shared")
    assert report[capabilities.REPORT_DISK_TEMPLATES] == {
        "diskless": None,
        "file": "the file storage directory /srv/elsewhere does not exist",
        "sharedfile": "the shared file storage directory /srv/shared does not exist",
        "blockdev": None,
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
