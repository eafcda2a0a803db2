"""ExtStorage providers in the node's search path, checked as Ganeti checks them.

A provider is a directory named after it (Ganeti's external plugin names:
letters, digits, ``_`` and ``-``) holding executable scripts and a
``parameters.list`` of ``name description`` lines.  The checks only look at the
files: a diagnose never runs a provider's script.  The messages are Ganeti's
(``ExtStorageFromDisk``), with the production paths Ganeti would show.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
from pathlib import Path

from corral.paths import ES_SEARCH_PATH, Paths
from corral.rpc.wire import ExtStorageWire

log = logging.getLogger(__name__)

PARAMETERS_FILE = "parameters.list"
# The provider's files, in the order they are checked: True if required.
# snapshot, open and close came later in Ganeti: they stay optional.
FILES: tuple[tuple[str, bool], ...] = (
    ("attach", True),
    ("create", True),
    ("detach", True),
    ("grow", True),
    ("remove", True),
    ("setinfo", True),
    ("verify", True),
    ("snapshot", False),
    ("open", False),
    ("close", False),
    (PARAMETERS_FILE, True),
)
SCRIPTS = frozenset(name for name, _ in FILES if name != PARAMETERS_FILE)
# Ganeti's EXT_PLUGIN_MASK: what a provider's name may be.
_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


class InvalidProvider(Exception):
    """The directory is not a usable ExtStorage provider; the message says why."""


def _errno_name(err: OSError) -> str:
    """``ENOENT`` for a missing file (Ganeti's ErrnoOrStr)."""
    return errno.errorcode.get(err.errno, str(err)) if err.errno else str(err)


def _check_file(local_dir: Path, shown_dir: str, name: str, required: bool) -> Path | None:
    """The file ``name`` of a provider, None if it is optional and missing."""
    path = local_dir / name
    try:
        st = path.stat()
    except OSError as err:
        if not required:
            return None
        raise InvalidProvider(
            f"File '{name}' under path '{shown_dir}' is missing ({_errno_name(err)})"
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidProvider(f"File '{name}' under path '{shown_dir}' is not a regular file")
    if name in SCRIPTS and not st.st_mode & stat.S_IXUSR:
        raise InvalidProvider(f"File '{name}' under path '{shown_dir}' is not executable")
    return path


def _parameters(path: Path, shown: str) -> list[list[str]]:
    """``[name, description]`` per line of ``parameters.list``.

    A line with a name alone has an empty description; an empty line is an
    error (Ganeti would accept it, then fail on it in ``gnt-storage info``).
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise InvalidProvider(
            f"Error while reading the EXT parameters file at {shown}: {_errno_name(err)}"
        ) from None
    params = []
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split(None, 1)
        if not parts:
            raise InvalidProvider(f"Line {number} of the EXT parameters file at {shown} is empty")
        params.append([parts[0], parts[1] if len(parts) > 1 else ""])
    return params


def check_provider(local_dir: Path, shown_dir: str) -> list[list[str]]:
    """Check the provider in ``local_dir`` (``shown_dir`` in messages); its
    parameters, or InvalidProvider with the reason."""
    name = local_dir.name
    if not _NAME_RE.match(name) or not local_dir.is_dir():
        raise InvalidProvider(
            f"Directory for External Storage Provider {name} not found in search path"
        )
    found = {
        filename: _check_file(local_dir, shown_dir, filename, required)
        for filename, required in FILES
    }
    params_file = found[PARAMETERS_FILE]
    assert params_file is not None  # required: _check_file raised otherwise
    return _parameters(params_file, f"{shown_dir}/{PARAMETERS_FILE}")


def _entry(local_dir: Path, shown_dir: str) -> ExtStorageWire:
    try:
        params = check_provider(local_dir, shown_dir)
    except InvalidProvider as err:
        return ExtStorageWire(
            name=local_dir.name, path=shown_dir, valid=False, diagnose=str(err), parameters=[]
        )
    return ExtStorageWire(
        name=local_dir.name, path=shown_dir, valid=True, diagnose="", parameters=params
    )


def diagnose(paths: Paths) -> list[ExtStorageWire]:
    """Every visible entry of every directory of the search path, as a provider
    (valid or not, with the reason); a name in several directories appears
    once per directory, in search path order."""
    out = []
    for shown_base in ES_SEARCH_PATH:
        base = paths.from_wire(shown_base)
        try:
            names = sorted(n for n in os.listdir(base) if not n.startswith("."))
            if os.path.ismount(base):  # its lost+found is the filesystem's
                names = [n for n in names if n != "lost+found"]
        except FileNotFoundError:
            continue
        except OSError as err:
            log.error("Cannot list the ExtStorage directory %s: %s", base, err)
            continue
        out += [_entry(base / name, f"{shown_base}/{name}") for name in names]
    return out
