"""Corral's inter-cluster messages (corral.crypto.rie) against Ganeti 3.0.2's
own functions: Ganeti accepts what Corral signs, Corral accepts what Ganeti
signs, and both refuse the other's messages under another domain secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.crypto import certs, rie
from tests.conformance.ganeti import ganeti_library
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, ok
from tests.helpers.jobs import wait_final
from tests.helpers.osdef import make_os

CDS = "9f3a1c0e5b7d2f4a6c8e0b1d3f5a7c9e1b3d5f7a"
OTHER = "0000000000000000000000000000000000000000"
SALT = "0123456789abcdef"

# Ganeti's side: checks Corral's messages (stdin) under both secrets, and
# makes its own messages for Corral to check.
_GANETI = r"""
import json, sys
import OpenSSL
from ganeti import errors, utils
from ganeti.masterd import instance as mi

req = json.load(sys.stdin)
cds, other, salt, pem = req["cds"], req["other"], req["salt"], req["pem"]

def disk_info(secret, index, info):
    try:
        return list(mi.CheckRemoteExportDiskInfo(secret, index, info))
    except errors.GenericError as err:
        return "refused: %s" % err

def signed_cert(secret, text):
    try:
        cert, got_salt = utils.LoadSignedX509Certificate(text, secret)
    except errors.GenericError as err:
        return "refused: %s" % err
    return [OpenSSL.crypto.dump_certificate(OpenSSL.crypto.FILETYPE_PEM, cert).decode(), got_salt]

name, digest, key_salt = req["key_name"]
cert = OpenSSL.crypto.load_certificate(OpenSSL.crypto.FILETYPE_PEM, pem)
print(json.dumps({
    "handshake": mi.CheckRemoteExportHandshake(cds, req["handshake"]),
    "handshake_other": mi.CheckRemoteExportHandshake(other, req["handshake"]),
    "disk_info": disk_info(cds, 1, req["disk_info"]),
    "disk_info_other": disk_info(other, 1, req["disk_info"]),
    "disk_info_index": disk_info(cds, 0, req["disk_info"]),
    "cert": signed_cert(cds, req["signed_cert"]),
    "cert_other": signed_cert(other, req["signed_cert"]),
    "key_name": utils.VerifySha1Hmac(cds, name, digest, salt=key_salt),
    "key_name_other": utils.VerifySha1Hmac(other, name, digest, salt=key_salt),
    "magic": mi._GetInstDiskMagic("a1b2c3", "inst1.example.com", 2),
    "own_handshake": list(mi.ComputeRemoteExportHandshake(cds)),
    "own_disk_info": list(mi.ComputeRemoteImportDiskInfo(cds, salt, 3, "192.0.2.9", 11000, "mg")),
    "own_cert": utils.SignX509Certificate(cert, cds, salt),
    "own_key_name": [name, utils.Sha1Hmac(cds, name, salt=salt), salt],
}))
"""


@pytest.fixture(scope="module")
def exchange(ganeti: Path) -> dict[str, Any]:
    """Corral's messages, Ganeti's verdicts on them and Ganeti's own messages."""
    cds = CDS.encode()
    pem = certs.make_self_signed_cert("node1.example.com", 1)[0].decode()
    corral = {
        "cds": CDS,
        "other": OTHER,
        "salt": SALT,
        "pem": pem,
        "handshake": rie.compute_handshake(cds),
        "disk_info": rie.sign_disk_info(cds, rie.new_salt(), 1, "node2.example.com", 1234, "mg"),
        "signed_cert": rie.sign_x509_cert(pem, cds, rie.new_salt()),
        "key_name": rie.sign_key_name(cds, "x509-20261125020000-0a1b2c3d", rie.new_salt()),
    }
    result = ganeti_library(_GANETI, stdin=json.dumps(corral))
    assert result.rc == 0, result.stderr
    return {"corral": corral, "ganeti": json.loads(result.stdout)}


def test_ganeti_accepts_corral_messages(exchange: dict[str, Any]) -> None:
    ganeti, corral = exchange["ganeti"], exchange["corral"]
    assert ganeti["handshake"] is None
    assert ganeti["disk_info"] == ["node2.example.com", 1234, "mg"]
    assert ganeti["cert"] == [
        corral["pem"],
        corral["signed_cert"].split(":")[1].split("/")[0].strip(),
    ]
    assert ganeti["key_name"] is True


