"""The signed messages of remote (inter-cluster) import/export, as Ganeti's.

Two clusters that share a *cluster domain secret* trust each other's
messages: each one is an HMAC-SHA1 under that secret of a text with a random
salt prepended (Ganeti's ``Sha1Hmac``).  The messages are

- the *handshake* ``[version, hmac, salt]`` over ``"<version>:Hi, I'm Ganeti"``;
- a *disk info* ``[host, port, magic, hmac, salt]`` over
  ``"<disk index>:<host>:<port>:<magic>"`` (where to send one disk);
- a *key name* ``[name, hmac, salt]`` over the name of an X509 key a node
  made for the move;
- a *signed certificate*: the PEM preceded by the header line
  ``X-Ganeti-Signature: <salt>/<hmac of the PEM>`` and an empty line.

The formats are Ganeti 3.0.2's byte for byte, so Ganeti's own checks accept
Corral's messages and the other way round.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import time
from hashlib import sha1
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from corral import constants as C
from corral import errors
from corral.crypto.cert_check import NODE_MAX_CLOCK_SKEW, format_time
from corral.paths import Paths

_SALT_RE = re.compile(r"^[a-zA-Z0-9]+$")
_SIGNATURE_RE = re.compile(
    rf"^{re.escape(C.X509_CERT_SIGNATURE_HEADER)}:\s*(?P<salt>[a-zA-Z0-9]+)/(?P<sign>[a-zA-Z0-9]+)$",
    re.S | re.I,
)
# Ganeti's hostname rule (underscores allowed, a trailing dot dropped).
_HOSTNAME_RE = re.compile(r"^[a-z0-9_-]{1,63}(\.[a-z0-9_-]{1,63})*\.?$")


def read_domain_secret(paths: Paths) -> bytes:
    """The cluster domain secret: the file's one non-empty line, as Ganeti reads it."""
    path = paths.cluster_domain_secret
    try:
        lines = [line for line in path.read_text().splitlines() if line]
    except OSError as err:
        raise errors.OpPrereqError(
            f"Cannot read the cluster domain secret {path}: {err.strerror}", C.ECODE_ENVIRON
        ) from None
    if len(lines) != 1:
        raise errors.OpPrereqError(
            f"The cluster domain secret {path} must hold exactly one line", C.ECODE_ENVIRON
        )
    return lines[0].encode("utf-8")


def hmac_sha1(key: bytes, text: str | bytes, salt: str) -> str:
    """Ganeti's Sha1Hmac: the hex HMAC-SHA1 under ``key`` of ``salt + text``."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hmac.new(key, salt.encode("utf-8") + data, sha1).hexdigest()


def _hmac_matches(key: bytes, text: str | bytes, digest: Any, salt: Any) -> bool:
    """Ganeti's VerifySha1Hmac (case-insensitive), false on malformed input."""
    if not isinstance(digest, str) or not isinstance(salt, str):
        return False
    return hmac.compare_digest(digest.lower(), hmac_sha1(key, text, salt))


def new_salt() -> str:
    """A fresh salt: 8 random bytes in hex (Ganeti's GenerateSecret(8))."""
    return secrets.token_hex(8)


def _handshake_text(version: Any) -> str:
    return f"{version}:{C.RIE_HANDSHAKE}"


def compute_handshake(cds: bytes) -> list[Any]:
    """The handshake ``[version, hmac, salt]`` a prepared export returns."""
    salt = new_salt()
    return [C.RIE_VERSION, hmac_sha1(cds, _handshake_text(C.RIE_VERSION), salt), salt]


def check_handshake(cds: bytes, handshake: Any) -> str | None:
    """Why ``handshake`` is not acceptable (Ganeti's wording), or None."""
    if not isinstance(handshake, list | tuple) or len(handshake) != 3:
        return f"Invalid data: expected [version, hmac, salt], got {handshake!r}"
    version, digest, salt = handshake
    if not _hmac_matches(cds, _handshake_text(version), digest, salt):
        return "Hash didn't match, clusters don't share the same domain secret"
    if version != C.RIE_VERSION:
        return (
            "Clusters don't have the same remote import/export protocol"
            f" (local={C.RIE_VERSION}, remote={version})"
        )
    return None


def _disk_info_text(index: int, host: str, port: Any, magic: str) -> str:
    return f"{index}:{host}:{port}:{magic}"


def sign_disk_info(
    cds: bytes, salt: str, index: int, host: str, port: int, magic: str
) -> list[Any]:
    """Where disk ``index`` is to be sent, signed: ``[host, port, magic, hmac, salt]``."""
    digest = hmac_sha1(cds, _disk_info_text(index, host, port, magic), salt)
    return [host, port, magic, digest, salt]


def _normalized_host(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    name = host.lower()
    if not _HOSTNAME_RE.match(name) or ".." in name:
        raise ValueError(f"Invalid hostname '{host}'")
    return name.rstrip(".")


def _valid_port(port: Any) -> int:
    if isinstance(port, bool) or not isinstance(port, int | str):
        raise ValueError(f"Invalid port {port!r}")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"Invalid port {port!r}") from None
    if not 0 < number < 1 << 16:
        raise ValueError(f"Invalid port {port!r}")
    return number


