"""The RAPI users file, in Ganeti's format, and HTTP Basic password checks.

Each line is ``<user> <password> [option,option...]``; blank lines and ``#``
comments are ignored.  A password is plain text (not starting with ``{``),
``{cleartext}<password>`` or ``{HA1}<md5 hex of "user:Ganeti Remote API:password">``
(RFC 2617's H(A1)); scheme names are case-insensitive.

:class:`UsersFile` re-reads the file whenever it changes, so an administrator
edits it without restarting the daemon.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import os
import stat
from dataclasses import dataclass

REALM = "Ganeti Remote API"

_CLEARTEXT = "{CLEARTEXT}"
_HA1 = "{HA1}"

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class User:
    """One user of the users file: name, stored password (with scheme) and options."""

    name: str
    password: str
    options: frozenset[str]


def parse_users(text: str) -> dict[str, User]:
    """The users listed in ``text``, by name; a later line for a name wins, as in Ganeti."""
    users: dict[str, User] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 2:
            _log.warning("Ignoring non-comment line with less than two fields in the users file")
            continue
        options = parts[2].split(",") if len(parts) == 3 else []
        users[parts[0]] = User(
            name=parts[0],
            password=parts[1],
            options=frozenset(opt.strip() for opt in options if opt.strip()),
        )
    return users


def _same(given: str, expected: str) -> bool:
    """Constant-time string equality (the time does not tell how much matched)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def password_matches(user: User, password: str) -> bool:
    """Whether ``password``, as sent by the client, is ``user``'s password.

    An empty password never matches (Ganeti's accepts one that the file gives
    as ``{cleartext}`` alone): a line left unfinished opens no account.
    """
    if not password:
        return False
    expected = user.password
    if not expected.startswith("{"):
        expected = _CLEARTEXT + expected
    end = expected.find("}", 1)
    if end <= 1:  # "{}" or no closing brace: no scheme name at all
        _log.warning("Invalid scheme in password for user '%s'", user.name)
        return False
    scheme = expected[: end + 1].upper()
    stored = expected[end + 1 :]
    if scheme == _CLEARTEXT:
        return _same(password, stored)
    if scheme == _HA1:
        digest = hashlib.md5(f"{user.name}:{REALM}:{password}".encode()).hexdigest()
        return _same(digest, stored.lower())
    _log.warning("Unknown scheme '%s' in password for user '%s'", scheme, user.name)
    return False


# What identifies one version of the file; any change means "read it again".
_Key = tuple[int, int, int, int] | str


def _key_of(st: os.stat_result) -> _Key:
    return (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)


class UsersFile:
    """The users file at ``name`` (relative to the directory ``dir_fd`` when given).

    The daemon opens the directory before dropping root and passes its
    descriptor, so the file stays readable when the daemon's user may not
    search the directory's parents.
    """

    def __init__(self, name: str, dir_fd: int | None = None) -> None:
        self._name = name
        self._dir_fd = dir_fd
        self._key: _Key | None = None  # None: never read
        self._users: dict[str, User] = {}

    def get(self, username: str) -> User | None:
        """The user called ``username``, after re-reading the file if it changed."""
        self._refresh()
        return self._users.get(username)

    def reload(self) -> None:
        """Read the file again even if it looks unchanged (on SIGHUP, as Ganeti)."""
        self._key = None
        self._refresh()

    def _refresh(self) -> None:
        try:
            key: _Key = _key_of(os.stat(self._name, dir_fd=self._dir_fd))
        except OSError as err:
            key = f"error {err.errno}"
        if key != self._key:
            self._read(key)

    def _read(self, stat_key: _Key) -> None:
        """Read and parse the file; on any failure there are no users (fail closed)."""
        _log.info("Reading users file at %s", self._name)
        self._users = {}
        try:
            # O_NONBLOCK: a FIFO put there must not hang the daemon
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
            fd = os.open(self._name, flags, dir_fd=self._dir_fd)
        except OSError as err:
            self._key = stat_key
            if err.errno == errno.ENOENT:
                _log.warning("No users file at %s", self._name)
            else:
                _log.warning("Error while reading %s: %s", self._name, err.strerror)
            return
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(fd)
            # The key of what is actually read: a rewrite after this is seen next time.
            self._key = _key_of(st)
            if not stat.S_ISREG(st.st_mode):
                _log.warning("Error while reading %s: not a regular file", self._name)
                return
            try:
                text = handle.read().decode("utf-8")
            except (OSError, UnicodeDecodeError) as err:
                _log.error("Error while reading %s: %s", self._name, err)
                return
        self._users = parse_users(text)
