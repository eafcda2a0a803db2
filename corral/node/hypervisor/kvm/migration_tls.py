"""The certificates of a migration stream, as QEMU's ``tls-creds-x509`` reads them.

Both ends show the node's own certificate (signed by the cluster CA) and
check the other's against the cluster CA (``verify-peer``): only a node of
the cluster can send a guest, and only to one.  QEMU wants a directory with
fixed file names; it is made for one migration, readable only by the QEMU
that loads it, and removed as soon as QEMU has loaded it (QEMU keeps the
credentials in memory from then on).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from corral import errors
from corral.node import qemu_tls
from corral.paths import Paths

CREDS_ID = "corral-migtls"


def object_props(seen_as: str, endpoint: str) -> dict[str, object]:
    """The QMP ``object-add`` arguments of the credentials (``seen_as``: the
    directory as the QEMU process sees it)."""
    return qemu_tls.object_props(CREDS_ID, seen_as, endpoint)


def object_option(seen_as: str, endpoint: str) -> str:
    """The same object as QEMU's ``-object`` command-line value."""
    return qemu_tls.object_option(CREDS_ID, seen_as, endpoint)


@contextlib.contextmanager
def client_creds(
    paths: Paths, pid: int, chroot: str | None, shared: Path | None = None
) -> Iterator[str]:
    """The client credentials for the running QEMU ``pid`` while the block
    runs (it loads them with ``object-add``); yields the directory as QEMU
    sees it.  Owned by QEMU's user; inside its chroot if it has one, else in
    ``shared`` (a root-only directory QEMU sees at the same path: one in
    namespaces of its own sees no /tmp), whose mode allows traversal (never
    listing) only meanwhile."""
    uid = process_uid(pid)
    if chroot is not None:
        opened: Path | None = Path(chroot)
        base = Path(chroot) / f".migtls-{os.urandom(4).hex()}"
        base.mkdir(mode=0o700)
        seen_as = f"/{base.name}/creds"
    elif shared is not None:
        opened = shared
        base = shared / f".migtls-{os.urandom(4).hex()}"
        base.mkdir(mode=0o700)
        seen_as = str(base / "creds")
    else:
        opened = None
        base = Path(tempfile.mkdtemp(prefix="corral-migtls-"))
        seen_as = str(base / "creds")
    directory = base / "creds"
    if uid:
        os.chown(base, uid, uid)
    try:
        qemu_tls.write_creds(paths, directory, qemu_tls.ENDPOINT_CLIENT, uid)
        if opened is not None and uid:
            os.chmod(opened, 0o711)
        yield seen_as
    finally:
        if opened is not None:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(opened, 0o700)
        shutil.rmtree(base, ignore_errors=True)


def process_uid(pid: int) -> int:
    """The effective uid of process ``pid`` (QEMU after ``-runas``)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("Uid:"):
                    return int(line.split()[2])
    except FileNotFoundError:
        pass
    raise errors.OpExecError(f"The QEMU process {pid} is gone")
