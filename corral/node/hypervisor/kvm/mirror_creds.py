"""The client credentials of a guest's mirrored disks, while QEMU starts.

Each mirrored disk links the primary's QEMU to the secondary's NBD export
over TLS under the cluster CA (:mod:`corral.node.storage.mirrored`); QEMU
loads the node's certificate when it creates its ``tls-creds-x509`` object,
at its start, so the files exist only until QEMU runs (daemonized).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from corral.node import qemu_tls
from corral.node.hypervisor.spec import InstanceSpec
from corral.node.storage import qsd
from corral.paths import Paths


@contextlib.contextmanager
def mirror_creds(paths: Paths, spec: InstanceSpec) -> Iterator[str | None]:
    """The credentials' directory while the block runs; None without a mirrored disk."""
    if not any(disk.mirror is not None for disk in spec.disks):
        yield None
        return
    directory = qsd.mirror_dir(paths)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix=".guest-creds-", dir=directory))
    try:
        qemu_tls.write_creds(paths, base / "creds", qemu_tls.ENDPOINT_CLIENT)
        yield str(base / "creds")
    finally:
        shutil.rmtree(base, ignore_errors=True)
