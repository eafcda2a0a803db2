"""The directories noded keeps disks in: every disk path it acts on lies inside one.

The master names disks by production path.  Without this check a holder of
the cluster's client certificate could have noded create, grow, remove or
move any file below the node's root, or hand any file to an OS script to
write, as root.  Ganeti's nodes check the same against the cluster's file
storage directories.

Each file-based template has its directories: the one the cluster's ssconf
file names (written by the master) and the default one, which always counts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from corral import errors
from corral import storage_names as N
from corral.paths import Paths

# File-based template → the ssconf key naming the cluster's directory for it,
# and the node's default directory for it.
_DIRS: Mapping[str, tuple[str, Callable[[Paths], Path]]] = {
    N.DT_FILE: ("file_storage_dir", lambda paths: paths.file_storage_dir),
    N.DT_SHARED_FILE: ("shared_file_storage_dir", lambda paths: paths.shared_file_storage_dir),
}
SSCONF_KEYS = {template: key for template, (key, _) in _DIRS.items()}


def template_dirs(paths: Paths, template: str) -> list[Path]:
    """The local directories disks of the file-based ``template`` may lie in:
    the default one, and the cluster's (ssconf) when it is another."""
    dirs = [_DIRS[template][1](paths)]
    try:
        name = paths.ssconf_file(SSCONF_KEYS[template]).read_text().strip()
    except OSError:
        name = ""
    if name.startswith("/") and paths.from_wire(name) not in dirs:
        dirs.append(paths.from_wire(name))
    return dirs


def storage_dirs(paths: Paths) -> list[Path]:
    """Every storage directory of the node (local paths), the default file one first."""
    dirs = [paths.file_storage_dir]
    for template in SSCONF_KEYS:
        dirs += [top for top in template_dirs(paths, template) if top not in dirs]
    return dirs


def _within(path: Path, top: Path, *, strictly: bool) -> bool:
    # Symbolic links are followed: a link inside a directory may point anywhere.
    real, real_top = Path(os.path.realpath(path)), Path(os.path.realpath(top))
    return real.is_relative_to(real_top) and not (strictly and real == real_top)


def storage_path(
    paths: Paths, name: object, *, strictly: bool = True, dirs: list[Path] | None = None
) -> Path:
    """The local path of the production path ``name`` if it lies in a storage directory.

    ``strictly``: inside one (a disk file, an instance's directory); otherwise
    a storage directory itself is accepted too (for its free space).
    ``dirs``: the directories allowed (default: all of the node's).
    OpExecError if the path is not acceptable.
    """
    if not isinstance(name, str) or not name.startswith("/"):
        raise errors.OpExecError(f"Invalid path {name!r}: not an absolute path")
    local = paths.from_wire(name)
    dirs = storage_dirs(paths) if dirs is None else dirs
    if any(_within(local, top, strictly=strictly) for top in dirs):
        return local
    if any(_within(local, top, strictly=False) for top in dirs):
        raise errors.OpExecError(f"Path {name} is a file storage directory, not a path inside one")
    wanted = " or ".join(paths.to_wire(top) for top in dirs)
    raise errors.OpExecError(f"Path {name} is outside the file storage directory {wanted}")
