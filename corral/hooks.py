"""Hooks on the master side: the environment and where the scripts run.

The environment follows Ganeti's hooks interface: every variable of the unit
is prefixed ``GANETI_`` in the pre phase and ``GANETI_POST_`` in the post
phase (where the pre-phase variables are kept too), values go through
``str()``.  The scripts themselves run on the nodes (noded's hooks_runner).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.rpc.client import RpcResult

log = logging.getLogger(__name__)


def hook_value(value: Any) -> str:
    """Ganeti passes every value through str(): True, False, None, 128, ['a'].

    Space-separated lists (INSTANCE_SECONDARIES, tags) are joined by the units.
    """
    return str(value)


class HooksMaster:
    """Runs one logical unit's hooks on the right nodes."""

    def __init__(self, lu: LogicalUnit[Any]) -> None:
        self._lu = lu
        self._pre_env: dict[str, str] | None = None

    def _base_env(self, hpath: str, phase: str) -> dict[str, str]:
        cfg = self._lu.cfg
        env = {
            "GANETI_HOOKS_VERSION": str(C.HOOKS_VERSION),
            "GANETI_OP_CODE": self._lu.op.OP_ID,
            "GANETI_DATA_DIR": str(self._lu.master.paths.data_dir),
            "GANETI_HOOKS_PHASE": phase,
            "GANETI_HOOKS_PATH": hpath,
            "GANETI_CLUSTER": cfg.cluster.name,
            "GANETI_MASTER": cfg.master_node.name,
        }
        if self._lu.HTYPE:
            env["GANETI_OBJECT_TYPE"] = self._lu.HTYPE
        return env

    def _unit_env(self, prefix: str) -> dict[str, str]:
        return {f"{prefix}{k}": hook_value(v) for k, v in self._lu.build_hooks_env().items()}

    def pre_env(self) -> dict[str, str]:
        if self._pre_env is None:
            assert self._lu.HPATH
            self._pre_env = self._unit_env("GANETI_")
        return self._pre_env

    async def run_pre(self) -> None:
        """Run the pre hooks; a failing script aborts the operation."""
        if not self._lu.HPATH:
            return
        pre_nodes, _ = self._lu.build_hooks_nodes()
        env = {**self._base_env(self._lu.HPATH, C.HOOKS_PHASE_PRE), **self.pre_env()}
        results = await self._run(pre_nodes, self._lu.HPATH, C.HOOKS_PHASE_PRE, env)
        failures = []
        for node_uuid, res in results.items():
            if res.fail_msg:
                self._lu.warn(
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
        if not self._lu.HPATH:
            return result
        _, post_nodes = self._lu.build_hooks_nodes()
        env = {
            **self._base_env(self._lu.HPATH, C.HOOKS_PHASE_POST),
            **self.pre_env(),
            **self._unit_env("GANETI_POST_"),
        }
        results = await self._run(post_nodes, self._lu.HPATH, C.HOOKS_PHASE_POST, env)
        self._report_post(results)
        return self._lu.hooks_callback(C.HOOKS_PHASE_POST, results, result)

    async def run_config_update(self) -> None:
        """The ``config-update`` post hooks on the master, after a config change."""
        env = self._base_env(C.HOOKS_NAME_CFGUPDATE, C.HOOKS_PHASE_POST)
        if self._lu.HPATH:
            env.update(self.pre_env())
        master = self._lu.cfg.master_node.uuid
        results = await self._run([master], C.HOOKS_NAME_CFGUPDATE, C.HOOKS_PHASE_POST, env)
        self._report_post(results)

    def _report_post(self, results: dict[str, RpcResult]) -> None:
        for node_uuid, res in results.items():
            if res.fail_msg:
                self._lu.warn(
                    f"Communication failure to node {self._name(node_uuid)}: "
                    f"{res.fail_msg}; its post hooks were not run"
                )
                continue
            for script, hkr, output in res.payload:
                if hkr == C.HKR_FAIL:
                    # Ganeti's wording (HooksMaster.RunPhase).
                    shown = str(output).strip() or "(no output)"
                    text = f"On {self._name(node_uuid)} script {script} failed, output: {shown}"
                    self._lu.warn(text)
                    log.warning("Post hook: %s", text)

    async def _run(
        self, node_uuids: list[str], hpath: str, phase: str, env: dict[str, str]
    ) -> dict[str, RpcResult]:
        targets = self._lu.node_addresses(list(dict.fromkeys(node_uuids)))
        if not targets:
            return {}
        return await self._lu.master.rpc.call(targets, "hooks_runner", [hpath, phase, env])

    def _name(self, node_uuid: str) -> str:
        from corral.objects import Node

        node = self._lu.cfg.get(Node, node_uuid)
        return node.name if node is not None else node_uuid
