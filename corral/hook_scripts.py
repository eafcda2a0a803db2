"""Which hook scripts a hooks directory holds, by Ganeti's run-parts rules.

Only names matching ``^[a-zA-Z0-9_-]+$`` that are executable regular files
(symlinks to them count) run, in Python string order.  noded runs them
(:mod:`corral.node.handlers.hooks`); masterd, which runs on the master node,
looks first whether that node has any, and asks noded only then.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

HOOK_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


def hooks_subdir(hpath: str, phase: str) -> str:
    """The directory of one operation's hooks in one phase (``<hpath>-<phase>.d``)."""
    return f"{hpath}-{phase}.d"


def runnable_hooks(directory: Path) -> list[Path]:
    """The scripts of a hooks directory that run, in the order they run."""
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    scripts = []
    for name in names:
        path = directory / name
        if not HOOK_NAME_RE.match(name):
            continue
        try:
            mode = path.stat().st_mode  # follows symlinks
        except OSError:
            continue
        if stat.S_ISREG(mode) and os.access(path, os.X_OK):
            scripts.append(path)
    return scripts
