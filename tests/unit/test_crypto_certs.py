"""Cluster CA, signed certificates, PEM files and TLS contexts."""

from __future__ import annotations

import ssl
import stat
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from corral import constants as C
from corral import errors
from corral.crypto import certs, tls
from corral.paths import Paths


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.make_ca("cluster.example.com", 30)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_ca_is_a_ca(ca: tuple[bytes, bytes]) -> None:
    cert = x509.load_pem_x509_certificate(ca[0])
    basic = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert basic.ca and usage.key_cert_sign
    assert certs.verify_signed_by(ca[0], ca[0])  # self-signed
    info = certs.cert_info(ca[0])
    assert info["subject"] == info["issuer"] == "cluster.example.com"
    assert info["not_before"] <= time.time() < info["not_after"]
    assert 29 * 86400 < info["not_after"] - time.time() <= 30 * 86400


def test_signed_cert_has_sans_and_usages(ca: tuple[bytes, bytes]) -> None:
    pem, _ = certs.make_signed_cert(
        *ca, "node1", 10, server=True, client=False, ips=["127.0.0.2"], dns=["node1"]
    )
    cert = x509.load_pem_x509_certificate(pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.2"]
    assert san.get_values_for_type(x509.DNSName) == ["node1"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert certs.cert_info(pem)["issuer"] == "cluster.example.com"


def test_verify_signed_by(ca: tuple[bytes, bytes]) -> None:
    pem, _ = certs.make_signed_cert(*ca, "masterd", 10, server=False, client=True)
    other_ca, _ = certs.make_ca("cluster.example.com", 10)  # same name, other key
    assert certs.verify_signed_by(pem, ca[0])
    assert not certs.verify_signed_by(pem, other_ca)


def test_cert_needs_a_purpose(ca: tuple[bytes, bytes]) -> None:
    with pytest.raises(errors.ProgrammerError):
        certs.make_signed_cert(*ca, "x", 1, server=False, client=False)


def test_write_pem_modes_and_cert_info_from_file(tmp_path: Path, ca: tuple[bytes, bytes]) -> None:
    certs.write_pem(tmp_path / "ca.pem", ca[0], private=False)
    certs.write_pem(tmp_path / "both.pem", ca[1], ca[0])
    assert _mode(tmp_path / "ca.pem") == 0o644
    assert _mode(tmp_path / "both.pem") == 0o600
    # The first certificate of a file holding the key as well.
    assert certs.cert_info(tmp_path / "both.pem")["subject"] == "cluster.example.com"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["both.pem", "ca.pem"]  # no temp files


def test_cert_info_rejects_garbage() -> None:
    with pytest.raises(errors.X509CertError):
        certs.cert_info(b"not a certificate")


def test_node_cert_ips_name_127_0_0_1_for_loopback_nodes_only() -> None:
    assert certs.node_cert_ips("10.1.2.3") == ["10.1.2.3"]
    assert certs.node_cert_ips("127.0.0.1") == ["127.0.0.1"]
    assert certs.node_cert_ips("127.9.8.7") == ["127.9.8.7", "127.0.0.1"]


def test_create_cluster_crypto(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    certs.create_cluster_crypto(paths, "cluster.example.com", "node1.example.com", "127.0.0.2")
    ca_pem = paths.ca_cert.read_bytes()
    for private in (paths.ca_key, paths.server_pem, paths.client_pem, paths.cluster_domain_secret):
        assert _mode(private) == 0o600, private
    assert _mode(paths.ca_cert) == 0o644
    server = x509.load_pem_x509_certificates(paths.server_pem.read_bytes())[0]
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    # A loopback node also names 127.0.0.1, the source of its connections (etcd checks it).
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    assert ips == ["127.0.0.2", "127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["node1.example.com"]
    assert certs.verify_signed_by(paths.server_pem.read_bytes(), ca_pem)
    assert certs.verify_signed_by(paths.client_pem.read_bytes(), ca_pem)
    assert certs.cert_info(paths.client_pem)["subject"] == certs.MASTERD_CLIENT_CN
    days = (certs.cert_info(paths.ca_cert)["not_after"] - time.time()) / 86400
    assert round(days) == C.CERT_VALIDITY_DAYS
    secret = paths.cluster_domain_secret.read_text()
    assert len(secret) == 41 and secret.endswith("\n")
    int(secret, 16)


def test_ssl_contexts(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    certs.create_cluster_crypto(paths, "c", "n", "127.0.0.1")
    server = tls.ssl_server_context(paths)
    client = tls.ssl_client_context(paths)
    assert server.verify_mode == client.verify_mode == ssl.CERT_REQUIRED
    assert server.minimum_version == client.minimum_version == ssl.TLSVersion.TLSv1_2
    assert not client.check_hostname


def test_ssl_context_reports_missing_files(tmp_path: Path) -> None:
    with pytest.raises(errors.X509CertError, match="Cannot load"):
        tls.ssl_server_context(Paths(tmp_path))
