"""Hooks on the master side: the environment and where the scripts run.

Whatever runs hooks describes itself in a :class:`HookSpec` (a logical unit
does so in ``LogicalUnit.hooks``); the runner needs nothing else.

The environment follows Ganeti's hooks interface: every variable of the unit
is prefixed ``GANETI_`` in the pre phase and ``GANETI_POST_`` in the post
phase (where the pre-phase variables are kept too), values go through
``str()``.  The scripts themselves run on the nodes (noded's hooks_runner).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.hook_scripts import hooks_subdir, runnable_hooks
from corral.rpc.calls_node import hooks_runner
from corral.rpc.result import NodeAddress, RpcResult

if TYPE_CHECKING:
    from corral.services.context import Master

log = logging.getLogger(__name__)

# Node uuid → the scripts run there: [[relpath, hkr, output], ...].
HookResults = dict[str, RpcResult[list[list[Any]]]]


def hook_value(value: Any) -> str:
    """Ganeti passes every value through str(): True, False, None, 128, ['a'].

    Space-separated lists (INSTANCE_SECONDARIES, tags) are joined by the units.
    """
    return str(value)


def _keep_result(phase: str, results: HookResults, result: Any) -> Any:
    return result


@dataclass
class HookSpec:
    """What an operation tells the hooks runner about itself."""

    hpath: str | None  # the hooks directory's name; None: the operation has no hooks
    htype: str | None  # GANETI_OBJECT_TYPE
    op_id: str
    env: Callable[[], dict[str, Any]]  # the operation's variables, without GANETI_
    nodes: Callable[[], tuple[list[str], list[str]]]  # node uuids: pre, post
    warn: Callable[[str], None]  # a warning for the user
    # Folds the post hooks' results into the operation's result (cluster verify).
    callback: Callable[[str, HookResults, Any], Any] = _keep_result


class HooksMaster:
    """Runs one operation's hooks on the right nodes."""

    def __init__(self, master: Master, spec: HookSpec) -> None:
        self._master = master
        self._spec = spec
        self._pre_env: dict[str, str] | None = None

    def _base_env(self, hpath: str, phase: str) -> dict[str, str]:
        cfg = self._master.cfg
        env = {
            "GANETI_HOOKS_VERSION": str(C.HOOKS_VERSION),
            "GANETI_OP_CODE": self._spec.op_id,
            "GANETI_DATA_DIR": str(self._master.paths.data_dir),
            "GANETI_HOOKS_PHASE": phase,
            "GANETI_HOOKS_PATH": hpath,
            "GANETI_CLUSTER": cfg.cluster.name,
            "GANETI_MASTER": cfg.master_node.name,
        }
        if self._spec.htype:
            env["GANETI_OBJECT_TYPE"] = self._spec.htype
        return env

    def _unit_env(self, prefix: str) -> dict[str, str]:
        return {f"{prefix}{k}": hook_value(v) for k, v in self._spec.env().items()}

    def pre_env(self) -> dict[str, str]:
        if self._pre_env is None:
            assert self._spec.hpath
            self._pre_env = self._unit_env("GANETI_")
        return self._pre_env

    async def run_pre(self) -> None:
        """Run the pre hooks; a failing script aborts the operation."""
        hpath = self._spec.hpath
        if not hpath:
            return
        pre_nodes, _ = self._spec.nodes()
        env = {**self._base_env(hpath, C.HOOKS_PHASE_PRE), **self.pre_env()}
        results = await self._run(pre_nodes, hpath, C.HOOKS_PHASE_PRE, env)
        failures = []
        for node_uuid, res in results.items():
            if res.fail_msg:
                self._spec.warn(
                    f"Communication failure to node {self._name(node_uuid)}: "
                    f"{res.fail_msg}; its pre hooks were not run"
                )
                continue
            for script, hkr, output in res.payload:
                if hkr == C.HKR_FAIL:
                    failures.append((self._name(node_uuid), script, output))
        if failures:
            raise errors.HooksAbort(failures)

    async def run_post(self, result: Any) -> Any:
        """Run the post hooks; failures are only reported."""
        hpath = self._spec.hpath
        if not hpath:
            return result
        _, post_nodes = self._spec.nodes()
        env = {
            **self._base_env(hpath, C.HOOKS_PHASE_POST),
            **self.pre_env(),
            **self._unit_env("GANETI_POST_"),
        }
        results = await self._run(post_nodes, hpath, C.HOOKS_PHASE_POST, env)
        self._report_post(results)
        return self._spec.callback(C.HOOKS_PHASE_POST, results, result)

    async def run_config_update(self) -> None:
        """The ``config-update`` post hooks on the master, after a config change."""
        env = self._base_env(C.HOOKS_NAME_CFGUPDATE, C.HOOKS_PHASE_POST)
        if self._spec.hpath:
            env.update(self.pre_env())
        master = self._master.cfg.master_node.uuid
        results = await self._run([master], C.HOOKS_NAME_CFGUPDATE, C.HOOKS_PHASE_POST, env)
        self._report_post(results)

    def _report_post(self, results: HookResults) -> None:
        for node_uuid, res in results.items():
            if res.fail_msg:
                self._spec.warn(
                    f"Communication failure to node {self._name(node_uuid)}: "
                    f"{res.fail_msg}; its post hooks were not run"
                )
                continue
            for script, hkr, output in res.payload:
                if hkr == C.HKR_FAIL:
                    # Ganeti's wording (HooksMaster.RunPhase).
                    shown = str(output).strip() or "(no output)"
                    text = f"On {self._name(node_uuid)} script {script} failed, output: {shown}"
                    self._spec.warn(text)
                    log.warning("Post hook: %s", text)

    async def _run(
        self, node_uuids: list[str], hpath: str, phase: str, env: dict[str, str]
    ) -> HookResults:
        rpc = self._master.rpc
        targets: list[NodeAddress] = []
        skipped: HookResults = {}
        for target in node_addresses(self._master, list(dict.fromkeys(node_uuids))):
            uuid, address = target
            down = rpc.reachability.down(address)
            if down is None:
                targets.append(target)
            else:
                # As Ganeti with a node it cannot reach: its hooks are skipped with
                # a warning; a node known to be down is not waited for again.
                msg = f"not asked: {down.describe()}"
                skipped[uuid] = RpcResult(uuid, "hooks_runner", fail_msg=msg, offline=True)
        master = self._master.cfg.cluster.master_node
        if any(uuid == master for uuid, _ in targets) and not await asyncio.to_thread(
            runnable_hooks, self._master.paths.hooks_dir / hooks_subdir(hpath, phase)
        ):
            # masterd runs on the master node: with no script there, noded's answer
            # is known (nothing ran) and its round trip is saved on every job.
            targets = [target for target in targets if target.uuid != master]
            skipped[master] = RpcResult(master, "hooks_runner", payload=[])
        if not targets:
            return skipped
        return {**skipped, **await rpc.results(targets, hooks_runner(hpath, phase, env))}

    def _name(self, node_uuid: str) -> str:
        from corral.objects import Node

        node = self._master.cfg.get(Node, node_uuid)
        return node.name if node is not None else node_uuid


def node_addresses(master: Master, uuids: list[str]) -> list[NodeAddress]:
    """``(uuid, address)`` of the nodes that can be called (known, not offline)."""
    from corral.objects import Node

    out = []
    for uuid in uuids:
        node = master.cfg.get(Node, uuid)
        if node is not None and not node.offline:
            out.append(NodeAddress(uuid, node.primary_ip))
    return out
