"""Dropping root for good: a daemon started as root becomes an unprivileged user.

corral-rapi opens what it needs as root (certificate, users file directory,
listening socket), then calls :func:`drop_privileges` so a compromised RAPI
process cannot read the cluster's keys, secrets or configuration.
"""

from __future__ import annotations

import ctypes
import os
import pwd

from corral import errors

DEFAULT_RAPI_USER = "gnt-rapi"

_PR_SET_NO_NEW_PRIVS = 38  # from <linux/prctl.h>


def lookup_user(name: str) -> tuple[int, int]:
    """The uid and primary gid of the system user ``name``."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise errors.CommandError(
            f"User '{name}' does not exist; create it with 'useradd --system --user-group"
            f" --no-create-home --shell /usr/sbin/nologin {name}' or run scripts/setup.sh"
        ) from None
    return entry.pw_uid, entry.pw_gid


def drop_privileges(name: str) -> None:
    """Become user ``name`` (with its groups) for good, if running as root.

    Not running as root is fine when already running as ``name``; any other
    user is an error, since the daemon would not run as the configured user.
    """
    uid, gid = lookup_user(name)
    if uid == 0 or gid == 0:
        raise errors.CommandError(
            f"User '{name}' has uid or gid 0; configure an unprivileged user to run as"
        )
    if os.geteuid() != 0:
        if os.getuid() == os.geteuid() == uid:
            return
        raise errors.CommandError(
            f"Cannot become user '{name}' when running as uid {os.geteuid()};"
            f" start the daemon as root or as '{name}'"
        )
    # Groups first: once the uid is dropped, the groups can no longer be changed.
    # initgroups gives the supplementary groups /etc/group lists for the user
    # (e.g. the group allowed to use the luxi socket) and nothing of root's.
    os.initgroups(name, gid)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _forbid_new_privileges()
    _check_dropped(name, uid, gid)


def _forbid_new_privileges() -> None:
    """Make executing a setuid program unable to give privileges back."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise errors.CommandError(f"Cannot set no_new_privs: {os.strerror(err)}")


def _check_dropped(name: str, uid: int, gid: int) -> None:
    """Fail unless root is gone for good: ids changed and becoming root again fails."""
    ids_ok = os.getresuid() == (uid, uid, uid) and os.getresgid() == (gid, gid, gid)
    try:
        os.setuid(0)
    except PermissionError:
        regained = False
    else:
        regained = True
    if regained or not ids_ok:
        raise errors.CommandError(f"Dropping privileges to user '{name}' failed")
    if 0 in os.getgroups():
        raise errors.CommandError(
            f"User '{name}' is a member of group root; remove it from that group"
        )