def test_ganeti_refuses_corral_messages_under_another_secret(exchange: dict[str, Any]) -> None:
    ganeti = exchange["ganeti"]
    assert "don't share the same domain secret" in ganeti["handshake_other"]
    assert ganeti["disk_info_other"] == "refused: HMAC is wrong"
    assert ganeti["disk_info_index"] == "refused: HMAC is wrong"
    assert ganeti["cert_other"] == "refused: X509 certificate signature is invalid"
    assert ganeti["key_name_other"] is False


def test_corral_accepts_ganeti_messages(exchange: dict[str, Any]) -> None:
    ganeti, corral = exchange["ganeti"], exchange["corral"]
    cds = CDS.encode()
    assert rie.check_handshake(cds, ganeti["own_handshake"]) is None
    assert rie.check_disk_info(cds, 3, ganeti["own_disk_info"]) == ("192.0.2.9", 11000, "mg")
    assert rie.load_signed_x509_cert(ganeti["own_cert"], cds) == corral["pem"]
    assert rie.check_key_name(cds, ganeti["own_key_name"]) == corral["key_name"][0]
    assert rie.disk_magic("a1b2c3", "inst1.example.com", 2) == ganeti["magic"]


def test_same_text_as_ganeti_for_the_same_salt(exchange: dict[str, Any]) -> None:
    ganeti, corral = exchange["ganeti"], exchange["corral"]
    cds = CDS.encode()
    assert rie.sign_x509_cert(corral["pem"], cds, SALT) == ganeti["own_cert"]
    assert rie.sign_disk_info(cds, SALT, 3, "192.0.2.9", 11000, "mg") == ganeti["own_disk_info"]
    assert rie.sign_key_name(cds, corral["key_name"][0], SALT) == ganeti["own_key_name"]


def test_corral_refuses_ganeti_messages_under_another_secret(exchange: dict[str, Any]) -> None:
    ganeti = exchange["ganeti"]
    other = OTHER.encode()
    assert rie.check_handshake(other, ganeti["own_handshake"]) is not None
    with pytest.raises(errors.OpPrereqError, match="HMAC is wrong"):
        rie.check_disk_info(other, 3, ganeti["own_disk_info"])
    with pytest.raises(errors.OpPrereqError, match="signature is invalid"):
        rie.load_signed_x509_cert(ganeti["own_cert"], other)
    with pytest.raises(errors.OpPrereqError, match="HMAC for X509 key name is wrong"):
        rie.check_key_name(other, ganeti["own_key_name"])


_CHECK_PREPARED = r"""
import json, sys
from ganeti import utils
from ganeti.masterd import instance as mi

req = json.load(sys.stdin)
cds, prepared = req["cds"], req["prepared"]
name, digest, salt = prepared["x509_key_name"]
cert, cert_salt = utils.LoadSignedX509Certificate(prepared["x509_ca"], cds)
print(json.dumps({
    "handshake": mi.CheckRemoteExportHandshake(cds, prepared["handshake"]),
    "key_name": utils.VerifySha1Hmac(cds, name, digest, salt=salt),
    "cert": list(utils.VerifyX509Certificate(cert, None, None, False)),
    "salts": [cert_salt, salt],
}))
"""


@pytest.mark.slow
def test_prepared_remote_export_accepted_by_ganeti(gcluster: TestCluster) -> None:
    """OP_BACKUP_PREPARE(remote) on a Corral cluster: Ganeti's own checks of
    the destination side accept the handshake, the key name and the CA."""
    make_os(gcluster.paths, "plain", variants=None)
    name = "prep1.example.com"
    ok(add(gcluster, name, "-t", "diskless", "-o", "plain", "--no-install", "--no-start"))
    with gcluster.client() as client:
        job_id = client.submit_job(
            [{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": name, "mode": "remote"}]
        )
        status, (prepared,) = wait_final(client, [job_id], ("opresult",), timeout=60)[0]
    assert status == "success", prepared
    cds = rie.read_domain_secret(gcluster.paths).decode()
    result = ganeti_library(_CHECK_PREPARED, stdin=json.dumps({"cds": cds, "prepared": prepared}))
    assert result.rc == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["handshake"] is None and verdict["key_name"] is True
    assert verdict["cert"] == [None, None]
    assert verdict["salts"][0] == verdict["salts"][1]
    with gcluster.client() as client:  # local: nothing to prepare
        job_id = client.submit_job(
            [{"OP_ID": "OP_BACKUP_PREPARE", "instance_name": name, "mode": "local"}]
        )
        assert wait_final(client, [job_id], ("opresult",), timeout=60)[0] == ["success", [None]]
