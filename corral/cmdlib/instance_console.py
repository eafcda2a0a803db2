"""OP_INSTANCE_CONSOLE: how to reach a running instance's console."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.instance_base import InstanceLU
from corral.objects import ADMIN_DOWN, ADMIN_UP
from corral.opcodes import instance as opi
from corral.services.console import instance_consoles

# What a stopped instance's state is called in the refusal (Ganeti's INSTST_*).
_NOT_RUNNING = {ADMIN_UP: "ERROR_down", ADMIN_DOWN: "ADMIN_down"}


class LUInstanceConsole(InstanceLU):
    """Ganeti's LUInstanceConsole: no hooks, the instance locked shared; the
    result is the console dict of ``objects.InstanceConsole``."""

    OPCODE = opi.OpInstanceConsole

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = [self.instance.name]
        self.share_locks[C.LEVEL_INSTANCE] = True

    async def check_prereq(self) -> None:
        await super().check_prereq()
        node = self.pnode
        if node.offline:
            raise errors.OpPrereqError(f"Can't use offline node: {node.name}", C.ECODE_STATE)

    async def exec(self) -> Any:
        inst = self.instance
        if not await self.is_running():
            state = _NOT_RUNNING.get(inst.admin_state, "ADMIN_offline")
            raise errors.OpExecError(f"Instance {inst.name} is not running (state {state})")
        result = (await instance_consoles(self.master, [inst]))[inst.uuid]
        return result.get(f"Can't get the console of instance {inst.name}")
