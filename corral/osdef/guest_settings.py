"""The instance settings of Corral's config drive, carried as OS parameters
that no OS definition declares (as design-os's ``os-image``):

- ``config-drive``: ``yes`` attaches a ``cidata`` ISO to a kvm instance at each
  start (default ``no``); public, it holds nothing to hide;
- ``user-data``: cloud-init's user-data; it may hold secrets, so it is taken
  only as a private parameter.  Not as a secret one either: the drive is built
  again at each start, and secret values are never stored.
- ``ssh-authorized-keys``: the OpenSSH public keys the guest's default user
  accepts, one a line; public (a public key hides nothing).  Served as the
  datasources' own key fields (NoCloud's ``public-keys``, OpenStack's
  ``public_keys``), so a stock image takes them without any user-data.

The config drive and corral-metad serve the last two alike.  All three are
the guest's, not the install's: they are kept out of the OS scripts'
environment (a script that never declared them has no use for them, and a
private value given to fewer processes leaks from fewer places).  Shared by
masterd (checks) and noded: stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral import constants as C
from corral import errors
from corral.osdef.spec import OsParam, Private

CONFIG_DRIVE = "config-drive"
USER_DATA = "user-data"
SSH_KEYS = "ssh-authorized-keys"
# Setting → the only visibility it may be given at (and the option giving it).
SETTINGS: Mapping[str, tuple[str, str]] = {
    CONFIG_DRIVE: ("public", "--os-parameters"),
    USER_DATA: ("private", "--os-parameters-private"),
    SSH_KEYS: ("public", "--os-parameters"),
}
CONFIG_DRIVE_VALUES = ("yes", "no")
# cloud-init has no limit of its own on a drive; this keeps the configuration small.
MAX_USER_DATA = 64 * 1024
MAX_SSH_KEYS = 64


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
    if public.get(SSH_KEYS) is not None:
        _check_ssh_keys(public[SSH_KEYS])
    data = private.get(USER_DATA)
    if data is not None and len(reveal(data).encode()) > MAX_USER_DATA:
        raise _refuse(
            f"The OS parameter '{USER_DATA}' is {len(reveal(data).encode())} bytes long;"
            f" at most {MAX_USER_DATA} are allowed"
        )


def _check_ssh_keys(value: Any) -> None:
    keys = split_keys(reveal(value))
    if len(keys) > MAX_SSH_KEYS:
        raise _refuse(f"The OS parameter '{SSH_KEYS}' has {len(keys)} keys; at most {MAX_SSH_KEYS}")
    for key in keys:
        if len(key.split()) < 2:
            raise _refuse(
                f"The OS parameter '{SSH_KEYS}' holds {key[:40]!r}, which is not an OpenSSH"
                " public key ('TYPE BASE64 [COMMENT]', one a line)"
            )


def split_keys(text: str) -> tuple[str, ...]:
    """The keys of an ``ssh-authorized-keys`` value: its non-empty lines."""
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def user_data(params: Mapping[str, Any]) -> bytes:
    """The user-data among (filled) parameters, b"" without."""
    value = params.get(USER_DATA)
    return b"" if value is None else reveal(value).encode()


def ssh_keys(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The SSH public keys among (filled) parameters."""
    value = params.get(SSH_KEYS)
    return () if value is None else split_keys(reveal(value))


def reveal(value: Any) -> str:
    """A parameter's value as text, private or not."""
    return value.reveal() if isinstance(value, Private | OsParam) else str(value)


def config_drive_on(public: Mapping[str, Any]) -> bool:
    """Whether the (filled) public parameters ask for a config drive."""
    return str(public.get(CONFIG_DRIVE, "no")) == "yes"


def without_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without the settings: what the OS scripts get."""
    return {key: value for key, value in params.items() if key not in SETTINGS}
