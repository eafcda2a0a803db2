"""The instance settings of Corral's config drive, carried as OS parameters
that no OS definition declares (as design-os's ``os-image``):

- ``config-drive``: ``yes`` attaches a ``cidata`` ISO to a kvm instance at each
  start (default ``no``); public, it holds nothing to hide;
- ``user-data``: cloud-init's user-data; it may hold secrets, so it is taken
  only as a private parameter.  Not as a secret one either: the drive is built
  again at each start, and secret values are never stored.

Both are the guest's, not the install's: they are kept out of the OS scripts'
environment (a script that never declared them has no use for them, and a
private value given to fewer processes leaks from fewer places).  Shared by
masterd (checks) and noded: stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral import constants as C
from corral import errors
from corral.osdef.spec import Private

CONFIG_DRIVE = "config-drive"
USER_DATA = "user-data"
# Setting → the only visibility it may be given at (and the option giving it).
SETTINGS: Mapping[str, tuple[str, str]] = {
    CONFIG_DRIVE: ("public", "--os-parameters"),
    USER_DATA: ("private", "--os-parameters-private"),
}
CONFIG_DRIVE_VALUES = ("yes", "no")
# cloud-init has no limit of its own on a drive; this keeps the configuration small.
MAX_USER_DATA = 64 * 1024


def _refuse(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, C.ECODE_INVAL)


def check(public: Mapping[str, Any], private: Mapping[str, Any], secret: Mapping[str, Any]) -> None:
    """Refuse a setting given at the wrong visibility or with a bad value
    (OpPrereqError, one line saying what to do)."""
    given = {"public": public, "private": private, "secret": secret}
    for name, (visibility, option) in SETTINGS.items():
        for where, values in given.items():
            if where == visibility or name not in values:
                continue
            why = " (it is never stored, and the drive is rebuilt at each start)"
            raise _refuse(
                f"The OS parameter '{name}' cannot be {where}{why if where == 'secret' else ''};"
                f" give it with {option}"
            )
    drive = public.get(CONFIG_DRIVE)
    if drive is not None and str(drive) not in CONFIG_DRIVE_VALUES:
        raise _refuse(
            f"The OS parameter '{CONFIG_DRIVE}' must be one of"
            f" {', '.join(CONFIG_DRIVE_VALUES)} (got {str(drive)!r})"
        )
    data = private.get(USER_DATA)
    if data is not None and len(reveal(data).encode()) > MAX_USER_DATA:
        raise _refuse(
            f"The OS parameter '{USER_DATA}' is {len(reveal(data).encode())} bytes long;"
            f" at most {MAX_USER_DATA} are allowed"
        )


def reveal(value: Any) -> str:
    """A parameter's value as text, private or not."""
    return value.reveal() if isinstance(value, Private) else str(value)


def config_drive_on(public: Mapping[str, Any]) -> bool:
    """Whether the (filled) public parameters ask for a config drive."""
    return str(public.get(CONFIG_DRIVE, "no")) == "yes"


def without_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without the settings: what the OS scripts get."""
    return {key: value for key, value in params.items() if key not in SETTINGS}
