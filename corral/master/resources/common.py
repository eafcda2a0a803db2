"""Fields every configuration object has."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.query.fields import Field


def object_fields(get: Any = lambda row: row.obj) -> list[Field]:
    """uuid, ctime, mtime, serial_no and tags of the row's config object."""
    return [
        Field("uuid", "UUID", C.QFT_TEXT, "Object UUID", lambda r: get(r).uuid),
        Field("ctime", "CTime", C.QFT_TIMESTAMP, "Creation timestamp", lambda r: get(r).ctime),
        Field("mtime", "MTime", C.QFT_TIMESTAMP, "Modification timestamp", lambda r: get(r).mtime),
        Field(
            "serial_no",
            "SerialNo",
            C.QFT_NUMBER,
            "Object serial number",
            lambda r: get(r).serial_no,
        ),
        Field("tags", "Tags", C.QFT_OTHER, "Tags", lambda r: sorted(get(r).tags)),
    ]
