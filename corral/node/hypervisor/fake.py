"""The fake hypervisor: instances are state files, nothing really runs.

It is what Ganeti's virtual clusters use and what the tests use: each
"running" instance is a JSON file under ``<run dir>/fake-hypervisor`` with
its memory and vCPUs, and the node's free memory shrinks by what they use.

A migration moves the state file between nodes through the master's calls:
the source hands its state out (``migration_info``), the target keeps it as
``incoming`` (running there too, as a real hypervisor's receiving domain),
the source marks it ``migrating``, and the finalize steps keep one of them.

Test gates: a file ``<run dir>/fake-hypervisor-gates/<instance>.<step>``
makes the step (``start``, ``accept``, ``migrate``, ``finalize_src``, ``finalize_dst``)
stop, once, before it acts: it creates ``<...>.reached`` and waits until the
gate file is removed.

Test console: a unix socket ``<run dir>/fake-hypervisor-consoles/<instance>.serial``,
if a test serves one there, is the instance's serial console: ``console()``
then describes it as kvm does (kind ``ssh``) and noded's console relay
connects to it.  Without one the instance has Ganeti's fake console message.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral import hypervisors as H
from corral.fileio import atomic_write
from corral.node.hypervisor.base import REBOOT_SOFT, Hypervisor
from corral.node.hypervisor.spec import ConsoleInfo, InstanceInfo, InstanceSpec
from corral.node.meminfo import memory_info
from corral.paths import Paths

GATES_DIR = "fake-hypervisor-gates"
CONSOLES_DIR = "fake-hypervisor-consoles"
_GATE_POLL = 0.02  # seconds; only while a test holds a gate
_INCOMING = "incoming"
_MIGRATING = "migrating"


class FakeHypervisor(Hypervisor):
    NAME = H.HT_FAKE

    @property
    def state_dir(self) -> Path:
        return self.paths.run_dir / "fake-hypervisor"

    @classmethod
    def problem(cls, paths: Paths) -> str | None:
        state_dir = paths.run_dir / "fake-hypervisor"
        try:
            os.listdir(state_dir)
        except FileNotFoundError:
            return None
        except OSError as err:
            return f"cannot read its state: {err.strerror or err}"
        return None

    def _file(self, name: str) -> Path:
        if "/" in name or name.startswith("."):
            raise errors.OpExecError(f"Invalid instance name '{name}'")
        return self.state_dir / name

    async def start(self, spec: InstanceSpec, paused: bool = False) -> None:
        await self._gate("start", spec.name)
        path = self._file(spec.name)
        if path.exists():
            raise errors.OpExecError(f"Instance '{spec.name}' is already running")
        state = {
            "name": spec.name,
            "memory": spec.memory,
            "vcpus": spec.vcpus,
            "state": "paused" if paused else "running",
            "started": time.time(),
        }
        atomic_write(path, json.dumps(state).encode(), mode=0o600)

    async def stop(self, name: str, timeout: int = 120, force: bool = False) -> None:
        self._file(name).unlink(missing_ok=True)

    async def reboot(self, spec: InstanceSpec, kind: str, timeout: int) -> None:
        """soft: the same state, a new start time; hard: stopped and started again."""
        if kind != REBOOT_SOFT:
            await self.stop(spec.name, timeout)
            await self.start(spec)
            return
        name = spec.name
        path = self._file(name)
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise errors.OpExecError(f"Instance '{name}' is not running") from None
        state["started"] = time.time()
        atomic_write(path, json.dumps(state).encode(), mode=0o600)

    async def instances_info(self, names: Iterable[str] | None = None) -> list[InstanceInfo]:
        """Only the named instances' state files are read, when names are given."""
        if names is None:
            try:
                names = os.listdir(self.state_dir)
            except FileNotFoundError:
                return []
        return self._read_infos(names)

    def _read_infos(self, names: Iterable[str]) -> list[InstanceInfo]:
        out: list[InstanceInfo] = []
        # Plain os calls: a node lists its thousands of instances this way.
        directory = str(self.state_dir)
        now = time.time()
        for name in names:
            if "/" in name or name.startswith("."):
                continue  # a temporary file, or not an instance's name
            try:
                with open(os.path.join(directory, name), "rb") as state_file:
                    state = json.loads(state_file.read())
            except (OSError, ValueError):
                continue  # not running
            out.append(
                InstanceInfo(
                    name, state["memory"], state["vcpus"], state["state"], now - state["started"]
                )
            )
        return out

    def serial_socket(self, name: str) -> Path | None:
        """The test console's socket, if a test serves one (see the module's docstring)."""
        path = self.paths.run_dir / CONSOLES_DIR / f"{self._file(name).name}.serial"
        return path if path.is_socket() else None

    async def console(self, spec: InstanceSpec, node_name: str) -> ConsoleInfo:
        socket = self.serial_socket(spec.name)
        if socket is None:
            return ConsoleInfo(
                spec.name, C.CONS_MESSAGE, message="Console not available for fake hypervisor"
            )
        return ConsoleInfo(
            spec.name,
            C.CONS_SSH,
            host=node_name,
            user="root",
            command=("socat", "STDIO,raw,echo=0,escape=0x1d", f"UNIX-CONNECT:{socket}"),
        )

    @property
    def memory_file(self) -> Path:
        """If present, the node's memory in MiB (instead of the host's): lets
        the nodes of a test cluster on one machine differ."""
        return self.paths.conf_dir / "fake-hypervisor-memory"

    def _memory(self) -> dict[str, int]:
        try:
            total = int(self.memory_file.read_text())
        except FileNotFoundError:
            return memory_info()
        return {"memory_total": total, "memory_free": total, "memory_dom0": 0}

    async def node_info(self) -> dict[str, Any]:
        memory = self._memory()
        used = sum(info.memory for info in await self.instances_info())
        return {
            "memory_total": memory["memory_total"],
            "memory_free": max(memory["memory_free"] - used, 0),
            "memory_dom0": memory["memory_dom0"],
            "instances_memory": used,
        }

    # Migration
    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            state: dict[str, Any] = json.loads(self._file(name).read_text())
        except FileNotFoundError:
            return None
        return state

    def _write(self, state: dict[str, Any]) -> None:
        atomic_write(self._file(state["name"]), json.dumps(state).encode(), mode=0o600)

    async def _gate(self, step: str, name: str) -> None:
        """Stop at a test gate for ``step``, if one is set (see the module's docstring)."""
        gate = self.paths.run_dir / GATES_DIR / f"{name}.{step}"
        if not gate.exists():
            return
        reached = gate.with_name(gate.name + ".reached")
        reached.touch()
        while gate.exists():
            await asyncio.sleep(_GATE_POLL)
        reached.unlink(missing_ok=True)

    def _running(self, name: str) -> dict[str, Any]:
        state = self._read(name)
        if state is None or state["state"] == _INCOMING:
            raise errors.OpExecError(f"Instance '{name}' is not running")
        return state

    async def migration_info(self, spec: InstanceSpec) -> Any:
        state = self._running(spec.name)
        return {k: state[k] for k in ("memory", "vcpus", "started")}

    async def accept_instance(self, spec: InstanceSpec, info: Any, target: str) -> None:
        await self._gate("accept", spec.name)
        if self._file(spec.name).exists():
            raise errors.OpExecError("Can't accept instance, already running")
        self._write({**_carried(info), "name": spec.name, "state": _INCOMING})

    async def migrate_instance(
        self, cluster_name: str, spec: InstanceSpec, target: str, live: bool, accepted: Any = None
    ) -> None:
        await self._gate("migrate", spec.name)
        self._write({**self._running(spec.name), "state": _MIGRATING})

    async def migration_status(self, spec: InstanceSpec) -> dict[str, Any]:
        state = self._read(spec.name)
        done = state is not None and state["state"] == _MIGRATING
        return {"status": C.HV_MIGRATION_COMPLETED if done else "failed"}

    async def finalize_migration_dst(self, spec: InstanceSpec, info: Any, success: bool) -> None:
        await self._gate("finalize_dst", spec.name)
        state = self._read(spec.name)
        if success:
            # No information (a cleanup): what was received runs as it is.
            base = state if info is None and state is not None else _carried(info)
            self._write({**base, "name": spec.name, "state": "running"})
        elif state is not None and state["state"] == _INCOMING:
            # Only what was received goes: an instance that ran here before stays.
            self._file(spec.name).unlink(missing_ok=True)

    async def finalize_migration_src(self, spec: InstanceSpec, success: bool, live: bool) -> None:
        await self._gate("finalize_src", spec.name)
        state = self._read(spec.name)
        if success:
            self._file(spec.name).unlink(missing_ok=True)
        elif state is not None and state["state"] == _MIGRATING:
            self._write({**state, "state": "running"})


def _carried(info: Any) -> dict[str, Any]:
    """The state the source handed out, checked (it crossed the network twice)."""
    try:
        return {
            "memory": int(info["memory"]),
            "vcpus": int(info["vcpus"]),
            "started": float(info["started"]),
        }
    except (TypeError, KeyError, ValueError):
        raise errors.OpExecError(f"Invalid migration information: {info!r}") from None
