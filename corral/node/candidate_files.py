"""The files a master candidate keeps to become the master once the stores
live in etcd (corral.services.candidate_files gives and takes them)."""

from __future__ import annotations

from corral.fileio import atomic_write
from corral.paths import Paths
from corral.state import home


def write_master_files(paths: Paths, where: home.Home, ca_key: bytes, client_pem: bytes) -> None:
    """The CA's key, masterd's client certificate, then where the stores live."""
    atomic_write(paths.ca_key, ca_key, mode=0o600)
    atomic_write(paths.client_pem, client_pem, mode=0o600)
    home.write(paths.store_home, where)  # last: its masterd stands by from then on


def forget_master_files(paths: Paths) -> None:
    """Take them away (the node is no candidate any more; never on the master)."""
    paths.store_home.unlink(missing_ok=True)
    paths.ca_key.unlink(missing_ok=True)
    # A node's own certificate is its client certificate, as it joined.
    if paths.server_pem.exists():
        atomic_write(paths.client_pem, paths.server_pem.read_bytes(), mode=0o600)
