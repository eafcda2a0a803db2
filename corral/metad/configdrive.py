"""The ``cidata`` config drive: NoCloud's files on an ISO 9660 image, built in
memory with pycdlib (no mkisofs, no temporary files).

Joliet and Rock Ridge keep the names (``meta-data``, ``network-config``)
intact; cloud-init's ds-identify finds the image by its volume label.  Secret
OS parameters never reach it: NoCloud's files do not carry OS parameters at all,
and the model drops secrets outside installs.
"""

from __future__ import annotations

import io

import pycdlib

from corral.metad.model import InstanceMetadata
from corral.metad.trees import nocloud_files

VOLUME_LABEL = "cidata"


def _iso9660_name(index: int) -> str:
    # ISO 9660 level 1 wants 8.3 upper-case names; Joliet and Rock Ridge carry the real ones.
    return f"/F{index}.;1"


def build_iso(meta: InstanceMetadata) -> bytes:
    """The ``cidata`` ISO image of ``meta``'s NoCloud files."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=VOLUME_LABEL)
    try:
        for index, (name, data) in enumerate(sorted(nocloud_files(meta).items())):
            iso.add_fp(
                io.BytesIO(data),
                len(data),
                _iso9660_name(index),
                rr_name=name,
                joliet_path=f"/{name}",
            )
        out = io.BytesIO()
        iso.write_fp(out)
        return out.getvalue()
    finally:
        iso.close()
