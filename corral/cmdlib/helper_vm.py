"""design-os's ``install`` mode, the master's side: where an OS create script
runs, and running it in the instance's helper VM.

An OS definition that is not trusted (it has ``create_untrusted`` only) is
installed only in the helper VM; a trusted one on the node, unless the
operation asks for the helper VM (``enable_safe_install``; Corral's extension:
Ganeti 3.0.2 has the design's ``--enable-safe-install`` nowhere).  The helper
VM boots the cluster's install image (``gnt-cluster modify --install-image``)
with the instance's disks and NICs; metad serves it the OS scripts, the
parameters and the personalization package; it reports into the job log and
powers off.  Its time limits are Ganeti's: ``helper_startup_timeout`` (5 min)
until its first report, ``helper_shutdown_timeout`` (2 h) until it powers off.
Whatever happens, it does not outlive the operation.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors, hypervisors
from corral.osdef.media import PackageSource
from corral.rpc.calls_osmedia import helper_vm_start, helper_vm_status, helper_vm_stop

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.cmdlib.installer import Target

# Ganeti's HELPER_VM_STARTUP and HELPER_VM_SHUTDOWN (seconds).
STARTUP_TIMEOUT = 5 * 60
WORK_TIMEOUT = 2 * 60 * 60
# Seconds between two looks at the helper VM.
POLL_EVERY = 1.0
# Ganeti's log prefix for the helper VM of an OS create script.
PREFIX = "Running OS create script"
# The appliance's last report (scripts/install-image/init).
RESULT = "CORRAL-INSTALL-RESULT "


def wanted(
    lu: LogicalUnit[Any],
    os_name: str,
    trusted: bool,
    safe_install: bool | None,
    hypervisor: str,
) -> bool:
    """Whether the OS scripts run in the helper VM; OpPrereqError (nothing is
    created) if they must and cannot, or may not and must."""
    if trusted and not safe_install:
        return False
    if not trusted and safe_install is False:
        raise errors.OpPrereqError(
            f"OS '{os_name}' is not trusted (it has create_untrusted only): it can be"
            " installed only in the helper VM; drop --enable-safe-install=no",
            C.ECODE_INVAL,
        )
    if not hypervisors.runs_helper_vm(hypervisor):
        raise errors.OpPrereqError(
            f"Cannot run OS scripts in a virtualized environment for hypervisor '{hypervisor}'",
            C.ECODE_INVAL,
        )
    if not lu.cfg.cluster.install_image:
        raise errors.OpPrereqError(
            "Cannot create install instance because an install image has not been"
            " specified; set one with gnt-cluster modify --install-image=PATH|URL",
            C.ECODE_STATE,
        )
    return True


@dataclass(frozen=True)
class HelperVM:
    """The helper VM of one install: the image it boots and its time limits."""

    image: str
    startup_timeout: float = STARTUP_TIMEOUT
    work_timeout: float = WORK_TIMEOUT

    @classmethod
    def of(
        cls, lu: LogicalUnit[Any], startup: int | None = None, work: int | None = None
    ) -> HelperVM:
        """The cluster's install image with the operation's time limits (None: Ganeti's)."""
        return cls(
            lu.cfg.cluster.install_image,
            STARTUP_TIMEOUT if startup is None else startup,
            WORK_TIMEOUT if work is None else work,
        )

    async def install(
        self, lu: LogicalUnit[Any], target: Target, package: PackageSource | None, reinstall: bool
    ) -> None:
        """Run the OS create script (then unpack ``package``) in the helper VM."""
        node, name = target.node, target.inst.name
        rpc = lu.master.rpc
        lu.feedback(f"{PREFIX}: Starting helper VM")
        wire = package.to_wire() if package is not None else None
        await rpc.run(
            node,
            helper_vm_start(target.descriptor(lu), self.image, wire, reinstall),
            f"{PREFIX}: Could not start helper VM with image {self.image}",
        )
        try:
            result = await self._follow(lu, target)
        finally:
            what = f"{PREFIX}: Could not shut down helper VM with image {self.image}"
            await asyncio.shield(rpc.attempt(node, helper_vm_stop(name), lu.warn, what))
        if result != "ok":
            raise errors.OpExecError(
                f"Could not add os for instance {name} on node {node.name}: the helper VM"
                f" reported: {result or 'nothing (it stopped without a result)'}"
            )
        lu.feedback(f"{PREFIX}: Helper VM execution completed")

    async def _follow(self, lu: LogicalUnit[Any], target: Target) -> str | None:
        """Relay the helper VM's reports until it powers off; its result."""
        rpc, node, name = lu.master.rpc, target.node, target.inst.name
        deadline = time.monotonic() + self.startup_timeout
        up, result = False, None
        while True:
            status = await rpc.run(
                node, helper_vm_status(name), f"{PREFIX}: Cannot follow the helper VM"
            )
            for line in status["lines"]:
                if not up:
                    up, deadline = True, time.monotonic() + self.work_timeout
                    lu.feedback(f"{PREFIX}: Helper VM is up")
                if line.startswith(RESULT):
                    result = line.removeprefix(RESULT)
                else:
                    lu.feedback(f"{PREFIX}: {line}")
            if not status["running"]:
                return result
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL_EVERY)
        if not up:
            raise errors.OpExecError(f"{PREFIX}: Could not boot instance using image {self.image}")
        lu.warn(
            f"{PREFIX}: Helper VM has not finished within the timeout; shutting it down forcibly"
        )
        raise errors.OpExecError(f"Error running helper VM with image {self.image}")
