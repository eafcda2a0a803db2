"""The OS script environment, variable by variable, against Ganeti's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.osdef.definition import OSDefinition
from corral.osdef.env import disk_transfer_env, instance_env, os_core_env, param_var
from corral.osdef.spec import OsSpec

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "ganeti-3.0.2-env"


def _reference(name: str) -> dict[str, str]:
    out = {}
    for line in (REFERENCE / name).read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


def _osdef(api: tuple[int, ...] = (20,), variants: tuple[str, ...] = ("default",)) -> OSDefinition:
    return OSDefinition(
        "envdump", Path("/srv/ganeti/os/envdump"), list(api), list(variants), [("greeting", "")]
    )


INSTANCE = {
    "name": "envinst1.ganeti.test",
    "uuid": "u1",
    "os": "envdump+default",
    "ctime": 1.5,
    "mtime": 2.5,
    "primary_node": "n1",
    "secondary_nodes": [],
    "hypervisor": "fake",
    "beparams": {
        "maxmem": 128,
        "minmem": 128,
        "vcpus": 1,
        "auto_balance": True,
        "always_failover": False,
        "spindle_use": 1,
    },
    "hvparams": {"migration_mode": "live"},
    "disks": [
        {
            "uuid": "d1",
            "size": 64,
            "mode": "rw",
            "name": None,
            "path": "/srv/ganeti/file-storage/envinst1.ganeti.test/x.file.disk0",
            "backend_type": "file:loop",
        }
    ],
    "nics": [
        {
            "mac": "aa:00:00:4c:13:59",
            "uuid": "n1",
            "mode": "bridged",
            "link": "gnt-br0",
            "ip": "198.18.1.10",
            "name": None,
        }
    ],
}


def test_param_names_are_upper_case_with_underscores() -> None:
    assert param_var("secret-token") == "OSP_SECRET_TOKEN"


def test_variant_defaults_to_the_first_listed_and_is_empty_before_api_15() -> None:
    assert os_core_env(_osdef(), OsSpec.public("envdump", {}))["OS_VARIANT"] == "default"
    assert os_core_env(_osdef(api=(10,)), OsSpec.public("envdump", {}))["OS_VARIANT"] == ""
    assert os_core_env(_osdef(variants=()), OsSpec.public("envdump", {}))["OS_VARIANT"] == ""


def test_create_environment_has_the_reference_names_and_values() -> None:
    ref = _reference("os-create.1.env.txt")
    env = instance_env(_osdef(), INSTANCE, OsSpec.public("envdump+default", {"greeting": "hello"}))
    shell_added = {"PWD", "SHLVL", "_"}
    ignored = {"OSP_PRIVATE_NOTE", "OSP_SECRET_TOKEN"}  # parameters of that test only
    assert set(env) == set(ref) - shell_added - ignored
    for key in (
        "OS_API_VERSION",
        "OS_NAME",
        "OS_VARIANT",
        "DEBUG_LEVEL",
        "PATH",
        "HYPERVISOR",
        "DISK_COUNT",
        "DISK_0_ACCESS",
        "DISK_0_SIZE",
        "DISK_0_BACKEND_TYPE",
        "NIC_COUNT",
        "NIC_0_MODE",
        "NIC_0_LINK",
        "NIC_0_BRIDGE",
        "NIC_0_IP",
        "NIC_0_MAC",
        "INSTANCE_OS",
        "INSTANCE_NAME",
        "INSTANCE_BE_maxmem",
        "INSTANCE_BE_auto_balance",
        "INSTANCE_HV_migration_mode",
        "OSP_GREETING",
    ):
        assert env[key] == ref[key], key


@pytest.mark.parametrize(
    ("direction", "reference"),
    [("export", "os-export.1.env.txt"), ("import", "os-import.1.env.txt")],
)
def test_export_and_import_extras(direction: str, reference: str) -> None:
    ref = _reference(reference)
    path = ref[f"{direction.upper()}_DISK_PATH"]
    env = disk_transfer_env({}, direction, 0, path, size_fd=11)
    expected = {k: v for k, v in ref.items() if k.startswith((direction.upper() + "_", "EXP_"))}
    assert env == expected


def test_disk_uri_is_set_only_when_there_is_one() -> None:
    env = disk_transfer_env({}, "export", 1, None, uri="rbd:pool/img")
    assert env == {"EXPORT_INDEX": "1", "EXPORT_DISK_URI": "rbd:pool/img"}
    with pytest.raises(ValueError):
        disk_transfer_env({}, "sideways", 0, "/x")
