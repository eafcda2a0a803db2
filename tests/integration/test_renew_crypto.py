"""gnt-cluster renew-crypto renews the RAPI certificate: corral-rapi serves
the new one at once; a bad certificate file or an option Corral lacks
changes nothing."""

from __future__ import annotations

import datetime
import hashlib
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from corral.bootstrap import MASTERD, RAPI
from corral.crypto.certs import make_self_signed_cert
from corral.process.daemons import running_pid, stop_daemon
from tests.helpers.cluster import RAPI_PORT, Result, TestCluster, running_cluster

MASTER = "node1.example.com"
SUCCESS_OUTPUT = [
    'Updating certificates now. Running "gnt-cluster verify"  is recommended after this operation.',
    "Gathering cluster information",
    f"Stopping daemon 'corral-rapi' on {MASTER}",
    "Updating certificates and keys",
    f"Starting daemon 'corral-rapi' on {MASTER}",
    "All requested certificates and keys have been replaced."
    ' Running "gnt-cluster verify" now is recommended.',
]


def served_fingerprint(cl: TestCluster) -> str:
    """SHA-256 of the certificate corral-rapi presents (not verified)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((cl.node_ip, RAPI_PORT), timeout=30) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def pem_fingerprint(pem: bytes) -> str:
    cert = x509.load_pem_x509_certificate(pem)
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def get_version(cl: TestCluster, cafile: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(cafile))
    with urllib.request.urlopen(f"{cl.rapi_url}/version", context=context, timeout=30) as answer:
        return bytes(answer.read())


def renew(cl: TestCluster, *args: str) -> Result:
    """renew-crypto without a controlling terminal (a prompt is answered no)."""
    proc = subprocess.run(
        [sys.executable, "-m", "corral.cli.gnt_cluster", "renew-crypto", *args],
        env=cl.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        start_new_session=True,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def assert_unchanged(cl: TestCluster, pem: bytes, pid: int | None) -> None:
    """rapi.pem, the served certificate and corral-rapi's process are the same."""
    assert cl.paths.rapi_pem.read_bytes() == pem
    assert served_fingerprint(cl) == pem_fingerprint(pem)
    assert running_pid(cl.paths.pid_file(RAPI)) == pid


def test_new_rapi_certificate_is_served(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        old_ca = tmp_path / "old-rapi.pem"
        old_ca.write_bytes(cl.rapi_ca.read_bytes())
        before = served_fingerprint(cl)
        assert before == pem_fingerprint(old_ca.read_bytes())
        old_pid = running_pid(cl.paths.pid_file(RAPI))

        result = renew(cl, "--new-rapi-certificate", "--force")
        assert result.rc == 0, result.stderr
        assert result.stdout.splitlines() == SUCCESS_OUTPUT

        after = served_fingerprint(cl)
        assert after != before
        assert after == pem_fingerprint(cl.rapi_ca.read_bytes())
        new_pid = running_pid(cl.paths.pid_file(RAPI))
        assert new_pid is not None and new_pid != old_pid
        stat = cl.paths.rapi_pem.stat()
        assert (stat.st_mode & 0o777, stat.st_uid) == (0o600, 0)
        with pytest.raises(urllib.error.URLError) as failure:
            get_version(cl, old_ca)
        assert isinstance(failure.value.reason, ssl.SSLCertVerificationError)
        # The new certificate names the node's address: verification passes.
        assert get_version(cl, cl.rapi_ca) == b"2"


def test_rapi_certificate_file_is_installed(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        cert, key = make_self_signed_cert("rapi.example.org", 30, ips=[cl.node_ip])
        given = tmp_path / "given.pem"
        given.write_bytes(key + cert)  # the key first: any order is fine
        result = renew(cl, f"--rapi-certificate={given}", "--force")
        assert result.rc == 0, result.stderr
        assert result.stdout.splitlines() == SUCCESS_OUTPUT
        assert served_fingerprint(cl) == pem_fingerprint(cert)
        assert cl.paths.rapi_pem.read_bytes() == given.read_bytes()
        assert cl.paths.rapi_pem.stat().st_mode & 0o777 == 0o600
        assert get_version(cl, given) == b"2"


def _weak_rsa_pem() -> bytes:
    """A self-signed certificate with a 1024-bit RSA key, which OpenSSL's
    default security level refuses to serve."""
    key = rsa.generate_private_key(65537, 1024)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "weak.example.org")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM) + key_pem


def _bad_files(tmp_path: Path) -> list[tuple[Path, str]]:
    cert, key = make_self_signed_cert("rapi.example.org", 30)
    _other_cert, other_key = make_self_signed_cert("other.example.org", 30)
    encrypted = serialization.load_pem_private_key(key, None).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    cases = {
        "garbage.pem": (b"this is not a certificate\n", "no valid PEM certificate"),
        "cert-only.pem": (cert, "no valid PEM private key"),
        "key-only.pem": (key, "no valid PEM certificate"),
        "wrong-key.pem": (cert + other_key, "The private key does not match the certificate"),
        "encrypted.pem": (cert + encrypted, "the key is encrypted"),
        "weak.pem": (_weak_rsa_pem(), "corral-rapi cannot serve it: [SSL: EE_KEY_TOO_SMALL]"),
    }
    files = []
    for name, (data, reason) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        files.append((path, reason))
    files.append((tmp_path / "missing.pem", "Unable to read certificate: No such file"))
    return files


def test_bad_certificate_file_changes_nothing(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        pem = cl.paths.rapi_pem.read_bytes()
        pid = running_pid(cl.paths.pid_file(RAPI))
        for path, reason in _bad_files(tmp_path):
            result = renew(cl, f"--rapi-certificate={path}", "--force")
            assert result.rc == 1, path
            assert f"Unable to load X509 certificate from {path}: " in result.stderr
            assert reason in result.stderr, (path, result.stderr)
            assert_unchanged(cl, pem, pid)
        assert get_version(cl, cl.rapi_ca) == b"2"


NOT_BUILT = [
    ["--new-spice-certificate"],
    ["--spice-certificate", "/etc/hostname", "--spice-ca-certificate", "/etc/hostname"],
]


def test_refusals_change_nothing(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        pem = cl.paths.rapi_pem.read_bytes()
        pid = running_pid(cl.paths.pid_file(RAPI))
        for args in NOT_BUILT:
            # Even together with a RAPI option, nothing is done.
            result = renew(cl, "--new-rapi-certificate", "--force", *args)
            assert result.rc == 1, args
            assert f"renew-crypto {args[0]}" in result.stderr
            assert "is not built in Corral yet" in result.stderr
            assert_unchanged(cl, pem, pid)
        result = renew(cl, "--new-rapi-certificate", "--rapi-certificate=/etc/hostname", "--force")
        assert result.rc == 1
        assert "Only one of the --new-rapi-certificate and --rapi-certificate" in result.stderr
        # Without --force the question is asked; without a terminal the answer is no.
        result = renew(cl, "--new-rapi-certificate")
        assert result.rc == 1
        assert_unchanged(cl, pem, pid)


def test_runs_on_the_master_only(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        pem = cl.paths.rapi_pem.read_bytes()
        pid = running_pid(cl.paths.pid_file(RAPI))
        # Without masterd this machine is not (acting as) the master.
        assert stop_daemon(cl.paths, MASTERD)
        result = renew(cl, "--new-rapi-certificate", "--force")
        assert result.rc != 0
        assert "Cannot communicate with the master daemon" in result.stderr
        assert_unchanged(cl, pem, pid)
