"""The node's certificate as QEMU's ``tls-creds-x509`` object reads it.

QEMU wants a directory with fixed file names: the cluster CA, the node's
certificate and its key.  Its users (migration streams, mirrored disks' NBD
exports) make one directory per QEMU process, readable only by it, and remove
it as soon as QEMU has loaded the files (it keeps them in memory).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from corral import errors
from corral.crypto.certs import cert_info
from corral.paths import Paths

ENDPOINT_SERVER = "server"
ENDPOINT_CLIENT = "client"
# QEMU's file names per endpoint (its crypto/tlscredsx509.h).
CA_FILE = "ca-cert.pem"
ROLE_FILES = {
    ENDPOINT_SERVER: ("server-cert.pem", "server-key.pem"),
    ENDPOINT_CLIENT: ("client-cert.pem", "client-key.pem"),
}
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----\n?", re.DOTALL)


def split_pem(data: bytes) -> tuple[bytes, bytes]:
    """``(certificates, key)`` of a PEM file holding both (the node's server.pem)."""
    certs, keys = b"", b""
    for match in _PEM_BLOCK.finditer(data):
        block = match.group(0).rstrip(b"\n") + b"\n"
        if b"PRIVATE KEY" in match.group(1):
            keys += block
        elif match.group(1) == b"CERTIFICATE":
            certs += block
    if not certs or not keys:
        raise errors.OpExecError("The node's certificate file lacks a certificate or its key")
    return certs, keys


def write_creds(paths: Paths, directory: Path, endpoint: str, uid: int = 0) -> None:
    """Fill the new directory ``directory`` (0700) for ``endpoint``, owned by ``uid``."""
    certs, key = split_pem(paths.server_pem.read_bytes())
    cert_name, key_name = ROLE_FILES[endpoint]
    directory.mkdir(mode=0o700)
    for name, data in (
        (CA_FILE, paths.ca_cert.read_bytes()),
        (cert_name, certs),
        (key_name, key),
    ):
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if uid:
            os.chown(directory / name, uid, uid)
    if uid:
        os.chown(directory, uid, uid)


def object_props(creds_id: str, directory: str, endpoint: str) -> dict[str, object]:
    """The ``tls-creds-x509`` object (QMP ``object-add`` arguments, or JSON for
    ``--object``) with the files in ``directory`` as QEMU sees it; the peer's
    certificate is always checked against the cluster CA."""
    return {
        "qom-type": "tls-creds-x509",
        "id": creds_id,
        "dir": directory,
        "endpoint": endpoint,
        "verify-peer": True,
    }


def object_option(creds_id: str, directory: str, endpoint: str) -> str:
    """The same object as QEMU's ``-object`` command-line value."""
    return f"tls-creds-x509,id={creds_id},dir={directory},endpoint={endpoint},verify-peer=on"


def node_identity(paths: Paths) -> str:
    """The name in this node's certificate (what the other end verifies)."""
    name = cert_info(paths.server_pem)["subject"]
    if not name:
        raise errors.OpExecError(f"The node certificate {paths.server_pem} names no node")
    return str(name)
