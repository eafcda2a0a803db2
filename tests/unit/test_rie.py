"""The signed messages of inter-cluster moves (corral.crypto.rie): each one
accepted when made with the same domain secret, refused when made with
another or changed on the way, with a clear message."""

from __future__ import annotations

import datetime
import hmac
from collections.abc import Callable
from hashlib import sha1
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.crypto import certs, rie
from corral.paths import Paths
from tests.helpers.certs import self_signed_pem

CDS = b"0123456789abcdef0123456789abcdef01234567"
OTHER = b"ffffffffffffffffffffffffffffffffffffffff"


@pytest.fixture(scope="module")
def cert_pem() -> str:
    return certs.make_self_signed_cert("node1.example.com", 1)[0].decode()


def test_hmac_is_sha1_of_salt_and_text() -> None:
    expected = hmac.new(CDS, b"salt" + b"text", sha1).hexdigest()
    assert rie.hmac_sha1(CDS, "text", "salt") == expected


def test_handshake_accepted_with_same_secret_only() -> None:
    handshake = rie.compute_handshake(CDS)
    assert handshake[0] == 0 and len(handshake[2]) == 16
    assert rie.check_handshake(CDS, handshake) is None
    assert rie.check_handshake(CDS, [0, handshake[1].upper(), handshake[2]]) is None
    assert "don't share the same domain secret" in str(rie.check_handshake(OTHER, handshake))


def test_handshake_of_another_version_or_malformed() -> None:
    salt = rie.new_salt()
    other_version = [1, rie.hmac_sha1(CDS, "1:Hi, I'm Ganeti", salt), salt]
    assert "(local=0, remote=1)" in str(rie.check_handshake(CDS, other_version))
    for bad in (None, "x", [0, "a"], [0, 5, None], {"a": 1}):
        assert rie.check_handshake(CDS, bad) is not None


def test_disk_info_round_trip_and_host_normalised() -> None:
    info = rie.sign_disk_info(CDS, "abc123", 1, "Node2.Example.COM.", 1234, "m" * 40)
    assert rie.check_disk_info(CDS, 1, info) == ("node2.example.com", 1234, "m" * 40)
    info = rie.sign_disk_info(CDS, "abc123", 0, "192.0.2.7", 5, "magic")
    assert rie.check_disk_info(CDS, 0, info) == ("192.0.2.7", 5, "magic")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda i: ["192.0.2.99", *i[1:]], "HMAC is wrong"),  # tampered host
        (lambda i: [i[0], 4321, *i[2:]], "HMAC is wrong"),  # tampered port
        (lambda i: [*i[:2], "other", *i[3:]], "HMAC is wrong"),  # tampered magic
        (lambda i: i[:4], "Invalid data"),
        (lambda i: ["", *i[1:]], "Missing destination host, port or magic"),
        (lambda i: "192.0.2.7", "Invalid data"),
    ],
)
def test_disk_info_refused(change: Callable[[list[Any]], Any], message: str) -> None:
    info = rie.sign_disk_info(CDS, "abc123", 0, "192.0.2.7", 1234, "magic")
    with pytest.raises(errors.OpPrereqError, match=f"Target info for disk 0: {message}"):
        rie.check_disk_info(CDS, 0, change(info))


def test_disk_info_bound_to_index_and_secret() -> None:
    info = rie.sign_disk_info(CDS, "abc123", 0, "192.0.2.7", 1234, "magic")
    with pytest.raises(errors.OpPrereqError, match="HMAC is wrong"):
        rie.check_disk_info(CDS, 1, info)
    with pytest.raises(errors.OpPrereqError, match="HMAC is wrong"):
        rie.check_disk_info(OTHER, 0, info)


def test_disk_info_bad_port_or_host() -> None:
    for host, port in (("192.0.2.7", 70000), ("bad host!", 5), ("192.0.2.7", True)):
        info = rie.sign_disk_info(CDS, "s", 0, host, port, "magic")
        with pytest.raises(errors.OpPrereqError, match="Target info for disk 0: Invalid"):
            rie.check_disk_info(CDS, 0, info)


