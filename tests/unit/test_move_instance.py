"""move-instance's pieces: option checks Ganeti's tool cannot be compared
on, the destination's creation request built from the source's instance
information, and job results read back as the errors the opcodes raised."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.tools.move_instance import REMOTE_IMPORT, creation_body
from corral.tools.move_jobs import JobFailed, error_text, job_result
from corral.tools.move_options import InstanceMove, build_parser, check_options, read_password

CA = "--src-ca-file=/etc/hostname"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corral.tools.move_instance", *argv],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["--dest-instance-name=x"],
        ["--dest-primary-node=n1"],
        ["--dest-secondary-node=n2"],
        ["-B", "vcpus=2"],
        ["-H", "kernel_path=/k"],
        ["-O", "a=b"],
        ["--net", "0:mode=routed"],
    ],
)
def test_single_instance_options_refused_for_several(extra: list[str]) -> None:
    proc = run(CA, *extra, "src", "dest", "a", "b")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "move-instance: error: The options --dest-instance-name, --dest-primary-node,"
        " --dest-secondary-node, --hypervisor-parameters, --backend-parameters,"
        " --os-parameters and --net can only be used when moving exactly one instance"
    )


def test_bad_parameter_values_refused() -> None:
    proc = run(CA, "-B", "vcpus=many", "src", "dest", "a")
    assert proc.returncode == 2 and "vcpus" in proc.stderr.splitlines()[-1]
    proc = run(CA, "--net", "x:mode=routed", "src", "dest", "a")
    assert proc.returncode == 2 and "Invalid NIC index" in proc.stderr


def test_an_unreachable_cluster_is_a_clear_error() -> None:
    proc = run(CA, "--opportunistic-tries=0", "127.0.0.1", "127.0.0.1", "a")
    assert proc.returncode == 1
    assert proc.stderr.startswith("move-instance: error: ")
    assert "127.0.0.1" in proc.stderr and "Traceback" not in proc.stderr


def test_options_become_moves() -> None:
    parser = build_parser("move-instance")
    opts = parser.parse_args(
        [CA, "--net", "0:link=br1", "-B", "vcpus=2", "--dest-instance-name=new", "s", "d", "a"]
    )
    assert check_options(parser, opts) == ("s", "d", ["a"])
    assert opts.nics == [{"link": "br1"}] and opts.beparams == {"vcpus": 2}
    assert opts.name_check is True
    assert parser.parse_args([CA, "--no-name-check", "s", "d", "a"]).name_check is False


INSTANCE: dict[str, Any] = {
    "name": "a.example.com",
    "config_state": "up",
    "disk_template": "plain",
    "hypervisor": "kvm",
    "os": "debootstrap+default",
    "disks": [
        {"size": 1024, "mode": "rw", "name": None, "spindles": None},
        {"size": 512, "mode": "ro", "name": "data", "spindles": 2},
    ],
    "nics": [
        ["eth0", "uuid-1", "192.0.2.5", "aa:00:00:00:00:01", "bridged", "br0", "", None, None]
    ],
    "be_instance": {"vcpus": 1, "maxmem": 256},
    "hv_instance": {"kernel_path": ""},
    "os_instance": {"dhcp": "yes"},
}
EXPINFO = {"handshake": [0, "hmac", "salt"], "x509_ca": "signed pem", "x509_key_name": ["k"]}


def test_creation_body() -> None:
    move = InstanceMove(
        "a.example.com", "b.example.com", dest_pnode="n1", compress="zstd",
        beparams={"vcpus": 4}, nics=[{"link": "br9"}],
    )  # fmt: skip
    body = creation_body(move, INSTANCE, EXPINFO)
    assert body["mode"] == REMOTE_IMPORT == "remote-import"
    assert (body["name"], body["pnode"], body["snode"]) == ("b.example.com", "n1", None)
    assert body["disks"] == [
        {"size": 1024, "mode": "rw"},
        {"size": 512, "mode": "ro", "name": "data", "spindles": 2},
    ]
    assert body["nics"] == [
        {
            "ip": "192.0.2.5",
            "mac": "aa:00:00:00:00:01",
            "mode": "bridged",
            "link": "br9",
            "vlan": "",
            "network": None,
            "name": "eth0",
        }
    ]
    assert body["beparams"] == {"vcpus": 4, "maxmem": 256}
    assert body["osparams"] == {"dhcp": "yes"} and body["start"] is True
    assert (body["source_handshake"], body["source_x509_ca"]) == ([0, "hmac", "salt"], "signed pem")
    assert (body["source_instance_name"], body["compress"]) == ("a.example.com", "zstd")
    assert body["ip_check"] is False and body["os"] == "debootstrap+default"
    assert body["name_check"] is True  # as Ganeti's; --no-name-check (Corral's) turns it off
    unchecked = creation_body(InstanceMove("a", "a", name_check=False), INSTANCE, EXPINFO)
    assert unchecked["name_check"] is False
    too_many = InstanceMove("a", "a", nics=[{}, {}])
    with pytest.raises(errors.OpPrereqError, match="Can not create new NICs"):
        creation_body(too_many, INSTANCE, EXPINFO)


def test_job_results() -> None:
    assert job_result({"status": "success", "opresult": [[True, [True]]]}, 1) == [[True, [True]]]
    failed = {
        "status": "error",
        "opstatus": ["success", "error"],
        "opresult": [None, ["OpPrereqError", ["No free nodes", "temp_insufficient_resources"]]],
    }
    with pytest.raises(JobFailed) as info:
        job_result(failed, 7)
    assert isinstance(info.value.error, errors.OpPrereqError)
    assert info.value.error.args[1] == "temp_insufficient_resources"
    assert error_text(info.value) == "No free nodes"
    with pytest.raises(JobFailed, match="Job 8 was canceled"):
        job_result({"status": "canceled", "opstatus": ["canceled"], "opresult": [None]}, 8)


def test_password_file(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("s3cret\n\n")
    assert read_password(str(path)) == "s3cret"
    path.write_text("one\ntwo\n")
    with pytest.raises(errors.GenericError, match="Too many lines"):
        read_password(str(path))
    path.write_text("")
    with pytest.raises(errors.GenericError, match="No data"):
        read_password(str(path))
