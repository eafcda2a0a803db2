"""The cidata config drive, read back with pycdlib: label, names, contents, no secret."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pycdlib

from corral.metad.configdrive import VOLUME_LABEL, build_iso
from corral.metad.trees import nocloud_files
from tests.helpers.metad import PRIVATE_VALUE, SECRET_VALUE, sample


def read_back(image: bytes) -> pycdlib.PyCdlib:
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(image))
    return iso


def file_of(iso: pycdlib.PyCdlib, **where: str) -> bytes:
    out = io.BytesIO()
    iso.get_file_from_iso_fp(out, **where)
    return out.getvalue()


def test_the_drive_is_labelled_cidata_in_every_descriptor() -> None:
    iso = read_back(build_iso(sample()))
    assert iso.pvd.volume_identifier.decode().rstrip() == VOLUME_LABEL
    assert iso.joliet_vd is not None
    assert iso.joliet_vd.volume_identifier.decode("utf-16-be").rstrip() == VOLUME_LABEL
    iso.close()


def test_the_drive_holds_nocloud_s_files_under_their_names() -> None:
    meta = sample()
    iso = read_back(build_iso(meta))
    expected = nocloud_files(meta)
    rock_ridge = {
        child.rock_ridge.name().decode(): child
        for child in iso.list_children(rr_path="/")
        if child.rock_ridge is not None and not child.is_dot() and not child.is_dotdot()
    }
    assert set(rock_ridge) == set(expected)
    for name, data in expected.items():
        assert file_of(iso, rr_path=f"/{name}") == data
        assert file_of(iso, joliet_path=f"/{name}") == data
    assert meta.instance_id.encode() in expected["meta-data"]
    iso.close()


def test_no_secret_and_no_os_parameter_on_the_drive() -> None:
    image = build_iso(sample(installing=True))
    assert SECRET_VALUE.encode() not in image
    assert SECRET_VALUE.encode("utf-16-be") not in image
    assert PRIVATE_VALUE.encode() not in image


def test_blkid_sees_what_cloud_init_s_ds_identify_looks_for(tmp_path: Path) -> None:
    # ds-identify finds NoCloud by blkid's TYPE and LABEL of a filesystem.
    blkid = shutil.which("blkid") or "/usr/sbin/blkid"
    image = tmp_path / "cidata.iso"
    image.write_bytes(build_iso(sample()))
    out = subprocess.run([blkid, "-p", "-o", "export", str(image)], capture_output=True, text=True)
    fields = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert (fields.get("TYPE"), fields.get("LABEL")) == ("iso9660", VOLUME_LABEL), out
