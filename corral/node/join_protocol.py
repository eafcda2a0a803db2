"""The join exchange's shared pieces: tokens, proofs and fingerprints.

A join token is ``cj1.<id>.<secret>.<CA fingerprint>``.  The master keeps only
``token_key(secret)`` (a hash); both sides prove they know it with an HMAC over
both sides' nonces and the fingerprint of the node's TLS certificate *as each
side sees it*: a man in the middle presents another certificate, so the node's
proof does not match at the master and the master's does not match at the node.

Stdlib only: the gnt-* commands make tokens with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

from corral import errors

TOKEN_PREFIX = "cj1"
HELLO_PATH = "/join/hello"
FINISH_PATH = "/join/finish"
ROLE_NODE = "node"
ROLE_MASTER = "master"
_ID_RE = re.compile(r"^[0-9a-f]{16}$")
_HEX64_RE = re.compile(r"^[0-9a-f]{64}$")
_SECRET_BYTES = 32


class JoinToken:
    """A parsed token: ``token_id``, ``secret`` (bytes), ``ca_fingerprint`` (hex)."""

    __slots__ = ("ca_fingerprint", "secret", "token_id")

    def __init__(self, token_id: str, secret: bytes, ca_fingerprint: str) -> None:
        self.token_id = token_id
        self.secret = secret
        self.ca_fingerprint = ca_fingerprint

    def text(self) -> str:
        """The token as the operator copies it."""
        secret = base64.urlsafe_b64encode(self.secret).decode("ascii").rstrip("=")
        return f"{TOKEN_PREFIX}.{self.token_id}.{secret}.{self.ca_fingerprint}"


def new_token(ca_fingerprint: str) -> JoinToken:
    """A fresh token for the cluster whose CA has this fingerprint."""
    return JoinToken(secrets.token_hex(8), secrets.token_bytes(_SECRET_BYTES), ca_fingerprint)


def parse_token(text: str) -> JoinToken:
    """The token in ``text``; ParameterError saying what is wrong otherwise."""
    parts = text.strip().split(".")
    bad = errors.ParameterError(
        "Invalid join token: expected cj1.<id>.<secret>.<CA fingerprint>, as printed by"
        " 'gnt-node join-token' on the master"
    )
    if len(parts) != 4 or parts[0] != TOKEN_PREFIX:
        raise bad
    _, token_id, secret_text, ca_fp = parts
    try:
        secret = base64.urlsafe_b64decode(secret_text + "=" * (-len(secret_text) % 4))
    except (binascii.Error, ValueError):
        raise bad from None
    if not _ID_RE.match(token_id) or not _HEX64_RE.match(ca_fp) or len(secret) != _SECRET_BYTES:
        raise bad
    return JoinToken(token_id, secret, ca_fp)


def token_key(secret: bytes) -> bytes:
    """The key both sides prove knowledge of; the master stores only this hash."""
    return hashlib.sha256(b"corral-join-v1\0" + secret).digest()


def proof(
    key: bytes, role: str, token_id: str, master_nonce: str, node_nonce: str, node_fp: str
) -> str:
    """``role``'s proof of ``key``, bound to both nonces and the node's certificate."""
    message = "\0".join((role, token_id, master_nonce, node_nonce, node_fp)).encode("ascii")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def proof_matches(expected: str, given: object) -> bool:
    """Constant-time comparison of a proof with what the peer sent."""
    return isinstance(given, str) and hmac.compare_digest(expected, given)


def new_nonce() -> str:
    return secrets.token_hex(16)


def fingerprint(der: bytes) -> str:
    """SHA-256 of a certificate's DER form, lower-case hex."""
    return hashlib.sha256(der).hexdigest()


def pem_to_der(pem: bytes) -> bytes:
    """The DER form of the first certificate in ``pem``."""
    text = pem.decode("ascii", "replace")
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        raise errors.X509CertError("No certificate in PEM data")
    try:
        return base64.b64decode("".join(text[start + len(begin) : stop].split()), validate=True)
    except (binascii.Error, ValueError) as err:
        raise errors.X509CertError(f"Cannot decode certificate: {err}") from None


def pem_fingerprint(pem: bytes) -> str:
    """:func:`fingerprint` of the first certificate in ``pem``."""
    return fingerprint(pem_to_der(pem))


# What the master tells a node that is in a cluster already, or a node that is not.
NOT_JOINING = "This node is in a cluster already; it does not take a join"
NOT_IN_CLUSTER = (
    "This node is not in a cluster: it serves only the join exchange"
    " (add it with 'gnt-node add' on the master)"
)
