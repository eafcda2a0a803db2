"""The "lock" resource: every held or awaited lock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.master.resources.common import Names
from corral.query.fields import Field, FieldSet

if TYPE_CHECKING:
    from corral.services.context import Master

FIELDS = FieldSet(
    [
        Field("name", "Name", C.QFT_OTHER, "Lock name", lambda r: r["name"]),
        Field(
            "mode",
            "Mode",
            C.QFT_OTHER,
            "Mode in which the lock is currently acquired (exclusive or shared)",
            lambda r: r["mode"],
        ),
        Field("owner", "Owner", C.QFT_OTHER, "Current lock owner(s)", lambda r: r["owner"]),
        Field(
            "pending", "Pending", C.QFT_OTHER, "Jobs waiting for the lock", lambda r: r["pending"]
        ),
    ]
)


async def items(master: Master, needs: set[str], names: Names) -> list[Any]:
    return master.locks.info()
