"""The 2.2 design's KVM security: whom QEMU runs as, and its chroot.

QEMU 7.2 opens everything it is given (disks, kernel, initrd, sockets, the
taps' files the node passes) before it drops root for ``-runas`` and enters
``-chroot``: the unprivileged process needs no access of its own.
"""

from __future__ import annotations

import contextlib
import pwd
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from corral import errors
from corral.node.uidpool import UidPool
from corral.paths import Paths

MODEL_NONE = "none"
MODEL_USER = "user"
MODEL_POOL = "pool"


@contextlib.asynccontextmanager
async def runas(
    paths: Paths, name: str, hvp: Mapping[str, Any]
) -> AsyncIterator[tuple[str | None, int | None]]:
    """``(-runas value, pool uid)`` for the block that starts QEMU.

    A pool uid is taken for the block and goes back to the pool if it fails;
    once QEMU runs under it, the process keeps it taken.
    """
    model = hvp.get("security_model") or MODEL_NONE
    if model == MODEL_NONE:
        yield None, None
    elif model == MODEL_USER:
        yield user(str(hvp.get("security_domain") or "")), None
    elif model == MODEL_POOL:
        async with UidPool(paths).running_with(name) as uid:
            yield f"{uid}:{uid}", uid
    else:
        raise errors.OpExecError(f"Unknown security_model '{model}'")


def user(domain: str) -> str:
    """The user of ``security_model=user``; OpExecError if unknown here."""
    if not domain:
        raise errors.OpExecError("security_model=user needs a security_domain (a user name)")
    try:
        pwd.getpwnam(domain)
    except KeyError:
        raise errors.OpExecError(
            f"Unknown user '{domain}' (security_domain) on this node; create it"
            " or change security_domain"
        ) from None
    return domain


def numeric(runas: str | None) -> str | None:
    """``-runas`` as ``uid:gid`` (a QEMU in its own mount namespace has no
    user database to look a name up in)."""
    if runas is None or ":" in runas:
        return runas
    entry = pwd.getpwnam(runas)
    return f"{entry.pw_uid}:{entry.pw_gid}"


def ruled_uid(hvp: Mapping[str, Any], pool_uid: int | None) -> int | None:
    """The uid the network rules must cover for a QEMU started with ``hvp``
    (:mod:`corral.node.netrules`); None when it needs none: the rules are
    off (``use_network_rules``) or QEMU runs as root (``security_model=none``)."""
    if not hvp.get("use_network_rules", True):
        return None
    model = hvp.get("security_model") or MODEL_NONE
    if model == MODEL_POOL:
        return pool_uid
    if model == MODEL_USER:
        return pwd.getpwnam(user(str(hvp.get("security_domain") or ""))).pw_uid or None
    return None


def prepare_chroot(path: Path) -> Path:
    """The empty directory for QEMU's ``-chroot``, root's alone: QEMU, once
    unprivileged, can write nothing into it (a dead guest's was removed)."""
    path.mkdir(mode=0o700)
    return path
