"""The kvm config drive on the node: the ISO written from the start call's
data (read back with pycdlib), its mode, the options that attach it, no
secret on it, and its removal with the guest's other files."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pycdlib
import pytest

from corral import errors
from corral.metad.configdrive import VOLUME_LABEL
from corral.node.hypervisor.kvm import config_drive
from corral.node.hypervisor.kvm.runtime import Layout
from corral.node.hypervisor.spec import InstanceSpec
from tests.helpers.metad import PRIVATE_VALUE, SECRET_VALUE, USER_DATA, sample

NAME = "inst1.example.com"


def spec_with(record: dict[str, object] | None) -> InstanceSpec:
    wire: dict[str, object] = {"name": NAME, "hypervisor": "kvm", "memory": 128}
    if record is not None:
        wire["config_drive"] = record
    return InstanceSpec(
        name=NAME,
        uuid="",
        hypervisor="kvm",
        os="",
        memory=128,
        vcpus=1,
        hvparams={},
        beparams={},
        wire=wire,
    )


def files_on(image: bytes) -> dict[str, bytes]:
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(image))
    try:
        assert iso.pvd.volume_identifier.decode().rstrip() == VOLUME_LABEL
        out = {}
        for child in iso.list_children(rr_path="/"):
            if child.is_dot() or child.is_dotdot():
                continue
            name = child.rock_ridge.name().decode()
            data = io.BytesIO()
            iso.get_file_from_iso_fp(data, rr_path=f"/{name}")
            out[name] = data.getvalue()
        return out
    finally:
        iso.close()


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    found = Layout(tmp_path / "run")
    found.ensure()
    return found


async def test_the_drive_is_written_root_s_only_and_attached_read_only(layout: Layout) -> None:
    # The record as the master sends it, a secret parameter slipped in: the model drops it.
    meta = sample(NAME, installing=True)
    argv = await config_drive.prepare(layout, spec_with(meta.to_record()))
    path = layout.config_drive(NAME)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert argv == [
        "-drive",
        f"file={path},format=raw,if=none,id=cidata,media=cdrom,readonly=on",
        "-device",
        "ide-cd,drive=cidata,id=cidata-dev",
    ]
    image = path.read_bytes()
    files = files_on(image)
    assert files["user-data"] == USER_DATA
    meta_data = files["meta-data"].decode()
    assert f'local-hostname: "{meta.hostname}"' in meta_data
    assert "instance-id: " in meta_data
    assert '"macaddress": "aa:00:00:00:00:01"' in files["network-config"].decode()
    assert '"10.20.0.5/24"' in files["network-config"].decode()
    for hidden in (SECRET_VALUE, PRIVATE_VALUE):
        assert hidden.encode() not in image
        assert hidden.encode("utf-16-be") not in image


async def test_each_start_builds_it_again_with_a_new_instance_id(layout: Layout) -> None:
    await config_drive.prepare(layout, spec_with(sample(NAME).to_record()))
    first = files_on(layout.config_drive(NAME).read_bytes())["meta-data"]
    changed = sample(NAME, ip="10.20.0.6")
    await config_drive.prepare(layout, spec_with(changed.to_record()))
    second = files_on(layout.config_drive(NAME).read_bytes())["meta-data"]
    assert first != second
    assert f'instance-id: "{changed.instance_id}"' in second.decode()


async def test_no_data_no_drive_and_a_leftover_goes(layout: Layout) -> None:
    await config_drive.prepare(layout, spec_with(sample(NAME).to_record()))
    assert layout.config_drive(NAME).exists()
    assert await config_drive.prepare(layout, spec_with(None)) == []
    assert not layout.config_drive(NAME).exists()


async def test_malformed_data_is_refused_and_writes_nothing(layout: Layout) -> None:
    with pytest.raises(errors.OpExecError, match="Malformed config drive data for"):
        await config_drive.prepare(layout, spec_with({"name": NAME}))
    assert not layout.config_drive(NAME).exists()


async def test_the_drive_goes_with_the_guest_s_other_files(layout: Layout) -> None:
    await config_drive.prepare(layout, spec_with(sample(NAME).to_record()))
    layout.remove(NAME)  # what the hypervisor's cleanup does when the guest stops
    assert not layout.config_drive(NAME).exists()
