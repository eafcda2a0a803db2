"""design-os's install modes, carried as public OS parameters that no OS
definition declares (as ``os-image``): Ganeti's opcodes have no field for
them, and an instance's OS parameters are stored with it for reinstalls.

- ``enable-safe-install``: ``yes`` runs the OS create script in the helper VM
  (design-os's ``install`` mode), ``no`` on the node (refused for an OS that
  is not trusted); unset, where the OS's trust puts it.
- ``install-hv-<name>``: the hypervisor parameter ``<name>`` of the first
  start after an install only (``self_install``: a boot medium, a boot
  order), e.g. ``install-hv-boot_order=cdrom``.

They are the install's, not the OS scripts': the scripts' environment leaves
them out.  Stdlib only (masterd and noded).
"""

from __future__ import annotations

from corral import constants as C
from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SAFE_INSTALL = "enable-safe-install"
SAFE_INSTALL_VALUES = {"yes": True, "no": False}
HV_PREFIX = "install-hv-"


def reserved(name: str) -> bool:
    """Whether ``name`` is one of these settings (no OS declares it)."""
    return name == SAFE_INSTALL or name.startswith(HV_PREFIX)


def check(public: Mapping[str, Any], private: Mapping[str, Any], secret: Mapping[str, Any]) -> None:
    """Refuse a setting that is not public or has a bad value (one line saying what to do)."""
    for where, values in (("private", private), ("secret", secret)):
        for name in values:
            if reserved(name):
                raise errors.OpPrereqError(
                    f"The OS parameter '{name}' cannot be {where}; give it with --os-parameters",
                    C.ECODE_INVAL,
                )
    value = public.get(SAFE_INSTALL)
    if value is not None and str(value) not in SAFE_INSTALL_VALUES:
        raise errors.OpPrereqError(
            f"The OS parameter '{SAFE_INSTALL}' must be yes or no (got {str(value)!r})",
            C.ECODE_INVAL,
        )


def safe_install(public: Mapping[str, Any]) -> bool | None:
    """What ``enable-safe-install`` asks for (None: not given)."""
    value = public.get(SAFE_INSTALL)
    return None if value is None else SAFE_INSTALL_VALUES[str(value)]


def install_hvparams(public: Mapping[str, Any]) -> dict[str, str]:
    """The ``install-hv-*`` settings as hypervisor parameters (their text)."""
    return {
        name.removeprefix(HV_PREFIX): str(value)
        for name, value in public.items()
        if name.startswith(HV_PREFIX)
    }


def without_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` without these settings: what the OS scripts get."""
    return {key: value for key, value in params.items() if not reserved(key)}
