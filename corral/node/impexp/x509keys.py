"""Per-move X509 keys (``x509_cert_create``/``x509_cert_remove``).

For a move between clusters each node makes a fresh RSA key and a
self-signed certificate; the certificate goes to the other cluster (signed
with the domain secret by the master), the key never leaves the node:
``<run dir>/crypto/<name>/{key,cert}``.  The certificate names the node
(CN and subjectAltName DNS) and its primary address (IP subjectAltName), so
the exporting side can check the host it connects to.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import re
import secrets
import shutil
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from corral import errors
from corral.paths import Paths

log = logging.getLogger(__name__)

MAX_VALIDITY = 7 * 86400
_CLOCK_SKEW = datetime.timedelta(minutes=5)
_NAME_RE = re.compile(r"^x509-\d{14}-[0-9a-f]{8}$")


def crypto_dir(paths: Paths) -> Path:
    """Where the per-move keys live."""
    return paths.run_dir / "crypto"


def check_name(name: object) -> str:
    """``name`` if it is a key name this module makes; OpExecError otherwise."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise errors.OpExecError(f"Invalid X509 key name {name!r}")
    return name


def files(paths: Paths, name: object) -> tuple[Path, Path]:
    """The key and certificate files of the key ``name`` (which must exist)."""
    directory = crypto_dir(paths) / check_name(name)
    key, cert = directory / "key", directory / "cert"
    if not key.is_file() or not cert.is_file():
        raise errors.OpExecError(f"Unknown X509 key {name}")
    return key, cert


def _certificate(key: rsa.RSAPrivateKey, node: str, ip: str, validity: int) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node)])
    alt: list[x509.GeneralName] = [x509.DNSName(node)]
    if ip and not ipaddress.ip_address(ip).is_unspecified:
        alt.append(x509.IPAddress(ipaddress.ip_address(ip)))
    usage = x509.KeyUsage(True, False, True, False, False, True, False, False, False)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(seconds=validity))
        # Its own CA: the peer trusts exactly this certificate.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )


def create(paths: Paths, node: str, ip: str, validity: object) -> tuple[str, str]:
    """A new key and certificate valid for ``validity`` seconds: ``(name, cert_pem)``."""
    if (
        isinstance(validity, bool)
        or not isinstance(validity, int)
        or not 0 < validity <= MAX_VALIDITY
    ):
        raise errors.OpExecError(
            f"Invalid certificate validity {validity!r} (seconds, 1 to {MAX_VALIDITY})"
        )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = _certificate(key, node, ip, validity)
    name = time.strftime("x509-%Y%m%d%H%M%S-", time.gmtime()) + secrets.token_hex(4)
    base = crypto_dir(paths)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory = base / name
    directory.mkdir(mode=0o700)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    for file_name, data in (("key", key_pem), ("cert", cert_pem)):
        fd = os.open(directory / file_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    return name, cert_pem.decode("ascii")


def remove(paths: Paths, name: object) -> None:
    """Remove the key ``name``; OpExecError if there is no such key."""
    key, _ = files(paths, name)
    shutil.rmtree(key.parent)


def purge_expired(paths: Paths) -> list[str]:
    """Remove the keys whose certificate expired (or cannot be read): their names.

    Run when noded starts: a move that never ended must not leave keys behind.
    """
    base = crypto_dir(paths)
    if not base.is_dir():
        return []
    now = datetime.datetime.now(datetime.UTC)
    removed = []
    for directory in sorted(base.iterdir()):
        if not _NAME_RE.match(directory.name):
            continue
        try:
            cert = x509.load_pem_x509_certificate((directory / "cert").read_bytes())
            expired = cert.not_valid_after_utc < now
        except (OSError, ValueError):
            expired = True
        if expired:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory.name)
    if removed:
        log.info("Removed expired X509 keys: %s", ", ".join(removed))
    return removed
