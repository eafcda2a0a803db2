"""X509 material of a cluster: the cluster CA, the certificates it signs, TLS contexts.

Every node runs noded with ``server.pem``, a certificate signed by the cluster CA;
masterd calls nodes with ``client.pem``, also signed by the CA.  Both sides verify
the other's chain against ``cluster-ca.pem``, so only holders of a CA-signed
certificate can call a node.  Keys are EC P-256: strong, and fast to generate,
which matters for tests and demos that create whole clusters.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from corral import constants as C
from corral import errors
from corral.fileio import atomic_write
from corral.paths import Paths

MASTERD_CLIENT_CN = "corral-masterd"

# Certificates are valid from slightly in the past so that a node whose clock is
# a little behind the master's accepts a certificate made a moment ago.
_CLOCK_SKEW = datetime.timedelta(minutes=5)
_SECRET_BYTES = 20  # as long as a SHA1 digest, like Ganeti's domain secret


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, days: int, key: Any) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def make_ca(common_name: str, days: int) -> tuple[bytes, bytes]:
    """A self-signed CA certificate and its key, as ``(cert_pem, key_pem)``."""
    key = _new_key()
    cert = (
        _builder(common_name, _name(common_name), days, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _san(ips: Iterable[str], dns: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    names += [x509.DNSName(name) for name in dns]
    return x509.SubjectAlternativeName(names)


def make_signed_cert(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    common_name: str,
    days: int,
    *,
    server: bool,
    client: bool,
    ips: Iterable[str] = (),
    dns: Iterable[str] = (),
) -> tuple[bytes, bytes]:
    """A leaf certificate signed by the CA, as ``(cert_pem, key_pem)``.

    ``server``/``client`` select the extended key usages (TLS server and client
    authentication); ``ips`` and ``dns`` become subject alternative names.
    """
    if not (server or client):
        raise errors.ProgrammerError("A certificate must be for a server, a client or both")
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise errors.X509CertError("The cluster CA key is not an EC key")
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    key = _new_key()
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        _builder(common_name, ca_cert.subject, days, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), False
        )
    )
    ips, dns = list(ips), list(dns)
    if ips or dns:
        builder = builder.add_extension(_san(ips, dns), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def make_self_signed_cert(
    common_name: str, days: int, *, ips: Iterable[str] = (), dns: Iterable[str] = ()
) -> tuple[bytes, bytes]:
    """A self-signed TLS server certificate and its key, as ``(cert_pem, key_pem)``;
    clients trust it by taking it as their CA file (Ganeti's ``rapi.pem``)."""
    key = _new_key()
    builder = (
        _builder(common_name, _name(common_name), days, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    )
    ips, dns = list(ips), list(dns)
    if ips or dns:
        builder = builder.add_extension(_san(ips, dns), critical=False)
    cert = builder.sign(key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def write_rapi_cert(paths: Paths, names: Iterable[str], ips: Iterable[str]) -> None:
    """Write a new ``rapi.pem`` (certificate and key) valid for ``names`` and ``ips``."""
    names = list(dict.fromkeys(names))
    cert, key = make_self_signed_cert(
        names[0], C.CERT_VALIDITY_DAYS, ips=dict.fromkeys(ips), dns=names
    )
    write_pem(paths.rapi_pem, cert, key)


def write_pem(path: Path | str, *pems: bytes, private: bool = True) -> None:
    """Write PEM blocks to ``path`` atomically (mode 0600, or 0644 if not private)."""
    data = b"".join(pem if pem.endswith(b"\n") else pem + b"\n" for pem in pems)
    atomic_write(path, data, mode=0o600 if private else 0o644)


def _load_cert(pem_or_path: bytes | str | Path) -> x509.Certificate:
    data = pem_or_path if isinstance(pem_or_path, bytes) else Path(pem_or_path).read_bytes()
    try:
        # A file may hold a key as well (server.pem); take its first certificate.
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as err:
        raise errors.X509CertError(f"Cannot parse certificate: {err}") from None
    return certs[0]


def _common_name(name: x509.Name) -> str | None:
    attrs = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attrs[0].value) if attrs else None


def cert_info(pem_or_path: bytes | str | Path) -> dict[str, Any]:
    """Subject and issuer CN and validity (epoch seconds) of a certificate.

    ``pem_or_path`` is PEM data (bytes) or the path of a PEM file.
    """
    cert = _load_cert(pem_or_path)
    return {
        "subject": _common_name(cert.subject),
        "issuer": _common_name(cert.issuer),
        "not_before": cert.not_valid_before_utc.timestamp(),
        "not_after": cert.not_valid_after_utc.timestamp(),
        "serial": f"{cert.serial_number:x}",
    }


def verify_signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    """Whether ``cert_pem`` was issued and signed by a CA of ``ca_pem`` (the
    cluster's CA file holds two while its certificate is being replaced)."""
    cert = _load_cert(cert_pem)
    for ca_cert in x509.load_pem_x509_certificates(ca_pem):
        try:
            cert.verify_directly_issued_by(ca_cert)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def pem_certificates(bundle: bytes) -> list[bytes]:
    """Each certificate of a PEM bundle (a CA file may hold several), as PEM;
    X509CertError if the bundle is not one."""
    try:
        found = x509.load_pem_x509_certificates(bundle)
    except ValueError as err:
        raise errors.X509CertError(f"Not PEM certificates: {err}") from None
    return [cert.public_bytes(serialization.Encoding.PEM) for cert in found]


def signing_ca(bundle: bytes, key_pem: bytes) -> bytes:
    """The CA certificate of ``bundle`` that ``key_pem`` (the cluster CA key) signs
    for; X509CertError if there is none."""
    for ca in pem_certificates(bundle):
        if same_public_key(ca, key_pem):
            return ca
    raise errors.X509CertError("The cluster CA key matches no certificate of the CA file")


def make_domain_secret() -> bytes:
    """A new cluster domain secret: hex of 20 random bytes plus a newline."""
    return secrets.token_hex(_SECRET_BYTES).encode("ascii") + b"\n"


def make_confd_hmac_key() -> bytes:
    """A new confd HMAC key, in the form of Ganeti's ``hmac.key``: the same as
    a domain secret's (hex of 20 random bytes plus a newline)."""
    return make_domain_secret()


def create_cluster_crypto(
    paths: Paths, cluster_name: str, node_name: str, node_ip: str, master_ip: str | None = None
) -> None:
    """Create the cluster CA, node, masterd and RAPI certificates, the domain
    secret and the confd HMAC key."""
    days = C.CERT_VALIDITY_DAYS
    ca_cert, ca_key = make_ca(cluster_name, days)
    write_pem(paths.ca_cert, ca_cert, private=False)
    write_pem(paths.ca_key, ca_key)
    write_node_cert(paths, ca_cert, ca_key, node_name, node_ip)
    client_cert, client_key = make_signed_cert(
        ca_cert, ca_key, MASTERD_CLIENT_CN, days, server=False, client=True
    )
    write_pem(paths.client_pem, client_cert, client_key)
    write_rapi_cert(paths, [cluster_name, node_name], [master_ip or node_ip, node_ip])
    write_pem(paths.cluster_domain_secret, make_domain_secret())
    write_pem(paths.confd_hmac_key, make_confd_hmac_key())


def node_cert_ips(node_ip: str) -> list[str]:
    """The addresses a node's certificate names: its primary IP, and 127.0.0.1
    for a node on another loopback address (Linux sends from 127.0.0.1 to any
    of 127.0.0.0/8, and etcd checks a peer's certificate against the address
    it connects from)."""
    loopback = node_ip.startswith("127.") and node_ip != "127.0.0.1"
    return [node_ip, "127.0.0.1"] if loopback else [node_ip]


def write_node_cert(
    paths: Paths, ca_cert: bytes, ca_key: bytes, node_name: str, node_ip: str
) -> None:
    """Write ``server.pem`` for a node: a CA-signed certificate and its key.

    The certificate also allows client authentication, so that a node can open
    authenticated connections to other nodes (disk streams).
    """
    cert, key = make_signed_cert(
        ca_cert,
        ca_key,
        node_name,
        C.CERT_VALIDITY_DAYS,
        server=True,
        client=True,
        ips=node_cert_ips(node_ip),
        dns=[node_name],
    )
    write_pem(paths.server_pem, cert, key)


# Joining a node: its key stays on the node; the master signs a request for it.
def make_key_pem() -> bytes:
    """A new private key (PEM, unencrypted)."""
    return _key_pem(_new_key())


def _load_key(key_pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise errors.X509CertError("Not an EC private key")
    return key


def make_self_signed_for_key(key_pem: bytes, common_name: str, days: int) -> bytes:
    """A self-signed server certificate for an existing key (a node's join identity)."""
    key = _load_key(key_pem)
    cert = (
        _builder(common_name, _name(common_name), days, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def make_csr(key_pem: bytes, common_name: str) -> bytes:
    """A certificate signing request (PEM) for ``key_pem``, signed with it."""
    key = _load_key(key_pem)
    csr = x509.CertificateSigningRequestBuilder().subject_name(_name(common_name))
    return csr.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _public_der(public_key: Any) -> bytes:
    return bytes(
        public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def same_public_key(cert_pem_or_der: bytes, key_or_csr_pem: bytes) -> bool:
    """Whether a certificate (PEM or DER) is for the key of a private key or CSR (PEM)."""
    if cert_pem_or_der.lstrip().startswith(b"-----"):
        cert = _load_cert(cert_pem_or_der)
    else:
        cert = x509.load_der_x509_certificate(cert_pem_or_der)
    if b"CERTIFICATE REQUEST" in key_or_csr_pem:
        other = x509.load_pem_x509_csr(key_or_csr_pem).public_key()
    else:
        other = _load_key(key_or_csr_pem).public_key()
    return _public_der(cert.public_key()) == _public_der(other)


def sign_csr(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    csr_pem: bytes,
    common_name: str,
    *,
    ips: Iterable[str] = (),
    dns: Iterable[str] = (),
) -> bytes:
    """A node certificate (server and client use) for the key of ``csr_pem``,
    signed by the CA; the subject is ``common_name``, not what the CSR asks."""
    try:
        csr = x509.load_pem_x509_csr(csr_pem)
    except ValueError as err:
        raise errors.X509CertError(f"Cannot parse the certificate request: {err}") from None
    if not csr.is_signature_valid:
        raise errors.X509CertError("The certificate request's signature is not valid")
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = _load_key(ca_key_pem)
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    # _builder takes the public key from anything with public_key(): here the CSR.
    builder = (
        _builder(common_name, ca_cert.subject, C.CERT_VALIDITY_DAYS, csr)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), False
        )
    )
    ips, dns = list(ips), list(dns)
    if ips or dns:
        builder = builder.add_extension(_san(ips, dns), critical=False)
    return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
