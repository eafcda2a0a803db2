"""The checks a node runs for ``gnt-cluster verify`` (the node_verify call).

The master sends, in one call, the checks it wants with their parameters
(named in :mod:`corral.rpc.node_verify`); the node answers each
under the same key.  A check that fails on the node leaves its key out and
puts its message under ``"failures"``, so one broken check does not hide the
others' answers.  Everything here reads files: it runs in a worker thread.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corral import errors
from corral.crypto.cert_check import check_file
from corral.node import netrules
from corral.node.capabilities import disk_template_problem, hypervisor_problem
from corral.node.handlers.files import upload_allowed
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.kvm.hypervisor import ruled_guests
from corral.node.hypervisor.kvm.runtime import Layout
from corral.node.impexp import exports
from corral.node.storage import registry
from corral.osdef.definition import diagnose
from corral.paths import Paths
from corral.rpc import node_verify as NV


def _fingerprint(path: str, paths: Paths) -> str | None:
    """SHA-1 of a distributed file (None: absent), as Ganeti's FingerprintFiles."""
    local = paths.from_wire(path)
    # Only the files the master may distribute: no fingerprint of any other file.
    if not upload_allowed(paths, local):
        raise errors.OpExecError(f"{path} is not a cluster file")
    try:
        return hashlib.sha1(local.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def file_checksums(paths: Paths, files: Any) -> dict[str, str]:
    """``{file: sha1}`` of those of ``files`` (production paths) this node has."""
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise errors.OpExecError("filelist: expected a list of file names")
    sums = {name: _fingerprint(name, paths) for name in files}
    return {name: digest for name, digest in sums.items() if digest is not None}


def node_setup(paths: Paths, _: Any) -> list[list[str]]:
    """``[level, message]`` about the node's certificates: readable, signed by
    the cluster CA, not expired nor expiring soon."""
    out: list[list[str]] = []
    seen: set[bytes] = set()
    for cert in (paths.server_pem, paths.client_pem):
        try:
            data = cert.read_bytes()
        except OSError:
            data = b""
        if data and data in seen:
            continue  # a joined node's client certificate is its server one
        seen.add(data)
        out += [list(f) for f in check_file(cert, paths.to_wire(cert), paths.ca_cert)]
    return out


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise errors.OpExecError(f"{what}: expected a list of names")
    return value


def hypervisors(paths: Paths, names: Any) -> dict[str, str | None]:
    """Hypervisor → why this node cannot run it (None: it can)."""
    return {name: hypervisor_problem(paths, name) for name in _names(names, "hypervisor")}


async def instance_list(paths: Paths, names: Any) -> dict[str, list[Any]]:
    """Hypervisor → ``[True, running instance names]`` or ``[False, why]``
    (on the event loop: hypervisors answer there)."""
    out: dict[str, list[Any]] = {}
    for name in _names(names, "instancelist"):
        try:
            infos = await get_hypervisor(name, paths).instances_info()
            out[name] = [True, sorted(info.name for info in infos)]
        except (errors.GenericError, OSError) as err:
            out[name] = [False, getattr(err, "message", None) or str(err)]
    return out


def os_list(paths: Paths, _: Any) -> list[dict[str, Any]]:
    """Every OS definition of the search path (paths as production paths)."""
    found = diagnose(paths.os_search_path)
    for entry in found:
        entry["path"] = paths.to_wire(Path(entry["path"]))
        entry["shadowed"] = [paths.to_wire(Path(hidden[0])) for hidden in entry["shadowed"]]
    return found


def storage(paths: Paths, dirs: Any) -> dict[str, str | None]:
    """Disk template → why this node cannot serve it (None: it can); ``dirs``
    maps each template to the cluster directory of its disks (or None)."""
    if not isinstance(dirs, dict):
        raise errors.OpExecError("storage: expected a template → directory map")
    return {name: disk_template_problem(paths, name, dirs) for name in dirs}


def disk_status(paths: Paths, disks: Any) -> list[list[str | None]]:
    """Each disk's ``[state, why]``: ok, missing, or faulty (e.g. too small)."""
    if not isinstance(disks, list):
        raise errors.OpExecError("disks: expected a list of disk descriptions")
    out: list[list[str | None]] = []
    for data in disks:
        try:
            template, disk = registry.resolve(paths, data)
            status = template.sync_status(disk)
            if not status.present:
                out.append([NV.DISK_MISSING, None])
                continue
            problem = status.problem
        except errors.GenericError as err:
            problem = err.message
        out.append([NV.DISK_OK, None] if problem is None else [NV.DISK_FAULTY, problem])
    return out


def _oob_problem(paths: Paths, name: str) -> str | None:
    """Why the out-of-band program ``name`` cannot run here, in Ganeti's words."""
    if not posixpath.isabs(name):
        return f"out of band helper {name} is not an absolute path"
    try:
        st = os.stat(paths.from_wire(name))
    except OSError as err:
        return f"error stating out of band helper: [Errno {err.errno}] {err.strerror}: '{name}'"
    if not stat.S_ISREG(st.st_mode):
        return f"out of band helper {name} is not a file"
    if not st.st_mode & stat.S_IXUSR:
        return f"out of band helper {name} is not executable"
    return None


def oob_paths(paths: Paths, names: Any) -> list[str | None]:
    """Each out-of-band program's problem on this node (None: it can run)."""
    return [_oob_problem(paths, name) for name in _names(names, "oob-paths")]


def netrules_problems(paths: Paths, _: Any) -> list[str]:
    """What the network rules of the running kvm guests lack on this node."""
    return netrules.problems(paths, ruled_guests(Layout(paths.run_dir)))


Check = Callable[[Paths, Any], Any]

# Check name → the function answering it (its parameter from the master).
CHECKS: dict[str, Check] = {
    NV.FILELIST: file_checksums,
    NV.NODESETUP: node_setup,
    NV.HYPERVISOR: hypervisors,
    NV.OSLIST: os_list,
    NV.STORAGE: storage,
    NV.DISKS: disk_status,
    NV.UNFINISHED_EXPORTS: lambda paths, _: exports.unfinished(paths),
    NV.OOB_PATHS: oob_paths,
    NV.NETRULES: netrules_problems,
}


def run_checks(paths: Paths, wanted: dict[str, Any]) -> dict[str, Any]:
    """The answers to the ``wanted`` checks this node knows (others are
    ignored: a newer master may ask more), failures under ``"failures"``."""
    out: dict[str, Any] = {NV.FAILURES: {}}
    for name, param in wanted.items():
        check = CHECKS.get(name)
        if check is None:
            continue
        try:
            out[name] = check(paths, param)
        except (errors.GenericError, OSError, ValueError) as err:
            out[NV.FAILURES][name] = getattr(err, "message", None) or str(err)
    return out
