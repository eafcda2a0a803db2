"""Filling a new instance's disks: the one installer behind instance create
(every mode), reinstall and import.

An install has a *target* (the instance, whose disks exist, on its primary
node, with its OS spec) and a *kind*, which says where the disks' content comes
from:

- :class:`OsScript`, the OS ``create`` script (``gnt-instance add``,
  ``reinstall``);
- :class:`Fresh`, what ``add`` and ``reinstall`` install: the OS image
  (``os-image``, onto disk 0), then the create script (when there is an OS),
  then the personalization package (``os-package``, over disk 0's filesystem);
- :class:`FromExport`, an export in this cluster, through the OS ``import``
  script (a raw write when the instance has no OS);
- :class:`FromCluster`, another cluster's disks (Ganeti's inter-cluster move),
  the same way.

After an import the OS ``rename`` script runs with the exported instance's name
as OLD_INSTANCE_NAME (a failure there is only a warning, as in Ganeti).  Unlike
Ganeti, a disk that could not be imported fails the whole creation: an
instance with a missing disk is not what was asked for.  Unlike Ganeti's
create (which skips the create script when an image is given) but as its
reinstall, an image and an OS both install: the image, then the script.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from corral import constants as C
from corral import errors
from corral import impexp_kinds as K
from corral.cmdlib import instance_disks, os_media
from corral.cmdlib import instance_utils as U
from corral.cmdlib.helper_vm import HelperVM
from corral.crypto import rie
from corral.objects import Instance, Node
from corral.osdef.media import PackageSource
from corral.osdef.spec import OsSpec
from corral.rpc.calls_impexp import ImpExpOptions, x509_cert_create, x509_cert_remove
from corral.rpc.calls_os import instance_os_add, instance_run_rename
from corral.rpc.wire import InstanceWire
from corral.services import impexp
from corral.services.impexp import Endpoint

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.cmdlib.instance_import import LocalSource, RemoteSource

MIB = 1024 * 1024
# Tests only: seconds a remote import waits for its source to connect, instead
# of Ganeti's RIE_CONNECT_TIMEOUT plus the source's shutdown timeout (read by
# masterd, from its environment, at each import).
CONNECT_TIMEOUT_ENV = "CORRAL_TEST_RIE_CONNECT_TIMEOUT"


@dataclass(frozen=True)
class Target:
    """What an install fills: an instance whose disks exist, on its primary
    node, with its OS (None: the instance has none, data is written raw)."""

    inst: Instance
    node: Node
    spec: OsSpec | None

    def descriptor(self, lu: LogicalUnit[Any]) -> InstanceWire:
        """The instance as the node's scripts need it, its OS spec included."""
        desc = U.instance_descriptor(lu.cfg, self.inst)
        if self.spec is not None:
            desc["osspec"] = self.spec.to_wire()
        return desc

    def transfer_descriptor(self, lu: LogicalUnit[Any]) -> dict[str, Any]:
        """The instance as the import and export scripts need it (CONTRACT §1)."""
        return {**self.descriptor(lu), "debug": lu.op.debug_level or 0}


def existing(lu: LogicalUnit[Any], inst: Instance, node: Node) -> Target:
    """An instance of the configuration as a target, with its own parameters
    (its scripts run whatever it holds: a conflict of visibilities is not refused)."""
    spec = None
    if inst.os:
        spec = U.job_os_spec(lu, inst.os, inst.osparams, inst.osparams_private, strict=False)
    return Target(inst, node, spec)


class InstallKind(Protocol):
    """Where a new instance's data comes from."""

    async def fill(self, lu: LogicalUnit[Any], target: Target) -> None:
        """Write the instance's disks on ``target.node``; raise on failure."""


async def install(lu: LogicalUnit[Any], target: Target, kind: InstallKind) -> None:
    """Fill ``target``'s disks as ``kind`` says (as Ganeti: nothing for a
    diskless instance)."""
    if target.inst.disks:
        # A mirrored disk's writes reach its secondary's copy too.
        await instance_disks.link_copies(lu, target.inst)
        await kind.fill(lu, target)


