"""The arguments and sources of creating an instance from an export: modes
``import`` (an export in a node's export directory) and ``remote-import`` (the
disks sent by another cluster, Ganeti's inter-cluster move), as Ganeti 3.0.2's
LUInstanceCreate.

The instance is made as a fresh one is (disks first, under the same intent
record, so that a failure or a dead masterd leaves nothing behind); the
installer (:mod:`corral.cmdlib.installer`) then brings the data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.cmdlib.backup_common import check_node_online
from corral.crypto import rie
from corral.exports import config_ini
from corral.exports.config_ini import ExportInfo
from corral.objects import Node
from corral.osdef.spec import Visibility
from corral.rpc.calls_impexp import (
    export_info,
    export_list,
)
from corral.services.params import cluster_osparams
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.instance_create import LUInstanceCreate

MODE_IMPORT = "import"
MODE_REMOTE_IMPORT = "remote-import"


@dataclass
class LocalSource:
    """The export an ``import`` reads: where it is and what it holds."""

    node: Node
    export: str  # the directory's name in the node's export directory
    path: str  # the directory, as Ganeti's hooks show it
    info: ExportInfo
    images: list[str | None]  # per disk of the new instance: the dump file, or none


@dataclass
class RemoteSource:
    """What a ``remote-import`` was given, checked."""

    cds: bytes
    ca_pem: str
    instance_name: str


# Arguments
def check_import_arguments(lu: LUInstanceCreate) -> None:
    """Ganeti's argument rules of a local import (the export is read later)."""
    op = lu.op
    if any(isinstance(d, dict) and "adopt" in d for d in op.disks):
        raise errors.OpPrereqError("Disk adoption not allowed for instance import", C.ECODE_INVAL)
    if op.no_install:
        lu.log_info("No-installation mode has no effect during import")
    src_path = op.src_path or op.instance_name
    if os.path.isabs(src_path) and op.src_node is None and op.src_node_uuid is None:
        raise errors.OpPrereqError(
            "Importing an instance from a path requires a source node option", C.ECODE_INVAL
        )
    # The export directory as users name it (/srv/ganeti/export) or below the root.
    paths = lu.master.paths
    export_dirs = (paths.to_wire(paths.export_dir), str(paths.export_dir))
    if os.path.isabs(src_path) and os.path.dirname(os.path.normpath(src_path)) not in export_dirs:
        raise errors.OpPrereqError(
            f"Corral imports only from the export directory {export_dirs[0]}, not {src_path}",
            C.ECODE_INVAL,
        )
    name = os.path.basename(os.path.normpath(src_path))
    if not name or name.startswith(".") or "/" in name:
        raise errors.OpPrereqError(f"Invalid export name '{src_path}'", C.ECODE_INVAL)
    # As Ganeti: the variant that was installed must do for the import too.
    lu.op = lu.op.model_copy(update={"force_variant": True, "src_path": name})


def check_remote_arguments(lu: LUInstanceCreate) -> RemoteSource:
    """The source's handshake and certificate, checked with this cluster's
    domain secret (Ganeti's checks and wording)."""
    op = lu.op
    cds = rie.read_domain_secret(lu.master.paths)
    if not op.source_handshake:
        raise errors.OpPrereqError("Missing source handshake", C.ECODE_INVAL)
    problem = rie.check_handshake(cds, op.source_handshake)
    if problem:
        raise errors.OpPrereqError(f"Invalid handshake: {problem}", C.ECODE_INVAL)
    if not op.source_x509_ca:
        raise errors.OpPrereqError("Missing source X509 CA", C.ECODE_INVAL)
    ca_pem = rie.load_signed_x509_cert(op.source_x509_ca, cds, what="source X509 CA")
    if not op.source_instance_name:
        raise errors.OpPrereqError("Missing source instance name", C.ECODE_INVAL)
    return RemoteSource(cds, ca_pem, op.source_instance_name)


def source_node(lu: LUInstanceCreate) -> Node | None:
    """The node named by src_node/src_node_uuid, if any (unknown: OpPrereqError)."""
    name = lu.op.src_node_uuid or lu.op.src_node
    return None if name is None else lu.expand(Node, name)


# Reading the export
async def read_export(lu: LUInstanceCreate, node: Node | None) -> LocalSource:
    """Find the export (on ``node``, else on any node that has it, as Ganeti),
    read its config.ini and fill what the opcode leaves open from it."""
    name = lu.op.src_path
    assert name is not None
    if node is None:
        node = await _find_export(lu, name)
    check_node_online(node)
    text = await lu.master.rpc.run(
        node,
        export_info(name),
        f"No export or invalid export found in dir {name} on node {node.name}",
        ecode=C.ECODE_INVAL,
    )
    info = config_ini.parse(text)
    _fill_op(lu, info)
    count = len(lu.op.disks)
    images = [info.disks[i].dump if i < len(info.disks) else None for i in range(count)]
    path = str(lu.master.paths.export_dir / name)
    return LocalSource(node, name, path, info, images)


