"""The fake hypervisor: instances are state files, nothing really runs.

It is what Ganeti's virtual clusters use and what the tests use: each
"running" instance is a JSON file under ``<run dir>/fake-hypervisor`` with
its memory and vCPUs, and the node's free memory shrinks by what they use.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from corral import errors
from corral.fileio import atomic_write
from corral.node.hypervisor.base import Hypervisor
from corral.node.meminfo import memory_info


class FakeHypervisor(Hypervisor):
    NAME = "fake"

    @property
    def state_dir(self) -> Path:
        return self.paths.run_dir / "fake-hypervisor"

    def _file(self, name: str) -> Path:
        if "/" in name or name.startswith("."):
            raise errors.OpExecError(f"Invalid instance name '{name}'")
        return self.state_dir / name

    async def start(self, inst: dict[str, Any], paused: bool = False) -> None:
        path = self._file(inst["name"])
        if path.exists():
            raise errors.OpExecError(f"Instance '{inst['name']}' is already running")
        state = {
            "name": inst["name"],
            "memory": int(inst["memory"]),
            "vcpus": int(inst["vcpus"]),
            "state": "paused" if paused else "running",
            "started": time.time(),
        }
        atomic_write(path, json.dumps(state).encode(), mode=0o600)

    async def stop(self, name: str, force: bool = False, timeout: int = 120) -> None:
        self._file(name).unlink(missing_ok=True)

    async def reboot(self, name: str) -> None:
        path = self._file(name)
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise errors.OpExecError(f"Instance '{name}' is not running") from None
        state["started"] = time.time()
        atomic_write(path, json.dumps(state).encode(), mode=0o600)

    async def rename(self, old: str, new: str) -> None:
        if self._file(old).exists():
            raise errors.OpExecError(f"Instance '{old}' is running; stop it before a rename")

    def instances_info(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        try:
            names = os.listdir(self.state_dir)
        except FileNotFoundError:
            return out
        for name in names:
            try:
                state = json.loads((self.state_dir / name).read_text())
            except (OSError, ValueError):
                continue
            out[name] = {
                "memory": state["memory"],
                "vcpus": state["vcpus"],
                "state": state["state"],
                "time": time.time() - state["started"],
            }
        return out

    def node_info(self) -> dict[str, Any]:
        memory = memory_info()
        used = sum(i["memory"] for i in self.instances_info().values())
        return {
            "memory_total": memory["memory_total"],
            "memory_free": max(memory["memory_free"] - used, 0),
            "memory_dom0": memory["memory_dom0"],
            "instances_memory": used,
        }
