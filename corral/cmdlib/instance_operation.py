"""Starting, stopping, rebooting and reinstalling instances."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.cmdlib import helper_vm, installer, instance_disks, os_media
from corral.cmdlib import instance_utils as U
from corral.cmdlib.instance_base import InstanceLU
from corral.objects import ADMIN_DOWN, ADMIN_UP
from corral.opcodes import instance as opi
from corral.osdef import guest_settings, install_settings, media
from corral.osdef.spec import OsSpec
from corral.rpc.calls_instance import instance_reboot, instance_shutdown, instance_start
from corral.services.params import filled_beparams, filled_hvparams


class LUInstanceStartup(InstanceLU):
    OPCODE = opi.OpInstanceStartup
    HPATH = "instance-start"
    NEEDS_NODE_RES = True

    def check_arguments(self) -> None:
        self.beparams = P.check_beparams(self.op.beparams)

    async def check_prereq(self) -> None:
        await super().check_prereq()
        if self.instance.admin_state == "offline":
            raise errors.OpPrereqError(
                f"Instance '{self.instance.name}' is marked offline", C.ECODE_STATE
            )
        inst = self.instance
        self.hvparams = P.check_hvparams(inst.hypervisor, self.op.hvparams)
        if self.hvparams:
            filled = P.fill(filled_hvparams(self.cfg.cluster, inst), self.hvparams)
            P.check_filled_hvparams(inst.hypervisor, filled)
            await U.check_hvparams_on_nodes(self, [self.pnode], inst.hypervisor, filled)
        self.already_running = await self.is_running()
        if not self.already_running:
            be = P.fill(filled_beparams(self.cfg.cluster, self.instance), self.beparams)
            await U.check_node_resources(
                self,
                self.pnode,
                self.instance.hypervisor,
                be["maxmem"],
                0,
                f"starting instance {self.instance.name}",
            )

    def build_hooks_env(self) -> dict[str, Any]:
        return {**super().build_hooks_env(), "FORCE": self.op.force}

    async def exec(self) -> Any:
        inst = self.updated()
        if not self.op.no_remember and self.instance.admin_state != ADMIN_UP:
            inst.admin_state = ADMIN_UP
            inst.admin_state_source = "admin"
            self.tx.update(inst)
        if self.already_running:
            return None
        desc = U.first_boot(self.start_descriptor(), inst)
        desc["beparams"] = P.fill(desc["beparams"], self.beparams)
        desc["hvparams"] = P.fill(desc["hvparams"], self.hvparams)
        desc["memory"], desc["vcpus"] = desc["beparams"]["maxmem"], desc["beparams"]["vcpus"]
        await instance_disks.link_copies(self, inst)
        await self.node_call(
            instance_start(desc, self.op.startup_paused), "Could not start instance"
        )
        # The start made the disks ready on their nodes (Ganeti's StartInstanceDisks).
        if not inst.disks_active or inst.self_install:
            inst.disks_active = True
            if inst.self_install:
                self.feedback("First start after the install done with the install parameters")
            inst.self_install = False  # back to run mode
            self.tx.update(inst)
        return None


# Ganeti's INSTANCE_ONLINE admin states.
ONLINE = (ADMIN_DOWN, ADMIN_UP)


class LUInstanceShutdown(InstanceLU):
    OPCODE = opi.OpInstanceShutdown
    HPATH = "instance-stop"

    def build_hooks_env(self) -> dict[str, Any]:
        return {**super().build_hooks_env(), "TIMEOUT": self.op.timeout}

    async def check_prereq(self) -> None:
        await super().check_prereq()
        if self.op.force:
            self.warn("Ignoring offline instance check")
        else:
            await self.check_state(ONLINE, "can't use instance from outside down, up states")

    async def exec(self) -> Any:
        # An offline instance stays offline (marking it down would online it).
        source = self.op.admin_state_source or "admin"
        current = (self.instance.admin_state, self.instance.admin_state_source)
        inst = self.updated()
        if not self.op.no_remember and current[0] in ONLINE and current != (ADMIN_DOWN, source):
            inst.admin_state = ADMIN_DOWN
            inst.admin_state_source = source
            self.tx.update(inst)
        await self.node_call(
            instance_shutdown(self.instance.hypervisor, self.instance.name, self.op.timeout),
            "Could not shutdown instance",
        )
        # As Ganeti's ShutdownInstanceDisks after the instance stopped.
        if inst.disks_active:
            inst.disks_active = False
            self.tx.update(inst)
        return None


class LUInstanceReboot(InstanceLU):
    OPCODE = opi.OpInstanceReboot
    HPATH = "instance-reboot"
    NEEDS_NODE_RES = True

    def build_hooks_env(self) -> dict[str, Any]:
        return {
            **super().build_hooks_env(),
            "IGNORE_SECONDARIES": self.op.ignore_secondaries,
            "REBOOT_TYPE": self.op.reboot_type,
            "SHUTDOWN_TIMEOUT": self.op.shutdown_timeout,
        }

    async def check_prereq(self) -> None:
        await super().check_prereq()
        if self.instance.admin_state == "offline":
            raise errors.OpPrereqError(
                f"Instance '{self.instance.name}' is marked offline", C.ECODE_STATE
            )

    async def exec(self) -> Any:
        desc = self.start_descriptor()  # a hard reboot starts the guest again
        running = await self.is_running()
        if running and self.op.reboot_type in ("soft", "hard"):
            await self.node_call(
                instance_reboot(desc, self.op.reboot_type, self.op.shutdown_timeout),
                "Could not reboot instance",
            )
        else:
            if running:
                inst = self.instance
                await self.node_call(
                    instance_shutdown(inst.hypervisor, inst.name, self.op.shutdown_timeout),
                    "Could not shutdown instance for full reboot",
                )
            await instance_disks.link_copies(self, self.instance)
            await self.node_call(
                instance_start(desc, False), "Could not start instance for full reboot"
            )
        if self.instance.admin_state != ADMIN_UP:
            inst = self.updated()
            inst.admin_state = ADMIN_UP
            self.tx.update(inst)
        return None


class LUInstanceReinstall(InstanceLU):
    """Runs the OS create script again (optionally another OS, new parameters)."""

    OPCODE = opi.OpInstanceReinstall
    HPATH = "instance-reinstall"

    async def check_prereq(self) -> None:
        await super().check_prereq()
        inst = self.instance
        if not inst.disks:
            raise errors.OpPrereqError(f"Instance '{inst.name}' has no disks", C.ECODE_INVAL)
        await self.check_state((ADMIN_DOWN,), "cannot reinstall")
        op = self.op
        self.os_name = op.os_type or inst.os
        self.public = P.apply_changes(inst.osparams, op.osparams or {})
        self.private = P.apply_changes(inst.osparams_private, op.osparams_private or {})
        secret = op.osparams_secret or {}
        self.image = os_media.image_of(self.public)
        self.package = media.check_package(self.public, self.private, secret)
        guest_settings.check(self.public, self.private, secret)
        install_settings.check(self.public, self.private, secret)
        self.install_hvparams = U.install_hvparams(inst.hypervisor, self.public)
        if not self.os_name and self.image is None:
            raise errors.OpPrereqError(
                f"Instance '{inst.name}' has no OS and no OS image; give one with -o"
                f" or --os-parameters {media.OS_IMAGE}=PATH|URL",
                C.ECODE_INVAL,
            )
        self.os_spec: OsSpec | None = None
        self.helper: helper_vm.HelperVM | None = None
        if self.os_name:
            info = await U.node_os_info(self, self.pnode, self.os_name)
            U.check_variant(self.os_name, info, op.force_variant)
            U.check_params_declared(self.os_name, info, [*self.public, *self.private, *secret])
            scripts = media.without_credentials(secret)
            self.os_spec = U.job_os_spec(self, self.os_name, self.public, self.private, scripts)
            self._check_helper(bool(info["trusted"]))
            # As Ganeti's CheckOSParams: the merged parameters the create script will
            # get are verified on every reinstall, new ones given or not (on the
            # node: not an untrusted OS's).
            if info["trusted"]:
                await U.verify_osparams(self, [self.pnode], self.os_spec)
        if self.image is not None:
            await os_media.check_image(self, self.pnode, self.image, inst.disks[0].size)
        if self.package is not None:
            await os_media.check_package(self, self.pnode, self.package)

    def _check_helper(self, trusted: bool) -> None:
        """The helper VM, if the create script runs in one (see helper_vm.wanted)."""
        inst = self.instance
        safe = install_settings.safe_install(self.public)
        if not helper_vm.wanted(self, self.os_name, trusted, safe, inst.hypervisor):
            return
        if not U.has_communication_nic(inst):
            raise errors.OpPrereqError(
                f"Installing OS '{self.os_name}' in the helper VM needs the instance"
                f" communication NIC: gnt-instance modify --communication=yes {inst.name}",
                C.ECODE_INVAL,
            )
        self.helper = helper_vm.HelperVM.of(self)

    async def exec(self) -> Any:
        inst = self.updated()
        inst.os = self.os_name
        inst.osparams = self.public
        inst.osparams_private = self.private
        if self.os_name != self.instance.os:
            self.feedback(f"Changing OS to '{self.os_name}'...")
        if self.image is not None and media.OS_IMAGE in (self.op.osparams or {}):
            self.feedback(f"Using OS image '{self.image}'")
        target = installer.Target(inst, self.pnode, self.os_spec)
        kind = installer.Fresh(
            self.image, bool(self.os_name), self.package, reinstall=True, helper=self.helper
        )
        await installer.install(self, target, kind)
        inst.self_install = bool(self.install_hvparams)
        self.tx.update(inst)
        return None
