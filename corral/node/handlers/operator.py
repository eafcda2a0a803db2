"""``gnt-cluster command`` and ``copyfile`` on this node (the calls of
:mod:`corral.rpc.calls_operator`), as Ganeti's root ssh and ``scp -p`` do them.

A command runs with ``/bin/sh -c`` in the environment sshd gives a login: the
user's name, home and shell and a fixed PATH, nothing of noded's own (but
``CORRAL_ROOT`` on a node whose root is not ``/``, so that the gnt-* commands
it runs act on this node, as Ganeti's virtual clusters set their root); its
standard input is empty, its directory the home directory, its session its
own.  Each output stream is kept up to CLUSTER_COMMAND_MAX_OUTPUT bytes; after
CLUSTER_COMMAND_TIMEOUT seconds the whole session is killed.  A command killed
by a signal returns 255, as ssh does.

A copy goes to an absolute path whose directory exists (scp's rules),
through a symbolic link as scp writes, never onto a directory or a device.  The
file is replaced atomically with the master's mode (set-id bits included) and
times; an existing file keeps its owner, a new one is noded's user's (root).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import posixpath
import pwd
import stat
from pathlib import Path

from corral import constants as C
from corral import errors
from corral.fileio import atomic_write
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.osdef.runner import kill_session
from corral.paths import ROOT_ENV, Paths
from corral.process.capture import CappedOutput, capture
from corral.rpc import calls_operator as calls
from corral.rpc.wire import CommandResult

log = logging.getLogger(__name__)

SHELL = "/bin/sh"
# sshd's PATH for root (Debian's): gnt-* and the system's tools.
COMMAND_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# ssh's exit code when the remote command died of a signal.
SIGNALLED = 255
# Seconds a killed command's pipes get to close (a process that left the
# session may hold them).
# Characters of a command shown in the log.
_LOGGED = 1000


def _shown(command: str) -> str:
    """The command on one line of the log."""
    text = command.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= _LOGGED else text[:_LOGGED] + "..."


def command_environment(paths: Paths) -> dict[str, str]:
    """The environment of a command: a login's, for noded's user."""
    uid = os.geteuid()
    try:
        user = pwd.getpwuid(uid)
        name, home, shell = user.pw_name, user.pw_dir, user.pw_shell
    except KeyError:  # a user without a passwd entry
        name, home, shell = str(uid), "/", SHELL
    env = {"HOME": home, "USER": name, "LOGNAME": name, "SHELL": shell or SHELL}
    env["PATH"] = COMMAND_PATH
    if paths.root != Path("/"):
        env[ROOT_ENV] = str(paths.root)
    return env


def _text(output: CappedOutput, what: str) -> str:
    text = output.kept.decode("utf-8", "surrogateescape")
    if output.dropped:
        text += f"\n[{output.dropped} more bytes of {what} not kept]\n"
    return text


async def execute(
    command: str,
    env: dict[str, str],
    timeout: float,
    max_output: int = C.CLUSTER_COMMAND_MAX_OUTPUT,
) -> CommandResult:
    """Run ``command`` with ``/bin/sh -c``; its output (``max_output`` bytes of
    each stream at most) and exit code."""
    home = env.get("HOME", "/")
    try:
        proc = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=home if os.path.isdir(home) else "/",
            start_new_session=True,
        )
    except OSError as exc:
        raise errors.OpExecError(f"Cannot run {SHELL}: {exc.strerror or exc}") from None
    out, err, timed_out = await capture(proc, max_output, timeout, kill_session)
    code = await proc.wait()
    stderr = _text(err, "standard error")
    if timed_out:
        stderr += f"Killed after {timeout:g} s, noded's limit for gnt-cluster command\n"
    exit_code = SIGNALLED if code < 0 or timed_out else code
    return {"stdout": _text(out, "standard output"), "stderr": stderr, "exit_code": exit_code}


@rpc_handler(calls.run_command)
async def run_command(ctx: NodeContext, command: str) -> CommandResult:
    """Run ``command`` for the master's root (see the module's description)."""
    log.info("Running for the master: %s", _shown(command))
    result = await execute(command, command_environment(ctx.paths), C.CLUSTER_COMMAND_TIMEOUT)
    log.info("The command exited with code %d", result["exit_code"])
    return result


def copy_target(paths: Paths, file_name: str, in_root: bool) -> Path:
    """Where a copy of ``file_name`` goes on this node (OpExecError if nowhere)."""
    if not posixpath.isabs(file_name):
        raise errors.OpExecError(f"'{file_name}' is not an absolute path")
    if in_root:
        return paths.from_wire(file_name)
    return Path(posixpath.normpath(file_name))


def _write_copy(target: Path, data: bytes, mode: int, times: tuple[int, int]) -> None:
    real = Path(os.path.realpath(target))  # scp writes through a symbolic link
    if not real.parent.is_dir():
        raise errors.OpExecError(f"Directory {real.parent} does not exist")
    uid = gid = None
    try:
        st = os.stat(real)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode):
            raise errors.OpExecError(f"{target} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise errors.OpExecError(f"{target} is not a regular file")
        uid, gid = st.st_uid, st.st_gid
    try:
        atomic_write(real, data, mode=mode, uid=uid, gid=gid, times=times)
    except OSError as err:
        raise errors.OpExecError(f"Cannot write {target}: {err.strerror or err}") from None


@rpc_handler(calls.copy_file)
async def copy_file(
    ctx: NodeContext, file_name: str, in_root: bool, data: str, mode: int, atime: int, mtime: int
) -> None:
    """Write a file copied from the master (see the module's description)."""
    target = copy_target(ctx.paths, file_name, in_root)
    if not 0 <= mode <= 0o7777:
        raise errors.OpExecError(f"Invalid mode {mode:o} for {file_name}")
    try:
        content = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as err:
        raise errors.OpExecError(f"Invalid base64 data for {file_name}: {err}") from None
    log.info("Writing %s for the master (%d bytes, mode %04o)", target, len(content), mode)
    await asyncio.to_thread(_write_copy, target, content, mode, (atime, mtime))
