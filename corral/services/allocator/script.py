"""External iallocator scripts, run as Ganeti runs them.

The script is found by name in the iallocator search path, gets the path of
a file holding the JSON input as its argument (then the cluster's
``default_iallocator_params`` as ``--key=value``), and prints the JSON
answer ``{"success", "info", "result"}`` on its standard output.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral.paths import Paths

# A script that has not answered by then is killed (Ganeti waits forever).
TIMEOUT = 300.0
_KEYS = ("success", "info", "result")


def find_script(paths: Paths, name: str) -> Path | None:
    """The first regular file called ``name`` in the search path, or None."""
    if not name or name != os.path.basename(name) or name in (".", ".."):
        return None
    for directory in paths.iallocator_search_path:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def command_params(params: dict[str, Any]) -> list[str]:
    """``default_iallocator_params`` as Ganeti passes them (``--key[=value]``)."""
    return [f"--{key}" if value is None else f"--{key}={value}" for key, value in params.items()]


async def run_script(
    paths: Paths, name: str, in_text: str, params: dict[str, Any], timeout: float = TIMEOUT
) -> str:
    """The standard output of the script ``name`` given ``in_text``."""
    script = find_script(paths, name)
    if script is None:
        raise errors.OpPrereqError(
            f"iallocator module '{name}' not found in the search path"
            f" ({', '.join(paths.to_wire(p) for p in paths.iallocator_search_path)})",
            C.ECODE_NOENT,
        )
    in_path = await asyncio.to_thread(_write_input, in_text)
    try:
        return await _run(name, [str(script), in_path, *command_params(params)], timeout)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(in_path)


def _write_input(text: str) -> str:
    fd, path = tempfile.mkstemp(prefix="ganeti-iallocator.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


async def _run(name: str, argv: list[str], timeout: float) -> str:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as err:
        raise errors.OpExecError(f"iallocator module '{name}' failed: {err}") from None
    try:
        out, err_out = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise errors.OpExecError(
            f"iallocator module '{name}' failed: no answer within {timeout:g} seconds"
        ) from None
    if proc.returncode != 0:
        output = (err_out or out).decode(errors="replace").strip()
        raise errors.OpExecError(
            f"iallocator module '{name}' failed: exited with status {proc.returncode},"
            f" output '{output}'"
        )
    return out.decode(errors="replace")


def parse_answer(out_text: str) -> dict[str, Any]:
    """The script's answer, checked for its three keys (Ganeti's _ValidateResult)."""
    try:
        answer = json.loads(out_text)
    except ValueError as err:
        raise errors.OpExecError(f"Can't parse iallocator results: {err}") from None
    if not isinstance(answer, dict):
        raise errors.OpExecError("Can't parse iallocator results: not a dict")
    if "nodes" in answer and "result" not in answer:  # Ganeti's old name of "result"
        answer["result"] = answer.pop("nodes")
    for key in _KEYS:
        if key not in answer:
            raise errors.OpExecError(f"Can't parse iallocator results: missing key '{key}'")
    if not isinstance(answer["success"], bool):
        raise errors.OpExecError("Can't parse iallocator results: 'success' is not a boolean")
    return answer
