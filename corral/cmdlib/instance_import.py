"""Creating an instance from an export: modes ``import`` (an export in a
node's export directory) and ``remote-import`` (the disks sent by another
cluster, Ganeti's inter-cluster move), as Ganeti 3.0.2's LUInstanceCreate.

The instance is made as a fresh one is (disks first, under the same intent
record, so that a failure or a dead masterd leaves nothing behind); then each
disk's data arrives through the OS ``import`` script (a raw write when the
instance has no OS), and the OS ``rename`` script runs with the exported
instance's name as OLD_INSTANCE_NAME (a failure there is only a warning, as
in Ganeti).  Unlike Ganeti, a disk that could not be imported fails the
whole creation: an instance with a missing disk is not what was asked for.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import impexp_kinds as K
from corral import params as P
from corral.cmdlib import instance_utils as U
from corral.cmdlib.backup_common import check_node_online
from corral.crypto import rie
from corral.exports import config_ini
from corral.exports.config_ini import ExportInfo
from corral.objects import Instance, Node
from corral.rpc.calls_impexp import (
    ImpExpOptions,
    export_info,
    export_list,
    x509_cert_create,
    x509_cert_remove,
)
from corral.rpc.calls_os import instance_run_rename
from corral.services import impexp
from corral.services.impexp import Endpoint
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.instance_create import LUInstanceCreate

MIB = 1024 * 1024
MODE_IMPORT = "import"
MODE_REMOTE_IMPORT = "remote-import"
# Tests only: seconds a remote import waits for its source to connect, instead
# of Ganeti's RIE_CONNECT_TIMEOUT plus the source's shutdown timeout (read by
# masterd, from its environment, at each import).
CONNECT_TIMEOUT_ENV = "CORRAL_TEST_RIE_CONNECT_TIMEOUT"


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
    public = config_ini.cluster_osparams(cluster, os_name, private=False)
    private = config_ini.cluster_osparams(cluster, os_name, private=True)
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


# Executing
def _script_descriptor(lu: LUInstanceCreate, inst: Instance) -> dict[str, Any]:
    """The instance as an import script needs it (CONTRACT §1)."""
    return {
        **U.instance_descriptor(lu.cfg, inst),
        "osparams": lu.osparams,
        "secret_names": lu.hidden_osparams,
        "debug": lu.op.debug_level or 0,
    }


async def import_local(lu: LUInstanceCreate, inst: Instance, source: LocalSource) -> None:
    """Each exported disk through the OS import script, then the rename script."""
    lu.feedback("* running the instance OS import scripts...")
    desc = _script_descriptor(lu, inst)
    kind = K.SCRIPT if inst.os else K.DISK
    pairs, indexes = [], []
    for idx, image in enumerate(source.images):
        if image is None:
            continue
        pairs.append(
            (
                Endpoint(source.node, K.FILE, {"export": source.export, "dump": image}),
                Endpoint(lu.pnode, kind, {"index": idx}),
            )
        )
        indexes.append(idx)
    results = await impexp.transfer_within_cluster(lu, pairs, desc, desc, lu.op.compress)
    _check_results(lu, inst, [i for i, ok in zip(indexes, results, strict=True) if not ok])
    await run_rename(lu, inst, source.info.name or inst.name)


def _check_results(lu: LUInstanceCreate, inst: Instance, failed: list[int]) -> None:
    if failed:
        disks = ", ".join(f"disk/{i}" for i in failed)
        raise errors.OpExecError(
            f"Could not import {disks} of instance {inst.name} on node {lu.pnode.name}"
            " (see the job log); the instance is not created"
        )


def connect_timeout(lu: LUInstanceCreate) -> float:
    """How long a remote import waits for its source: Ganeti's RIE_CONNECT_TIMEOUT
    plus the time the source may take to shut its instance down."""
    override = os.environ.get(CONNECT_TIMEOUT_ENV)
    if override:
        return float(override)
    return float(C.RIE_CONNECT_TIMEOUT + lu.op.source_shutdown_timeout)


async def import_remote(lu: LUInstanceCreate, inst: Instance, source: RemoteSource) -> None:
    """Receive the disks from another cluster (Ganeti's RemoteImport), with a
    key and certificate made for this move on the primary node and removed
    after it, whatever happened; then the rename script."""
    lu.feedback("* preparing remote import...")
    pnode = lu.pnode
    rpc = lu.master.rpc
    key_name, cert_pem = await rpc.run(
        pnode,
        x509_cert_create(C.RIE_CERT_VALIDITY),
        f"Can't create X509 key and certificate on {pnode.name}",
    )
    try:
        await _receive(lu, inst, source, key_name, cert_pem)
    finally:
        what = f"Can't remove X509 key and certificate on {pnode.name}"
        await asyncio.shield(rpc.attempt(pnode, x509_cert_remove(key_name), lu.warn, what))
    await run_rename(lu, inst, source.instance_name)


async def _receive(
    lu: LUInstanceCreate, inst: Instance, source: RemoteSource, key_name: str, cert_pem: str
) -> None:
    pnode, cds = lu.pnode, source.cds
    timeout = connect_timeout(lu)
    desc = _script_descriptor(lu, inst)
    kind = K.SCRIPT if inst.os else K.DISK
    base = secrets.token_hex(6)
    magics = [rie.disk_magic(base, inst.name, idx) for idx in range(len(inst.disks))]
    reporter = impexp.RemoteImportReporter()
    imports: list[Endpoint] = []
    try:
        for idx, disk in enumerate(inst.disks):
            opts: ImpExpOptions = {
                "key_name": key_name,
                "ca_pem": source.ca_pem,
                "compress": lu.op.compress,
                "magic": magics[idx],
                "connect_timeout": max(1, int(timeout)),
                "bind_address": None,
                "size": disk.size * MIB,
            }
            imports.append(
                await impexp.start_import(
                    lu, pnode, opts, desc, f"disk/{idx}", kind, {"index": idx}
                )
            )
        await impexp.wait_listening(lu, imports, impexp.LISTEN_TIMEOUT, reporter)
        salt = rie.new_salt()
        disks = [
            rie.sign_disk_info(cds, salt, idx, pnode.primary_ip, int(ep.port or 0), magics[idx])
            for idx, ep in enumerate(imports)
        ]
        signed_ca = rie.sign_x509_cert(cert_pem, cds, rie.new_salt())
        # What the source cluster needs to send (Ganeti's _RemoteImportCb entry).
        lu.ctx.feedback({"disks": disks, "x509_ca": signed_ca}, kind=C.ELOG_REMOTE_IMPORT)
        results = await impexp.follow(
            lu, imports, [ep.label for ep in imports], connect_timeout=timeout, on_update=reporter
        )
    finally:
        await impexp.cleanup(lu, imports)
    _check_results(lu, inst, [i for i, ok in enumerate(results) if not ok])


async def run_rename(lu: LUInstanceCreate, inst: Instance, old_name: str) -> None:
    """The OS rename script after an import, even under the same name; a
    failure is a warning (Ganeti's rule)."""
    if not inst.os:
        return
    lu.feedback(f"Running rename script for {inst.name}")
    pnode = lu.pnode
    request = instance_run_rename(
        U.instance_descriptor(lu.cfg, inst),
        old_name,
        lu.osparams,
        lu.op.debug_level or 0,
        lu.hidden_osparams,
    )
    what = f"Failed to run rename script for {inst.name} on node {pnode.name}"
    await lu.master.rpc.attempt(pnode, request, lu.warn, what)
