"""The node's side of design-os's ``install`` mode: an instance's helper VM.

The instance itself (its disks, its NICs, its memory) is started under kvm
with one more disk, the cluster's install image, attached read-only last and
booted first; the appliance on it runs from RAM.  Nothing of the OS runs on
the node: metad serves the helper VM

- ``os/os-install-package``: a tar.gz of the OS definition's directory
  (``definition/``) and its script environment (``environment``: the OS
  interface's variables with the disks as the helper VM sees them, without
  any OS parameter);
- ``os/parameters.json``: the OS parameters, secret ones included (metad
  keeps them in memory while the install runs);
- ``os/package``: the personalization package, fetched here first.

These files live in a 0700 directory of the node's run dir for the time of
the install only; the install's progress comes back through metad's ``write``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import shlex
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from corral import errors
from corral.metad import client
from corral.node.communication import communication_tap
from corral.node.context import NodeContext
from corral.node.handlers.osdef import instance_spec, local_disks, node_os
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.spec import InstanceSpec
from corral.node.metad_feed import metadata_of
from corral.node.osmedia import fetch, image, package
from corral.osdef.env import instance_env
from corral.osdef.media import PackageSource, is_url
from corral.process.daemons import DaemonStartError

log = logging.getLogger(__name__)

# The script the helper VM runs (Ganeti's OS_SCRIPT of its install package).
SCRIPT = "create_untrusted"
# The hypervisor parameters of a helper VM's run: booted from its disk (the
# install image), virtio disks (the appliance's drivers), QEMU gone at a reboot
# (a panic of the appliance ends the run instead of looping).
HELPER_HVPARAMS = {
    "kernel_path": "",
    "initrd_path": "",
    "cdrom_image_path": "",
    "boot_order": "disk",
    "disk_type": "paravirtual",
    "serial_console": True,
    "reboot_behavior": "exit",
}
INSTALLER_DRIVE = "installer"
IMAGE_LIMIT = 4 << 30  # bytes an install image fetched from a URL may have


def _directory(ctx: NodeContext, name: str) -> Path:
    return ctx.paths.run_dir / "helper-vm" / name


def _kvm(ctx: NodeContext) -> KvmHypervisor:
    hypervisor = get_hypervisor(KvmHypervisor.NAME, ctx.paths)
    assert isinstance(hypervisor, KvmHypervisor)
    return hypervisor


def helper_env(env: dict[str, str], disks: int, reinstall: bool) -> dict[str, str]:
    """The scripts' environment as the helper VM sees it: its disks are the
    instance's, in order, as virtio disks (the install image comes after
    them); no OS parameter (they come from metad, never from a file)."""
    out = {key: value for key, value in env.items() if _kept(key)}
    for index in range(disks):
        out[f"DISK_{index}_PATH"] = f"/dev/vd{chr(ord('a') + index)}"
    out["OS_SCRIPT"] = SCRIPT
    if reinstall:
        out["INSTANCE_REINSTALL"] = "1"
    return out


def _kept(key: str) -> bool:
    if key.startswith("OSP_"):
        return False
    return not (key.startswith("DISK_") and key.endswith(("_PATH", "_URI")))


def _install_package(os_dir: Path, env: dict[str, str], target: Path) -> None:
    """The OS definition and its environment as one tar.gz (metad's
    ``os/os-install-package``)."""
    text = "".join(f"{key}={shlex.quote(value)}\n" for key, value in sorted(env.items()))
    with tarfile.open(target, "w:gz") as tar:
        tar.add(os_dir, arcname="definition")
        info = tarfile.TarInfo("environment")
        info.size = len(text.encode())
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(text.encode()))


def _local_image(source: str, directory: Path) -> tuple[str, str]:
    """``(path, format)`` of the install image on this node (a URL's image is
    downloaded into ``directory``); OpExecError if it is not a raw or
    self-contained qcow2 image."""
    info = image.probe(source)
    if not is_url(source):
        return source, info.format
    target = directory / "install-image"
    with open(target, "wb") as out:
        fetch.download(source, None, out, IMAGE_LIMIT)
    return str(target), info.format


def _personalization(source: PackageSource, directory: Path) -> str:
    target = directory / "package.tar.gz"
    with open(target, "wb") as out:
        fetch.download(source.url, package.credentials(source), out, package.LIMIT)
    return str(target)


def _prepare(
    ctx: NodeContext,
    inst: dict[str, Any],
    source: str,
    pkg: PackageSource | None,
    reinstall: bool,
) -> tuple[str, str, str | None, str]:
    """The files of an install (blocking: run in a thread): ``(image path,
    its format, package path, os dir)``."""
    spec = instance_spec(inst)
    osdef = node_os(ctx, spec.name)
    directory = _directory(ctx, inst["name"])
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700, parents=True)
    env = instance_env(osdef, local_disks(ctx, inst), spec, 0)
    env = helper_env(env, len(inst["disks"]), reinstall)
    _install_package(osdef.path, env, directory / "os-install-package.tar.gz")
    path, fmt = _local_image(source, directory)
    package_path = _personalization(pkg, directory) if pkg is not None else None
    return path, fmt, package_path, str(osdef.path)


def installer_drive(path: str, fmt: str) -> tuple[str, ...]:
    """QEMU's options for the install image: read-only, after the instance's
    disks (so theirs keep their names), booted first."""
    drive = f"file={path},format={fmt},if=none,id={INSTALLER_DRIVE},readonly=on"
    device = f"virtio-blk-pci,drive={INSTALLER_DRIVE},id={INSTALLER_DRIVE}-dev,bootindex=0"
    return ("-drive", drive, "-device", device)


async def start(
    ctx: NodeContext, inst: dict[str, Any], source: str, pkg: PackageSource | None, reinstall: bool
) -> None:
    """Start ``inst``'s helper VM; on any failure nothing of it is left."""
    name = inst["name"]
    if inst.get("hypervisor") != KvmHypervisor.NAME:  # the one that runs helper VMs
        raise errors.OpExecError(
            "Cannot run OS scripts in a virtualized environment for hypervisor"
            f" '{inst.get('hypervisor')}'"
        )
    wire = {key: value for key, value in inst.items() if key not in ("osspec", "config_drive")}
    wire["hvparams"] = {**inst.get("hvparams", {}), **HELPER_HVPARAMS}
    spec = InstanceSpec.from_wire(ctx.paths, wire)
    found = communication_tap(spec, str(ctx.paths.root))
    if found is None:
        raise errors.OpExecError(
            f"Instance {name} has no communication NIC: the helper VM gets its OS"
            " scripts from the metadata service through it"
        )
    try:
        path, fmt, package_path, os_dir = await asyncio.to_thread(
            _prepare, ctx, inst, source, pkg, reinstall
        )
        meta = metadata_of(InstanceSpec.from_wire(ctx.paths, inst))
        assert meta is not None  # the descriptor carries the OS spec (instance_spec)
        meta = replace(
            meta,
            # Again, with its secret values: the model keeps them for installs only.
            os=instance_spec(inst),
            os_dir=os_dir,
            package=package_path,
            install_package=str(_directory(ctx, name) / "os-install-package.tar.gz"),
            installing=True,
        )
        kvm = _kvm(ctx)
        # With use_namespaces, the image is bound into QEMU's mount namespace.
        drive = installer_drive(path, fmt)
        monitor = await kvm.start_with(spec, True, drive, binds=(Path(path),))
        try:
            await kvm.metad.publish_install(meta, *found)
            await monitor.execute("cont")
        except (DaemonStartError, client.MetadError) as err:
            raise errors.OpExecError(f"Cannot serve the helper VM its data: {err}") from None
    except BaseException:
        await stop(ctx, name)
        raise
    log.info("Started the helper VM of %s (install image %s)", name, source)


async def status(ctx: NodeContext, name: str) -> dict[str, Any]:
    """Whether the helper VM still runs, and the lines it reported since the last call."""
    kvm = _kvm(ctx)
    lines: list[str] = []
    # Withdrawn: the helper VM is gone (it waited until its last lines were taken).
    with contextlib.suppress(client.MetadError):
        lines = await client.progress(ctx.paths, name)
    return {"running": name in kvm.monitors, "lines": lines}


async def stop(ctx: NodeContext, name: str) -> None:
    """Kill the helper VM (if it runs), withdraw its data, remove its files."""
    kvm = _kvm(ctx)
    await kvm.stop(name, force=True)
    await kvm.metad.withdraw(name)
    directory = _directory(ctx, name)
    await asyncio.to_thread(shutil.rmtree, directory, True)
