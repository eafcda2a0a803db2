"""The directories noded keeps disks in: every disk path it acts on lies inside one.

The master names disks by production path.  Without this check a holder of
the cluster's client certificate could have noded create, grow, remove or
move any file below the node's root, or hand any file to an OS script to
write, as root.  Ganeti's nodes check the same against the cluster's file
storage directories.
"""

from __future__ import annotations

import os
from pathlib import Path

from corral import errors
from corral.paths import Paths

# The ssconf files (written by the master) naming the cluster's storage
# directories; the default file storage directory always counts.
_SSCONF_KEYS = ("file_storage_dir", "shared_file_storage_dir")


def storage_dirs(paths: Paths) -> list[Path]:
    """The node's storage directories (local paths), the default one first."""
    dirs = [paths.file_storage_dir]
    for key in _SSCONF_KEYS:
        try:
            name = paths.ssconf_file(key).read_text().strip()
        except OSError:
            continue
        if name.startswith("/") and paths.from_wire(name) not in dirs:
            dirs.append(paths.from_wire(name))
    return dirs


def _within(path: Path, top: Path, *, strictly: bool) -> bool:
    # Symbolic links are followed: a link inside a directory may point anywhere.
    real, real_top = Path(os.path.realpath(path)), Path(os.path.realpath(top))
    return real.is_relative_to(real_top) and not (strictly and real == real_top)


def storage_path(paths: Paths, name: object, *, strictly: bool = True) -> Path:
    """The local path of the production path ``name`` if it lies in a storage directory.

    ``strictly``: inside one (a disk file, an instance's directory); otherwise
    a storage directory itself is accepted too (for its free space).
    OpExecError if the path is not acceptable.
    """
    if not isinstance(name, str) or not name.startswith("/"):
        raise errors.OpExecError(f"Invalid path {name!r}: not an absolute path")
    local = paths.from_wire(name)
    dirs = storage_dirs(paths)
    if any(_within(local, top, strictly=strictly) for top in dirs):
        return local
    if any(_within(local, top, strictly=False) for top in dirs):
        raise errors.OpExecError(f"Path {name} is a file storage directory, not a path inside one")
    wanted = " or ".join(paths.to_wire(top) for top in dirs)
    raise errors.OpExecError(f"Path {name} is outside the file storage directory {wanted}")
