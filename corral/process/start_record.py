"""How a daemon was started, kept so that it can be started again the same way.

Every daemon writes its record when it takes its pid file: the command line it
runs (interpreter and all), the environment variables that shape it (the
root, the module path, Corral's test knobs) and whether a service manager
runs it.  ``ganeti-watcher`` starts a dead daemon from it (Ganeti's
``daemon-util check-and-start``), so the daemon comes back exactly as it was
started: by ``gnt-cluster init``, by an operator's ``corral-noded -b ADDRESS``
or by a unit file.  The record lives in the data directory: it outlasts a
reboot, when the watcher is what brings noded back where nothing else does.

Stdlib only: the watcher reads it and must start fast.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

    from corral.paths import Paths

# Variables a daemon's behaviour depends on besides its command line.
_KEPT_ENV = ("PYTHONPATH",)
_KEPT_ENV_PREFIX = "CORRAL_"
# Set by systemd in every service it runs: such a daemon is systemd's to restart.
_SYSTEMD_MARK = "INVOCATION_ID"
SYSTEMD = "systemd"


class StartRecord(NamedTuple):
    """A daemon's command line, its environment and its service manager (or None)."""

    argv: list[str]
    env: dict[str, str]
    supervisor: str | None


def own_command(drop: tuple[str, ...] = ()) -> list[str]:
    """This process's command line, less the options ``drop`` (long options
    that take a value; abbreviations and ``--opt=value`` too): what starts it again."""
    args = list(sys.orig_argv[1:])
    kept: list[str] = []
    skip_value = False
    for index, arg in enumerate(args):
        if skip_value:
            skip_value = False
            continue
        if arg == "--":  # what follows are arguments, not options
            kept += args[index:]
            break
        option, has_value, _ = arg.partition("=")
        if len(option) > 2 and any(name.startswith(option) for name in drop):
            skip_value = not has_value
            continue
        kept.append(arg)
    return [sys.executable, *kept]


def write(paths: Paths, name: str, argv: list[str]) -> None:
    """Record how the daemon ``name`` was started (by the daemon itself)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key in _KEPT_ENV or key.startswith(_KEPT_ENV_PREFIX)
    }
    supervisor = SYSTEMD if os.environ.get(_SYSTEMD_MARK) else None
    data = {"argv": argv, "env": env, "supervisor": supervisor}
    from corral.fileio import atomic_write  # tempfile: not for the watcher's start

    atomic_write(record_path(paths, name), json.dumps(data).encode(), mode=0o600)


def read(paths: Paths, name: str) -> StartRecord | None:
    """The record of ``name``, or None when there is none or it is unreadable."""
    try:
        data = json.loads(record_path(paths, name).read_text())
        argv, env, supervisor = data["argv"], data["env"], data["supervisor"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return None
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        return None
    return StartRecord(argv, env, supervisor if isinstance(supervisor, str) else None)


def record_path(paths: Paths, name: str) -> Path:
    """Where the record of the daemon ``name`` lives."""
    return paths.data_dir / f"{name}.start"
