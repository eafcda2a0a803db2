"""The config drive of a kvm instance: the ``cidata`` ISO built from the
start call's data (the wire instance's ``config_drive``), written root's only
(0600) in the node's run dir and attached read-only as a CD-ROM.

It is built again at each start, so what changed since reaches the guest
(its instance-id changes with the data), and removed with the guest's other
runtime files when it stops (:meth:`.runtime.Layout.remove`).  A migration's
target builds it from the same data (the source's runtime spec), so both
QEMUs have the same devices.  No secret value is on it: the master sends
stored parameters only, and the model drops secrets outside installs.
"""

from __future__ import annotations

import asyncio

from corral import errors
from corral.fileio import atomic_write
from corral.metad.configdrive import build_iso
from corral.metad.model import InstanceMetadata, RecordError
from corral.node.hypervisor.kvm.runtime import Layout
from corral.node.hypervisor.spec import InstanceSpec

DRIVE_ID = "cidata"


async def prepare(layout: Layout, spec: InstanceSpec) -> list[str]:
    """Write ``spec``'s config drive (if it asks for one) and return the QEMU
    options that attach it; a leftover drive of an earlier start goes."""
    path = layout.config_drive(spec.name)
    record = spec.wire.get("config_drive")
    if record is None:
        path.unlink(missing_ok=True)
        return []
    try:
        meta = InstanceMetadata.from_record(record)
    except RecordError as err:
        raise errors.OpExecError(f"Malformed config drive data for {spec.name}: {err}") from None
    image = await asyncio.to_thread(build_iso, meta)
    # Not synced: the run dir does not outlive a reboot, nor does the drive need to.
    await asyncio.to_thread(atomic_write, path, image, mode=0o600, durable=False)
    drive = f"file={path},format=raw,if=none,id={DRIVE_ID},media=cdrom,readonly=on"
    return ["-drive", drive, "-device", f"ide-cd,drive={DRIVE_ID},id={DRIVE_ID}-dev"]
