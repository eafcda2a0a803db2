"""The OS parameters of design-os that Corral itself acts on, not the OS
scripts: an image written onto disk 0 and a personalization package unpacked
over the installed filesystem.

- ``os-image``: an absolute path on the primary node or an http(s) URL;
- ``os-package``: an http(s) URL of a ``.tar.gz``/``.tgz`` archive (stored
  with the instance, so it must not hold credentials);
- ``os-package-user``, ``os-package-password``: basic-auth credentials for
  ``os-package``, secret parameters only (given to one job, never stored).

No OS definition needs to declare them.  Shared by masterd (checks) and
noded (fetching): stdlib only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from corral import constants as C
from corral import errors
from corral.osdef import install_settings
from corral.osdef.guest_settings import SETTINGS
from corral.osdef.spec import Private
from corral.rpc.calls_osmedia import PackageWire

OS_IMAGE = "os-image"
OS_PACKAGE = "os-package"
OS_PACKAGE_USER = "os-package-user"
OS_PACKAGE_PASSWORD = "os-package-password"
# Parameter → whether it may be given only as a secret (credentials).
RESERVED: Mapping[str, bool] = {
    OS_IMAGE: False,
    OS_PACKAGE: False,
    OS_PACKAGE_USER: True,
    OS_PACKAGE_PASSWORD: True,
}
URL_SCHEMES = ("http", "https")
PACKAGE_SUFFIXES = (".tar.gz", ".tgz")


def is_url(text: str) -> bool:
    """Whether ``text`` is an http(s) URL (Ganeti's IsUrl, without ftp)."""
    parts = urlsplit(text)
    return parts.scheme in URL_SCHEMES and bool(parts.netloc)


def declared_elsewhere(names: list[str]) -> list[str]:
    """``names`` without Corral's own (which no OS needs to declare): these,
    the config drive's settings (:mod:`corral.osdef.guest_settings`) and the
    install modes' (:mod:`corral.osdef.install_settings`)."""
    return [
        name
        for name in names
        if name not in RESERVED and name not in SETTINGS and not install_settings.reserved(name)
    ]


def without_credentials(secret: Mapping[str, Any]) -> dict[str, Any]:
    """The secret parameters the OS scripts get: the package's credentials are
    Corral's alone (fewer places to hold them)."""
    return {key: value for key, value in secret.items() if not RESERVED.get(key)}


def check_image(
    image: str | None, what: str = "OS image must be an absolute path or a URL"
) -> str | None:
    """The image, checked as Ganeti's CheckOSImage (None: no image); ``what``
    starts the error (Ganeti's words differ for the install image)."""
    if image is None:
        return None
    if not (is_url(image) or os.path.isabs(image)):
        raise errors.OpPrereqError(
            f"{what} (got {image!r}: give a path on the node or an http(s) URL)",
            C.ECODE_INVAL,
        )
    if is_url(image) and urlsplit(image).username is not None:
        raise errors.OpPrereqError(
            "The OS image URL must not hold credentials (it is stored with the instance)",
            C.ECODE_INVAL,
        )
    return image


@dataclass(frozen=True)
class PackageSource:
    """Where a personalization package comes from: its URL and the basic-auth
    credentials (never stored, never shown: ``repr`` leaves them out)."""

    url: str
    user: str | None = None
    password: str | None = None

    def __repr__(self) -> str:
        return f"PackageSource({self.url!r})"

    def to_wire(self) -> PackageWire:
        """The source as a node call carries it (over mutual TLS)."""
        wire: PackageWire = {"url": self.url}
        if self.user is not None:
            wire["user"] = self.user
        if self.password is not None:
            wire["password"] = self.password
        return wire

    @classmethod
    def from_wire(cls, wire: PackageWire) -> PackageSource:
        """The source a node call carried."""
        return cls(wire["url"], wire.get("user"), wire.get("password"))


def check_package(
    public: Mapping[str, Any], private: Mapping[str, Any], secret: Mapping[str, Any]
) -> PackageSource | None:
    """The personalization package the parameters ask for (None: none),
    refusing a malformed URL and credentials given at a visibility that is stored."""
    for name, secret_only in RESERVED.items():
        if secret_only and (name in public or name in private):
            raise errors.OpPrereqError(
                f"The OS parameter '{name}' is a credential: give it only with"
                " --os-parameters-secret (it is never stored)",
                C.ECODE_INVAL,
            )
    url = private.get(OS_PACKAGE, public.get(OS_PACKAGE))
    creds = [secret.get(OS_PACKAGE_USER), secret.get(OS_PACKAGE_PASSWORD)]
    if url is None:
        if any(value is not None for value in creds):
            raise errors.OpPrereqError(
                f"'{OS_PACKAGE_USER}' and '{OS_PACKAGE_PASSWORD}' need '{OS_PACKAGE}'",
                C.ECODE_INVAL,
            )
        return None
    url = str(url)
    parts = urlsplit(url)
    if not is_url(url) or not parts.path.endswith(PACKAGE_SUFFIXES):
        raise errors.OpPrereqError(
            f"The personalization package must be an http(s) URL ending in .tar.gz"
            f" or .tgz (got {url!r})",
            C.ECODE_INVAL,
        )
    if parts.username is not None:
        raise errors.OpPrereqError(
            "The personalization package URL must not hold credentials (it is stored);"
            f" give them as the secret parameters '{OS_PACKAGE_USER}' and"
            f" '{OS_PACKAGE_PASSWORD}'",
            C.ECODE_INVAL,
        )
    user, password = (None if value is None else _reveal(value) for value in creds)
    if (user is None) != (password is None):
        raise errors.OpPrereqError(
            f"Give both '{OS_PACKAGE_USER}' and '{OS_PACKAGE_PASSWORD}', or neither",
            C.ECODE_INVAL,
        )
    return PackageSource(url, user, password)


def _reveal(value: Any) -> str:
    return value.reveal() if isinstance(value, Private) else str(value)