@dataclass(frozen=True)
class OsScript:
    """The OS ``create`` script; ``reinstall`` sets INSTANCE_REINSTALL."""

    reinstall: bool = False

    async def fill(self, lu: LogicalUnit[Any], target: Target) -> None:
        """Run the create script on the primary node."""
        assert target.spec is not None, "a script install needs an OS"
        # Ganeti's words, which differ between the two.
        if self.reinstall:
            lu.feedback("Running the instance OS create scripts...")
            what = "Could not install OS for instance"
        else:
            lu.feedback("* running the instance OS create scripts...")
            what = "Could not add os for instance"
        await lu.master.rpc.run(
            target.node,
            instance_os_add(target.descriptor(lu), self.reinstall, lu.op.debug_level or 0),
            f"{what} {target.inst.name} on node {target.node.name}",
        )


@dataclass(frozen=True)
class Fresh:
    """A new install: the image onto disk 0, the create script (``scripts``:
    the instance has an OS and it is to run), then the package over disk 0.
    With a ``helper`` VM, the script and the package are its work, not the node's."""

    image: str | None
    scripts: bool
    package: PackageSource | None
    reinstall: bool = False
    helper: HelperVM | None = None

    async def fill(self, lu: LogicalUnit[Any], target: Target) -> None:
        """Each step in turn on the primary node (or in its helper VM)."""
        if self.image is not None:
            await os_media.write_image(lu, target.inst, target.node, self.image)
        if self.scripts and self.helper is not None:
            await self.helper.install(lu, target, self.package, self.reinstall)
            return
        if self.scripts:
            await OsScript(self.reinstall).fill(lu, target)
        if self.package is not None:
            await os_media.unpack_package(lu, target.inst, target.node, self.package)

    @property
    def empty(self) -> bool:
        """Whether there is nothing to install."""
        return self.image is None and not self.scripts and self.package is None


@dataclass(frozen=True)
class FromExport:
    """An export in this cluster: each exported disk through the OS import script."""

    source: LocalSource

    async def fill(self, lu: LogicalUnit[Any], target: Target) -> None:
        """Send each dump from the export's node to the primary node, then rename."""
        lu.feedback("* running the instance OS import scripts...")
        desc = target.transfer_descriptor(lu)
        kind = K.SCRIPT if target.spec is not None else K.DISK
        source = self.source
        pairs, indexes = [], []
        for idx, image in enumerate(source.images):
            if image is None:
                continue
            pairs.append(
                (
                    Endpoint(source.node, K.FILE, {"export": source.export, "dump": image}),
                    Endpoint(target.node, kind, {"index": idx}),
                )
            )
            indexes.append(idx)
        results = await impexp.transfer_within_cluster(lu, pairs, desc, desc, lu.op.compress)
        _check_imported(target, [i for i, ok in zip(indexes, results, strict=True) if not ok])
        await run_rename(lu, target, source.info.name or target.inst.name, after_import=True)


