"""Ganeti 3.0.2's own tools and library, run against a Corral cluster.

Debian's ``ganeti-3.0`` package is fetched with ``apt-get download`` and
unpacked with ``dpkg -x`` into ``.cache/ganeti-3.0`` (never installed: that
would start Ganeti's daemons).  Its paths are compiled in (``/var/lib/ganeti``,
``/var/run/ganeti``, ``/var/log/ganeti``), so each run happens in a private
mount namespace (``unshare -m``) where those directories are bind mounts of
the Corral root's.  The host's ``/var/lib``, ``/run`` and ``/var/log`` get a
throw-away overlay inside the namespace first, so that the mount points can be
made without changing the host.

Typical use::

    tree = ganeti_tree()                          # fetched and unpacked once
    out = run_ganeti(cl.paths.root, ["gnt-job", "list"])
    out = run_ganeti_python(cl.paths.root, "print(luxi.Client().QueryClusterInfo())")
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.helpers.cluster import Result
from tests.helpers.noded import REPO_ROOT

PACKAGE = "ganeti-3.0"
VERSION = "3.0.2"
CACHE = REPO_ROOT / ".cache" / PACKAGE
SYSTEM_PYTHON = "/usr/bin/python3"
# The Debian packages Ganeti's Python code imports (the package's Depends).
PYTHON_DEPS = (
    "python3-simplejson",
    "python3-pyparsing",
    "python3-openssl",
    "python3-pyinotify",
    "python3-pycurl",
    "python3-paramiko",
    "python3-bitarray",
    "python3-psutil",
)
# Directories Ganeti has compiled in, and where they are under a Corral root.
_MOUNTS = (
    ("/var/lib/ganeti", "var/lib/ganeti"),
    ("/run/ganeti", "var/run/ganeti"),
    ("/var/log/ganeti", "var/log/ganeti"),
)
_OVERLAID = ("/var/lib", "/run", "/var/log")


class GanetiUnavailable(RuntimeError):
    """Ganeti's package could not be fetched or run: a failure, never a skip."""


def ganeti_tree() -> Path:
    """The unpacked ``/usr/share/ganeti/3.0`` of Debian's package (fetched once)."""
    tree = CACHE / "root" / "usr" / "share" / "ganeti" / "3.0"
    if (tree / "ganeti" / "__init__.py").is_file():
        return tree
    CACHE.mkdir(parents=True, exist_ok=True)
    debs = sorted(CACHE.glob(f"{PACKAGE}_{VERSION}-*_all.deb"))
    if not debs:
        try:
            _run_checked(["apt-get", "download", PACKAGE], cwd=CACHE)
        except GanetiUnavailable:  # a fresh machine may have no package lists yet
            _run_checked(["apt-get", "update", "-qq"])
            _run_checked(["apt-get", "download", PACKAGE], cwd=CACHE)
        debs = sorted(CACHE.glob(f"{PACKAGE}_{VERSION}-*_all.deb"))
        if not debs:
            found = [p.name for p in CACHE.glob("*.deb")]
            raise GanetiUnavailable(
                f"apt-get download {PACKAGE} did not give version {VERSION} (got {found})"
            )
    staging = Path(tempfile.mkdtemp(dir=CACHE))
    _run_checked(["dpkg", "-x", str(debs[-1]), str(staging)])
    shutil.rmtree(CACHE / "root", ignore_errors=True)
    staging.rename(CACHE / "root")
    return tree


def check_python_deps() -> None:
    """Fail clearly when Debian's Python lacks a module Ganeti imports."""
    modules = "simplejson, pyparsing, OpenSSL, pyinotify, pycurl, paramiko, bitarray, psutil"
    proc = subprocess.run(
        [SYSTEM_PYTHON, "-c", f"import {modules}"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise GanetiUnavailable(
            f"{SYSTEM_PYTHON} cannot import Ganeti's dependencies ({proc.stderr.strip()});"
            f" install {' '.join(PYTHON_DEPS)} (scripts/test.sh does)"
        )


def _run_checked(argv: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise GanetiUnavailable(f"{shlex.join(argv)} failed: {proc.stderr.strip()}")


def namespace_command(root: Path, command: list[str], work: Path) -> str:
    """A shell command running ``command`` where Ganeti's compiled-in paths are
    the root's (``work``: an empty directory for the overlays' scratch space)."""
    lines = ["set -e"]
    for index, directory in enumerate(_OVERLAID):
        upper, scratch = work / f"upper{index}", work / f"work{index}"
        lines += [
            f"mkdir -p {upper} {scratch}",
            f"mount -t overlay overlay -o lowerdir={directory},upperdir={upper},"
            f"workdir={scratch} {directory}",
        ]
    for target, source in _MOUNTS:
        lines += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(root / source))} {target}"]
    lines.append("exec " + shlex.join(command))
    return "exec unshare -m --propagation private sh -c " + shlex.quote("\n".join(lines))


def _environment(tree: Path, extra: dict[str, str] | None) -> dict[str, str]:
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "TZ": os.environ.get("TZ", "UTC"),
        "PYTHONPATH": str(tree),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra or {})
    return env


def _run_in_tree(
    argv: list[str], stdin: str | None, env: dict[str, str] | None, timeout: float
) -> Result:
    """Run ``argv`` from Ganeti's tree, with its library importable."""
    tree = ganeti_tree()
    proc = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        cwd=tree,
        env=_environment(tree, env),
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def run_in_namespace(
    root: Path,
    command: list[str],
    *,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Result:
    """Run ``command`` where Ganeti's compiled-in paths are the root's."""
    with tempfile.TemporaryDirectory(prefix="ganeti-ns-") as work:
        shell = ["sh", "-c", namespace_command(root, command, Path(work))]
        return _run_in_tree(shell, stdin, env, timeout)


def run_ganeti(
    root: Path, argv: list[str], *, stdin: str | None = None, timeout: float = 120
) -> Result:
    """Run Ganeti 3.0.2's ``gnt-*`` command ``argv`` against the cluster in ``root``."""
    tree = ganeti_tree()
    return run_in_namespace(
        root, [SYSTEM_PYTHON, str(tree / argv[0]), *argv[1:]], stdin=stdin, timeout=timeout
    )


def run_ganeti_python(root: Path, code: str, *, timeout: float = 120) -> Result:
    """Run Python ``code`` with Ganeti's library importable (``luxi``, ``errors``,
    ``serializer``, ``opcodes`` and ``constants`` already imported)."""
    prelude = "from ganeti import luxi, errors, serializer, opcodes, constants\n"
    return run_in_namespace(root, [SYSTEM_PYTHON, "-c", prelude + code], timeout=timeout)


def ganeti_library(
    code: str,
    *,
    stdin: str | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> Result:
    """Run Python ``code`` with Ganeti's library importable, outside any cluster
    (for facts such as opcode declarations), with ``env`` added to its environment."""
    return _run_in_tree([SYSTEM_PYTHON, "-c", code], stdin, env, timeout)
