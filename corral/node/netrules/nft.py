"""Running ``nft`` (Debian's nftables) on Corral's own table, and reading it back.

Corral's rules live in one table of their own (family inet) and never touch
another: production nodes use ``corral``; a node under another root (test
beds, several nodes on one machine) one named after its root.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from typing import Any

from corral import errors
from corral.paths import Paths

NFT_ENV = "CORRAL_NFT"  # another nft binary (tests name a missing one)
PRODUCTION_TABLE = "corral"
_MISSING = "No such file or directory"


def binary() -> str | None:
    """The nft binary this node runs, None when it has none."""
    named = os.environ.get(NFT_ENV)
    if named:
        return named if os.access(named, os.X_OK) else None
    return shutil.which("nft") or next(
        (p for p in ("/usr/sbin/nft", "/sbin/nft") if os.access(p, os.X_OK)), None
    )


def table_name(paths: Paths) -> str:
    """The name of this node's table."""
    root = str(paths.root)
    if root == "/":
        return PRODUCTION_TABLE
    return f"{PRODUCTION_TABLE}_{hashlib.sha256(root.encode()).hexdigest()[:10]}"


def _need() -> str:
    found = binary()
    if found is None:
        raise errors.OpExecError(
            "This node has no nft (install Debian's nftables package), which the network"
            " rules for QEMU's users need; or set the kvm hypervisor parameter"
            " use_network_rules=false"
        )
    return found


async def run_script(script: str) -> None:
    """Run the nft ``script`` (one transaction); OpExecError with nft's words."""
    proc = await asyncio.create_subprocess_exec(
        _need(),
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate(script.encode())
    if proc.returncode:
        text = out.decode(errors="replace").strip()[-2000:]
        raise errors.OpExecError(f"Cannot set the network rules for QEMU's users: {text}")


def read_table(table: str) -> list[dict[str, Any]] | None:
    """The objects of ``table`` as ``nft -j`` lists them (blocking: for a
    thread); None when the table does not exist."""
    proc = subprocess.run(
        [_need(), "-j", "list", "table", "inet", table],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        if _MISSING in proc.stderr:
            return None
        raise errors.OpExecError(f"Cannot read the nft table {table}: {proc.stderr.strip()}")
    items = json.loads(proc.stdout).get("nftables", [])
    return [item for item in items if isinstance(item, dict)]


def table_exists(table: str) -> bool:
    """Whether ``table`` exists (blocking; False without nft)."""
    return binary() is not None and read_table(table) is not None