async def _find_export(lu: LUInstanceCreate, name: str) -> Node:
    nodes = [n for n in lu.cfg.nodes() if not n.offline]
    answers = await lu.master.rpc.results(nodes, export_list())
    for node in sorted(nodes, key=lambda n: n.name):
        if name in (answers[node.uuid].value or ()):
            return node
    raise errors.OpPrereqError(f"No export found for relative path {name}", C.ECODE_INVAL)


def _fill_op(lu: LUInstanceCreate, info: ExportInfo) -> None:
    """Ganeti's _ReadExportParams: the export's values where the opcode gives none."""
    op = lu.op
    disks = _disks(op.disks, info)
    template = templates.DISK_TEMPLATES.get(op.disk_template or "")
    if not disks and (template is None or template.has_disks):
        raise errors.OpPrereqError(
            "No disk info specified and the export is missing the disk information",
            C.ECODE_INVAL,
        )
    update: dict[str, Any] = {
        "os_type": info.os,
        "disks": disks,
        "nics": _nics(op.nics, op.instance_name, info),
        "tags": op.tags or info.tags,
        "hypervisor": op.hypervisor or info.hypervisor,
        "hvparams": {**info.hvparams, **op.hvparams},
        # An old export's "memory" becomes maxmem and minmem (check_beparams).
        "beparams": {**info.beparams, **op.beparams},
        "osparams": {**info.osparams, **op.osparams},
        "osparams_private": {**info.osparams_private, **(op.osparams_private or {})},
    }
    lu.op = op.model_copy(update=update)


def _nics(given: list[dict[str, Any]], name: str, info: ExportInfo) -> list[dict[str, Any]]:
    """The export's NICs unless the opcode gives some; re-imported under its
    own name, an instance keeps its MAC addresses where the opcode says "auto"."""
    if not given:
        return [nic.spec() for nic in info.nics]
    if name != info.name:
        return given
    out = []
    for idx, spec in enumerate(given):
        auto = isinstance(spec, dict) and spec.get("mac", "auto") == "auto"
        if auto and idx < len(info.nics) and info.nics[idx].mac:
            spec = {**spec, "mac": info.nics[idx].mac}
        out.append(spec)
    return out


def _disks(given: list[dict[str, Any]], info: ExportInfo) -> list[dict[str, Any]]:
    """The disks to create: the export's, or the opcode's if it gives them (one
    per exported disk, none smaller than its data)."""
    if not given:
        return [{"size": d.size, "name": d.name} for d in info.disks]
    if len(given) != len(info.disks):
        raise errors.OpPrereqError(
            f"The export has {len(info.disks)} disk(s) but {len(given)} were given",
            C.ECODE_INVAL,
        )
    for idx, (spec, exported) in enumerate(zip(given, info.disks, strict=True)):
        size = spec.get("size") if isinstance(spec, dict) else None
        if size is not None and _mib(size, idx) < exported.size:
            raise errors.OpPrereqError(
                f"Disk {idx}: {size} is smaller than the exported disk ({exported.size} MiB)",
                C.ECODE_INVAL,
            )
    return given


def _mib(size: Any, idx: int) -> int:
    return P.parse_size(size, f"size of disk {idx}")


def revert_to_defaults(lu: LUInstanceCreate) -> None:
    """Ganeti's identify_defaults: parameters equal to what the cluster would
    give anyway are dropped, so that the instance follows later changes of
    the cluster's defaults (useful after an import, which gives them all)."""
    op, cluster = lu.op, lu.cfg.cluster
    os_name = op.os_type or ""
    hv_defaults = P.fill(
        P.HV_DEFAULTS.get(lu.hypervisor, {}),
        cluster.hvparams.get(lu.hypervisor, {}),
        cluster.os_hvp.get(os_name, {}).get(lu.hypervisor, {}),
    )
    lu.hvparams = _without_defaults(lu.hvparams, hv_defaults)
    lu.beparams = _without_defaults(
        lu.beparams, P.fill(P.BE_DEFAULTS, cluster.beparams.get("default", {}))
    )
    nic_defaults = P.fill(P.NIC_DEFAULTS, cluster.nicparams.get("default", {}))
    for spec in lu.nic_specs:
        spec["nicparams"] = _without_defaults(spec["nicparams"], nic_defaults)
    public = cluster_osparams(cluster, os_name, Visibility.PUBLIC)
    # As Ganeti: private values are compared with the public and private defaults.
    private = {**public, **cluster_osparams(cluster, os_name, Visibility.PRIVATE)}
    lu.op = op.model_copy(
        update={
            "osparams": _without_defaults(op.osparams, public),
            "osparams_private": _without_defaults(op.osparams_private or {}, private),
        }
    )


def _without_defaults(values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k not in defaults or defaults[k] != v}


def hook_env(source: LocalSource) -> dict[str, Any]:
    """Ganeti's SRC_* variables of an import (SRC_IMAGES: a Python list's text,
    False where a disk has no dump)."""
    images = [f"{source.path}/{image}" if image else False for image in source.images]
    return {"SRC_NODE": source.node.name, "SRC_PATH": source.path, "SRC_IMAGES": str(images)}