def test_signed_certificate_round_trip(cert_pem: str) -> None:
    signed = rie.sign_x509_cert(cert_pem, CDS, "abc123")
    assert signed.startswith("X-Ganeti-Signature: abc123/")
    assert signed.endswith(cert_pem)
    assert rie.load_signed_x509_cert(signed, CDS) == cert_pem


def test_signed_certificate_refused(cert_pem: str) -> None:
    signed = rie.sign_x509_cert(cert_pem, CDS, "abc123")
    with pytest.raises(errors.OpPrereqError, match="signature is invalid"):
        rie.load_signed_x509_cert(signed, OTHER)
    other = certs.make_self_signed_cert("evil.example.com", 1)[0].decode()
    swapped = signed.split("\n\n", 1)[0] + "\n\n" + other
    with pytest.raises(errors.OpPrereqError, match="signature is invalid"):
        rie.load_signed_x509_cert(swapped, CDS)
    with pytest.raises(errors.OpPrereqError, match="signature is missing"):
        rie.load_signed_x509_cert(cert_pem, CDS)
    with pytest.raises(errors.OpPrereqError, match="Unable to load destination X509 CA"):
        rie.load_signed_x509_cert("X-Ganeti-Signature: abc/def\n\nnot a certificate", CDS)
    with pytest.raises(errors.OpPrereqError, match="Unable to load source X509 CA"):
        rie.load_signed_x509_cert(None, CDS, what="source X509 CA")


def test_expired_or_future_certificate_refused() -> None:
    day = datetime.timedelta(days=1)
    expired = rie.sign_x509_cert(self_signed_pem("node1.example.com", -2 * day, -day), CDS, "abc")
    with pytest.raises(
        errors.OpPrereqError, match=r"Invalid destination X509 CA \(Certificate is expired"
    ):
        rie.load_signed_x509_cert(expired, CDS)
    future = rie.sign_x509_cert(self_signed_pem("node1.example.com", day, 2 * day), CDS, "abc")
    with pytest.raises(errors.OpPrereqError, match="Certificate not yet valid"):
        rie.load_signed_x509_cert(future, CDS)


def test_key_name_round_trip_and_refusals() -> None:
    signed = rie.sign_key_name(CDS, "x509-20261125-abcd", "abc123")
    assert rie.check_key_name(CDS, signed) == "x509-20261125-abcd"
    with pytest.raises(errors.OpPrereqError, match="HMAC for X509 key name is wrong"):
        rie.check_key_name(OTHER, signed)
    with pytest.raises(errors.OpPrereqError, match="HMAC for X509 key name is wrong"):
        rie.check_key_name(CDS, ["x509-other", *signed[1:]])
    with pytest.raises(errors.OpPrereqError, match="Invalid data for X509 key name"):
        rie.check_key_name(CDS, "x509-20261125-abcd")


def test_domain_secret_read_as_one_line(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    paths.cluster_domain_secret.parent.mkdir(parents=True, exist_ok=True)
    paths.cluster_domain_secret.write_text("\nsecret\n\n")
    assert rie.read_domain_secret(paths) == b"secret"
    paths.cluster_domain_secret.write_text("one\ntwo\n")
    with pytest.raises(errors.OpPrereqError, match="exactly one line"):
        rie.read_domain_secret(paths)
    paths.cluster_domain_secret.unlink()
    with pytest.raises(errors.OpPrereqError, match="Cannot read the cluster domain secret"):
        rie.read_domain_secret(paths)


def test_disk_magic_per_disk() -> None:
    magics = {rie.disk_magic("base", "inst1", i) for i in range(3)}
    assert len(magics) == 3
    assert rie.disk_magic("base", "inst1", 0) == sha1(b"0baseinst10").hexdigest()