def check_disk_info(cds: bytes, index: int, info: Any) -> tuple[str, int, str]:
    """``(host, port, magic)`` of a signed disk info; OpPrereqError when it
    is malformed, incomplete or not signed with this cluster's domain secret."""
    prefix = f"Target info for disk {index}"
    if not isinstance(info, list | tuple) or len(info) != 5:
        raise errors.OpPrereqError(
            f"{prefix}: Invalid data: expected [host, port, magic, hmac, salt], got {info!r}",
            C.ECODE_INVAL,
        )
    host, port, magic, digest, salt = info
    if not (host and port and magic):
        raise errors.OpPrereqError(
            f"{prefix}: Missing destination host, port or magic", C.ECODE_INVAL
        )
    if not isinstance(host, str) or not isinstance(magic, str):
        raise errors.OpPrereqError(f"{prefix}: Invalid host or magic", C.ECODE_INVAL)
    if not _hmac_matches(cds, _disk_info_text(index, host, port, magic), digest, salt):
        raise errors.OpPrereqError(f"{prefix}: HMAC is wrong", C.ECODE_INVAL)
    try:
        return _normalized_host(host), _valid_port(port), magic
    except ValueError as err:
        raise errors.OpPrereqError(f"{prefix}: {err}", C.ECODE_INVAL) from None


def _sane_pem(pem: str | bytes) -> tuple[x509.Certificate, str]:
    """The certificate and its PEM as OpenSSL writes it (what the HMAC covers)."""
    data = pem.encode("ascii") if isinstance(pem, str) else pem
    cert = x509.load_pem_x509_certificate(data)
    return cert, cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def sign_x509_cert(cert_pem: str, cds: bytes, salt: str) -> str:
    """The certificate with Ganeti's ``X-Ganeti-Signature: salt/hmac`` header."""
    if not _SALT_RE.match(salt):
        raise errors.ProgrammerError(f"Invalid salt: {salt!r}")
    _, pem = _sane_pem(cert_pem)
    return f"{C.X509_CERT_SIGNATURE_HEADER}: {salt}/{hmac_sha1(cds, pem, salt)}\n\n{pem}"


def _signature(text: str) -> tuple[str, str]:
    for line in text.splitlines():
        if line.startswith("---"):
            break
        found = _SIGNATURE_RE.match(line.strip())
        if found:
            return found.group("salt"), found.group("sign")
    raise ValueError("X509 certificate signature is missing")


def _validity_problem(cert: x509.Certificate) -> str | None:
    """Expired, or not yet valid beyond the clock skew tolerated between nodes."""
    now = time.time()
    not_before = cert.not_valid_before_utc.timestamp()
    not_after = cert.not_valid_after_utc.timestamp()
    if not_after < now:
        return (
            f"Certificate is expired (valid from {format_time(not_before)}"
            f" to {format_time(not_after)})"
        )
    if not_before > now + NODE_MAX_CLOCK_SKEW:
        return f"Certificate not yet valid (valid from {format_time(not_before)})"
    return None


def load_signed_x509_cert(text: Any, cds: bytes, *, what: str = "destination X509 CA") -> str:
    """The PEM of a signed certificate (see :func:`sign_x509_cert`);
    OpPrereqError when the signature is missing or not made with this
    cluster's domain secret, or the certificate is expired or not yet valid.
    ``what`` names the certificate in the messages."""
    if not isinstance(text, str):
        raise errors.OpPrereqError(f"Unable to load {what} (not a text)", C.ECODE_INVAL)
    try:
        salt, digest = _signature(text)
        cert, pem = _sane_pem(text)
    except ValueError as err:
        raise errors.OpPrereqError(f"Unable to load {what} ({err})", C.ECODE_INVAL) from None
    if not _hmac_matches(cds, pem, digest, salt):
        raise errors.OpPrereqError(
            f"Unable to load {what} (X509 certificate signature is invalid: the clusters"
            " don't share the same domain secret, or the certificate was changed)",
            C.ECODE_INVAL,
        )
    problem = _validity_problem(cert)
    if problem:
        raise errors.OpPrereqError(f"Invalid {what} ({problem})", C.ECODE_INVAL)
    return pem


def sign_key_name(cds: bytes, name: str, salt: str) -> list[Any]:
    """The name of a node's X509 key, signed: ``[name, hmac, salt]``."""
    return [name, hmac_sha1(cds, name, salt), salt]


def check_key_name(cds: bytes, key_name: Any) -> str:
    """The key name of a signed ``[name, hmac, salt]``; OpPrereqError otherwise."""
    if not isinstance(key_name, list | tuple) or len(key_name) != 3:
        raise errors.OpPrereqError(
            f"Invalid data for X509 key name: expected [name, hmac, salt], got {key_name!r}",
            C.ECODE_INVAL,
        )
    name, digest, salt = key_name
    if not isinstance(name, str) or not _hmac_matches(cds, name, digest, salt):
        raise errors.OpPrereqError("HMAC for X509 key name is wrong", C.ECODE_INVAL)
    return name


def disk_magic(base: str, instance_name: str, index: int) -> str:
    """The magic a disk's stream starts with (Ganeti's _GetInstDiskMagic):
    SHA1 of the protocol version, a per-transfer random ``base``, the
    instance's name and the disk's index."""
    digest = sha1()
    for part in (str(C.RIE_VERSION), base, instance_name, str(index)):
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()