@dataclass(frozen=True)
class FromCluster:
    """Another cluster's disks (Ganeti's RemoteImport), received with a key and
    certificate made for this move on the primary node and removed after it,
    whatever happened."""

    source: RemoteSource

    async def fill(self, lu: LogicalUnit[Any], target: Target) -> None:
        """Listen for each disk, tell the source where, receive, then rename."""
        lu.feedback("* preparing remote import...")
        node, rpc = target.node, lu.master.rpc
        key_name, cert_pem = await rpc.run(
            node,
            x509_cert_create(C.RIE_CERT_VALIDITY),
            f"Can't create X509 key and certificate on {node.name}",
        )
        try:
            await self._receive(lu, target, key_name, cert_pem)
        finally:
            what = f"Can't remove X509 key and certificate on {node.name}"
            await asyncio.shield(rpc.attempt(node, x509_cert_remove(key_name), lu.warn, what))
        await run_rename(lu, target, self.source.instance_name, after_import=True)

    async def _receive(
        self, lu: LogicalUnit[Any], target: Target, key_name: str, cert_pem: str
    ) -> None:
        inst, node, cds = target.inst, target.node, self.source.cds
        timeout = connect_timeout(lu)
        desc = target.transfer_descriptor(lu)
        kind = K.SCRIPT if target.spec is not None else K.DISK
        base = secrets.token_hex(6)
        magics = [rie.disk_magic(base, inst.name, idx) for idx in range(len(inst.disks))]
        reporter = impexp.RemoteImportReporter()
        imports: list[Endpoint] = []
        try:
            for idx, disk in enumerate(inst.disks):
                opts: ImpExpOptions = {
                    "key_name": key_name,
                    "ca_pem": self.source.ca_pem,
                    "compress": lu.op.compress,
                    "magic": magics[idx],
                    "connect_timeout": max(1, int(timeout)),
                    "bind_address": None,
                    "size": disk.size * MIB,
                }
                imports.append(
                    await impexp.start_import(
                        lu, node, opts, desc, f"disk/{idx}", kind, {"index": idx}
                    )
                )
            await impexp.wait_listening(lu, imports, impexp.LISTEN_TIMEOUT, reporter)
            salt = rie.new_salt()
            disks = [
                rie.sign_disk_info(cds, salt, idx, node.primary_ip, int(ep.port or 0), magics[idx])
                for idx, ep in enumerate(imports)
            ]
            signed_ca = rie.sign_x509_cert(cert_pem, cds, rie.new_salt())
            # What the source cluster needs to send (Ganeti's _RemoteImportCb entry).
            lu.ctx.feedback({"disks": disks, "x509_ca": signed_ca}, kind=C.ELOG_REMOTE_IMPORT)
            results = await impexp.follow(
                lu,
                imports,
                [ep.label for ep in imports],
                connect_timeout=timeout,
                on_update=reporter,
            )
        finally:
            await impexp.cleanup(lu, imports)
        _check_imported(target, [i for i, ok in enumerate(results) if not ok])


def connect_timeout(lu: LogicalUnit[Any]) -> float:
    """How long a remote import waits for its source: Ganeti's RIE_CONNECT_TIMEOUT
    plus the time the source may take to shut its instance down."""
    override = os.environ.get(CONNECT_TIMEOUT_ENV)
    if override:
        return float(override)
    return float(C.RIE_CONNECT_TIMEOUT + lu.op.source_shutdown_timeout)


async def run_rename(
    lu: LogicalUnit[Any], target: Target, old_name: str, *, after_import: bool = False
) -> None:
    """The OS ``rename`` script (after an import even under the same name); a
    failure is a warning (Ganeti's rule)."""
    if target.spec is None:
        return
    inst, node = target.inst, target.node
    if after_import:
        lu.feedback(f"Running rename script for {inst.name}")
        what = f"Failed to run rename script for {inst.name} on node {node.name}"
    else:
        what = (
            f"Could not run OS rename script for instance {inst.name} on node"
            f" {node.name} (but the instance has been renamed in Ganeti)"
        )
    try:
        await instance_disks.link_copies(lu, inst)  # the script writes both copies
    except errors.OpExecError as err:
        lu.warn(f"{what}: {err.message}")
        return
    request = instance_run_rename(target.descriptor(lu), old_name, lu.op.debug_level or 0)
    await lu.master.rpc.attempt(node, request, lu.warn, what)


def _check_imported(target: Target, failed: list[int]) -> None:
    if failed:
        disks = ", ".join(f"disk/{i}" for i in failed)
        raise errors.OpExecError(
            f"Could not import {disks} of instance {target.inst.name} on node"
            f" {target.node.name} (see the job log); the instance is not created"
        )
