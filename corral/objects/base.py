"""Common fields of every configuration object."""

from __future__ import annotations

import time
import uuid as uuidlib
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


def new_uuid() -> str:
    return str(uuidlib.uuid4())


class ConfigObject(BaseModel):
    """An object stored as one row: uuid, serial number, times and tags."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    # Name of the config store table holding objects of this kind.
    TABLE: ClassVar[str] = ""

    uuid: str = Field(default_factory=new_uuid)
    name: str
    serial_no: int = 1
    ctime: float = Field(default_factory=time.time)
    mtime: float = Field(default_factory=time.time)
    tags: list[str] = Field(default_factory=list)

    def copy_for_update(self) -> ConfigObject:
        """A deep copy to change inside a config transaction."""
        return self.model_copy(deep=True)
