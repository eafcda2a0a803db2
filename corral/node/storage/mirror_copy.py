"""Bringing a stopped instance's outdated secondary copy up to date.

No guest runs, so no QEMU holds a record of what the secondary missed: the
primary copies all of its copy to the secondary's export (``qemu-img
convert`` to the NBD export, TLS under the cluster CA as the quorum's link;
areas of zeroes are sent as NBD's write-zeroes, not as data).  The instance's
lock keeps every other writer away meanwhile.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from corral import errors
from corral.node import qemu_tls
from corral.node.storage import qsd
from corral.node.storage.mirrored import Link
from corral.paths import Paths

QEMU_IMG = "/usr/bin/qemu-img"
# qemu-img -p's progress, as it rewrites its line: "    (42.00/100%)".
_PROGRESS = re.compile(rb"\((\d+(?:\.\d+)?)/100%\)")
# Told of the progress: bytes copied, bytes in all.
Progress = Callable[[int, int], None]


def _target(peer: Link) -> str:
    """The export as qemu-img's --target-image-opts take it."""
    options = {
        "driver": "nbd",
        "server.type": "inet",
        "server.host": peer.host,
        "server.port": str(peer.port),
        "export": peer.export,
        "tls-creds": qsd.CREDS_ID,
        "tls-hostname": peer.peer_name,
    }
    return ",".join(f"{key}={value.replace(',', ',,')}" for key, value in options.items())


async def copy_all(paths: Paths, image: Path, peer: Link, size: int, progress: Progress) -> None:
    """Copy all of ``image`` (``size`` bytes) to the secondary's export."""
    directory = qsd.mirror_dir(paths)
    await asyncio.to_thread(directory.mkdir, 0o700, True, True)
    base = Path(await asyncio.to_thread(tempfile.mkdtemp, None, ".creds-", directory))
    try:
        creds = base / "creds"
        await asyncio.to_thread(qemu_tls.write_creds, paths, creds, qemu_tls.ENDPOINT_CLIENT)
        argv = [
            QEMU_IMG, "convert", "-p", "-n", "-f", "raw",
            "--object", qemu_tls.object_option(qsd.CREDS_ID, str(creds), qemu_tls.ENDPOINT_CLIENT),
            "--target-image-opts", str(image), _target(peer),
        ]  # fmt: skip
        await _run(argv, size, progress)
    finally:
        await asyncio.to_thread(shutil.rmtree, base, True)


async def _run(argv: list[str], size: int, progress: Progress) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    errors_read = asyncio.ensure_future(process.stderr.read())
    try:
        pending = b""
        while chunk := await process.stdout.read(4096):
            pending += chunk
            found = list(_PROGRESS.finditer(pending))
            if found:
                progress(int(size * float(found[-1].group(1)) / 100), size)
                pending = pending[found[-1].end() :]
        code = await process.wait()
    except BaseException:
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    finally:
        stderr = await errors_read
    if code != 0:
        why = stderr.decode(errors="replace").strip() or f"exit code {code}"
        raise errors.OpExecError(f"Copying to the secondary failed: {why}")
    progress(size, size)
