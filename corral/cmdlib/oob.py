"""OP_OOB_COMMAND (``gnt-node power``, ``gnt-node health``, ``gnt-cluster
epo``): each node's out-of-band program (its ``oob_program`` node parameter),
run by the master's noded, with Ganeti's rules (LUOobCommand).

The answer has one entry per node, in nice order: ``[[RS_NORMAL, name],
[status, payload]]``, the status RS_UNAVAIL for a node without a program and
RS_NODATA for a failed run or an answer of the wrong shape (both warned
about); a failure of one node does not stop the others.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.config.manager import ConfigManager
from corral.nicesort import nice_key
from corral.objects import Node, NodeGroup
from corral.opcodes import node as opn
from corral.rpc.calls_node import run_oob
from corral.services.ndparams import node_ndparams

log = logging.getLogger(__name__)

# Never run on the master: it would cut the branch the job sits on.
SKIP_MASTER = (C.OOB_POWER_OFF, C.OOB_POWER_CYCLE)
# What a successful run records in the configuration.
POWERED_AFTER = {C.OOB_POWER_ON: True, C.OOB_POWER_OFF: False}


def supports_oob(cfg: ConfigManager, node: Node) -> str:
    """The node's out-of-band program, '' if it has none (Ganeti's SupportsOob)."""
    group = cfg.get(NodeGroup, node.group) or NodeGroup(uuid=node.group, name="")
    return str(node_ndparams(cfg.cluster, group, node)["oob_program"])


def payload_problems(command: str, payload: Any) -> list[str]:
    """What is wrong with a program's answer to ``command`` (Ganeti's
    _CheckPayload, and the shapes its users take for granted)."""
    if command == C.OOB_HEALTH:
        if not isinstance(payload, list):
            return [f"command 'health' is expected to return a list but got {type(payload)}"]
        problems = []
        for entry in payload:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                problems.append(f"health item {entry!r} is not a pair [item, status]")
            elif entry[1] not in C.OOB_STATUSES:
                problems.append(f"health item '{entry[0]}' has invalid status '{entry[1]}'")
        return problems
    if command == C.OOB_POWER_STATUS:
        if not isinstance(payload, dict):
            return [f"power-status is expected to return a dict but got {type(payload)}"]
        if not isinstance(payload.get(C.OOB_POWER_STATUS_POWERED), bool):
            expected = "{'powered': true or false}"
            return [f"power-status is expected to return {expected} but got {payload}"]
        return []
    if payload is not None:
        return [f"{command} is expected to not return payload but got '{payload}'"]
    return []


class LUOobCommand(LogicalUnit[opn.OpOobCommand]):
    """Runs the out-of-band command on the named nodes (none: every node, but
    the master for power-off and power-cycle)."""

    OPCODE = opn.OpOobCommand
    REQ_BGL = False

    def check_arguments(self) -> None:
        if self.op.timeout <= 0:
            raise errors.OpPrereqError(
                f"Invalid out-of-band timeout {self.op.timeout}: give a positive number of seconds",
                C.ECODE_INVAL,
            )
        if self.op.power_delay < 0:
            raise errors.OpPrereqError(
                f"Invalid power delay {self.op.power_delay}: give a number of seconds, at least 0",
                C.ECODE_INVAL,
            )

    def expand_names(self) -> None:
        named = self.op.node_names or self.op.node_uuids or []
        nodes = {node.uuid: node for node in (self.expand(Node, name) for name in named)}
        self.wanted = list(nodes)
        if named:
            self.op.node_uuids = self.wanted
            self.op.node_names = [node.name for node in nodes.values()]

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = self.wanted or ALL_SET

    async def check_prereq(self) -> None:
        master = self.cfg.master_node
        command = self.op.command
        if not self.wanted:
            skipped = master.uuid if command in SKIP_MASTER else None
            self.wanted = [n.uuid for n in self.cfg.nodes() if n.uuid != skipped]
        elif command in SKIP_MASTER and master.uuid in self.wanted:
            program = supports_oob(self.cfg, master)
            if program:
                regardless = (
                    f"run '{program} {command} {master.name}' if you want to operate on the"
                    " master regardless"
                )
            else:
                regardless = "it does not support out-of-band operations"
            raise errors.OpPrereqError(
                f"Operating on the master node {master.name} is not allowed for {command};"
                f" {regardless}",
                C.ECODE_INVAL,
            )
        self.nodes: list[Node] = []
        for uuid in self.wanted:
            node = self.cfg.get(Node, uuid)
            if node is None:
                raise errors.OpPrereqError(f"Node {uuid} not found", C.ECODE_NOENT)
            if command == C.OOB_POWER_OFF and not node.offline and not self.op.ignore_status:
                raise errors.OpPrereqError(
                    f"Cannot power off node {node.name} because it is not marked offline",
                    C.ECODE_STATE,
                )
            self.nodes.append(node)

    async def exec(self) -> Any:
        nodes = sorted(self.nodes, key=lambda n: nice_key(n.name))
        answer = []
        for index, node in enumerate(nodes):
            status, payload = await self._run(node)
            answer.append([[C.RS_NORMAL, node.name], [status, payload]])
            last = index == len(nodes) - 1
            if status == C.RS_NORMAL and self.op.command == C.OOB_POWER_ON and not last:
                await asyncio.sleep(self.op.power_delay)
        return answer

    async def _run(self, node: Node) -> tuple[int, Any]:
        """The node's entry: ``(status, payload)``; the node's power recorded."""
        program = supports_oob(self.cfg, node)
        if not program:
            return C.RS_UNAVAIL, None
        command = self.op.command
        log.info("Executing out-of-band command '%s' using '%s' on %s", command, program, node.name)
        request = run_oob(program, command, node.name, self.op.timeout)
        result = await self.master.rpc.result(self.master_node, request)
        if result.fail_msg is not None:
            self.warn(f"Out-of-band RPC failed on node '{node.name}': {result.fail_msg}")
            return C.RS_NODATA, None
        payload = result.payload
        problems = payload_problems(command, payload)
        if problems:
            self.warn(
                f"Payload returned by node '{node.name}' is not valid: Check of out-of-band"
                f" payload failed due to {', '.join(problems)}"
            )
            return C.RS_NODATA, None
        if command == C.OOB_HEALTH:
            for item, status in payload:
                if status in (C.OOB_STATUS_WARNING, C.OOB_STATUS_CRITICAL):
                    self.warn(f"Item '{item}' on node '{node.name}' has status '{status}'")
        elif command == C.OOB_POWER_STATUS:
            powered = payload[C.OOB_POWER_STATUS_POWERED]
            if powered != node.powered:
                log.warning(
                    "Recorded power state (%s) of node '%s' does not match actual power state (%s)",
                    node.powered,
                    node.name,
                    powered,
                )
        elif command in POWERED_AFTER:
            await self._record_power(node, POWERED_AFTER[command])
        return C.RS_NORMAL, payload

    async def _record_power(self, node: Node, powered: bool) -> None:
        """Record the node's new power state at once: the program has acted."""
        current = self.cfg.get(Node, node.uuid)
        if current is None or current.powered == powered:
            return
        changed = current.copy_for_update()
        assert isinstance(changed, Node)
        changed.powered = powered
        self.tx.update(changed)
        await self.checkpoint()
