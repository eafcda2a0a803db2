"""The master IP on a node, as Ganeti's backend brings it up and down.

The setup script (Corral's :mod:`corral.tools.master_ip_setup`, or the
site's at Ganeti's path ``<conf dir>/scripts/master-ip-setup`` when the
cluster's ``use_external_mip_script`` is set) runs with ``start`` or
``stop`` and Ganeti's four variables only; the node's ``master-ip-turnup``
or ``master-ip-turndown`` hooks run around it (``OP_CLUSTER_IP_TURNUP`` /
``OP_CLUSTER_IP_TURNDOWN``), a failing pre hook stopping it.

The node's own primary address is never taken down: on a small cluster the
master IP may be the master node's own address (it is by default), which is
not the master IP's to remove.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from pathlib import Path

from corral import constants as C
from corral import errors
from corral.hook_scripts import hooks_subdir, runnable_hooks
from corral.node.handlers.hooks import run_hook
from corral.paths import Paths
from corral.process.capture import read_capped
from corral.rpc.wire import MasterNetworkWire

log = logging.getLogger(__name__)

START = "start"
STOP = "stop"
# Seconds the script gets (Ganeti's fping alone may take a few).
SCRIPT_TIMEOUT = 60.0
_HOOKS = {
    START: ("master-ip-turnup", "OP_CLUSTER_IP_TURNUP"),
    STOP: ("master-ip-turndown", "OP_CLUSTER_IP_TURNDOWN"),
}


def script_env(params: MasterNetworkWire) -> dict[str, str]:
    """Ganeti's environment of the script (and of the local hooks)."""
    version = 6 if params["ip_family"] == socket.AF_INET6 else 4
    return {
        "MASTER_NETDEV": params["netdev"],
        "MASTER_IP": params["ip"],
        "MASTER_NETMASK": str(params["netmask"]),
        "CLUSTER_IP_VERSION": str(version),
    }


def external_script(paths: Paths) -> Path:
    """Where the site's own script is (Ganeti's EXTERNAL_MASTER_SETUP_SCRIPT)."""
    return paths.conf_dir / "scripts" / "master-ip-setup"


def script_command(paths: Paths, action: str, external: bool) -> list[str]:
    if external:
        return [str(external_script(paths)), action]
    return [sys.executable, "-m", "corral.tools.master_ip_setup", action]


async def run_script(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the setup script: its exit code (-1: could not run) and output."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**env, "PATH": C.HOOKS_PATH},
            cwd="/",
        )
    except OSError as err:
        return -1, f"Cannot execute {cmd[0]}: {err.strerror or err}"
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(SCRIPT_TIMEOUT):
            output, _ = await read_capped(proc.stdout, 64 * 1024)
            code = await proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    return code, output.decode("utf-8", "replace").strip()


async def _local_hooks(paths: Paths, action: str, phase: str, env: dict[str, str]) -> None:
    hpath, op_code = _HOOKS[action]
    hook_env = {
        "GANETI_HOOKS_VERSION": str(C.HOOKS_VERSION),
        "GANETI_OP_CODE": op_code,
        "GANETI_DATA_DIR": str(paths.data_dir),
        "GANETI_HOOKS_PHASE": phase,
        "GANETI_HOOKS_PATH": hpath,
        "PATH": C.HOOKS_PATH,
        **{f"GANETI_{key}": value for key, value in env.items()},
    }
    if phase == C.HOOKS_PHASE_POST:
        hook_env.update({f"GANETI_POST_{key}": value for key, value in env.items()})
    failed = []
    for script in runnable_hooks(paths.hooks_dir / hooks_subdir(hpath, phase)):
        hkr, output = await run_hook(script, hook_env)
        if hkr == C.HKR_FAIL:
            failed.append((script.name, output))
    if failed and phase == C.HOOKS_PHASE_PRE:
        raise errors.HooksAbort(f"Hook failure: {failed}")
    for name, output in failed:
        log.warning("Hook %s of %s failed: %s", name, hpath, output)


async def setup(paths: Paths, action: str, params: MasterNetworkWire, external: bool) -> None:
    """Bring the master IP up (``start``) or down (``stop``) on this node."""
    env = script_env(params)
    await _local_hooks(paths, action, C.HOOKS_PHASE_PRE, env)
    code, output = await run_script(script_command(paths, action, external), env)
    if code != 0:
        msg = f"Failed to {action} the master IP. Script return value: {code}, output: '{output}'"
        log.error("%s", msg)
        raise errors.OpExecError(msg)
    if output:
        log.info("master-ip-setup %s: %s", action, output)
    await _local_hooks(paths, action, C.HOOKS_PHASE_POST, env)
