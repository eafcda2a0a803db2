"""OP_BACKUP_PREPARE and OP_BACKUP_EXPORT (mode remote) on real nodes: the
destination is an import listening on node2, started with the node RPCs as
the destination cluster's masterd would (same domain secret), with its own
per-move key; the disks arrive byte for byte over TLS with the per-move
certificates.  Tampered, foreign or expired destination data is refused
before anything is sent."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

from corral.crypto import rie
from corral.rpc import calls_impexp
from corral.rpc.calls_impexp import (
    ImpExpOptions,
    impexp_cleanup,
    impexp_status,
    import_start,
    x509_cert_create,
    x509_cert_remove,
)
from corral.rpc.result import NodeCallError
from corral.rpc.wire import JsonObject
from tests.helpers.backup import (
    NODE1,
    NODE2,
    Bed,
    export_op,
    fill_disks,
    job_log,
    run_job,
    submit,
)
from tests.helpers.certs import self_signed_pem
from tests.helpers.instances import add, ok
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

DUMP = '#!/bin/sh\nexec cat "$EXPORT_DEVICE"\n'
RESTORE = '#!/bin/sh\nexec cat > "$IMPORT_DEVICE"\n'
OTHER_CDS = b"ffffffffffffffffffffffffffffffffffffffff"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with cluster_with_nodes(tmp_path_factory.mktemp("rexport"), (NODE2,)) as (cl, extra):
        bed = Bed(cl, extra)
        for node in bed.nodes.values():
            scripts = {"export": DUMP, "import": RESTORE}
            make_os(node.paths, "dumper", variants=None, scripts=scripts)
        yield bed


DAY = datetime.timedelta(days=1)


@dataclass
class Destination:
    """Imports listening on node2 for an instance's disks, and what the
    destination cluster would hand to the source: signed CA and disk infos."""

    imports: list[str]
    signed_ca: str
    disk_info: list[list[Any]]
    key_name: str


def new_instance(bed: Bed, name: str, *sizes: str) -> list[bytes]:
    disks = [f"--disk={i}:size={size}" for i, size in enumerate(sizes)]
    ok(add(bed.cl, name, "-t", "file", *disks, "-o", "dumper", "--no-install", "-n", NODE1))
    ok(bed.cl.gnt("instance", "shutdown", name))
    return fill_disks(bed, name)


def prepare(bed: Bed, name: str) -> dict[str, Any]:
    _, result = run_job(
        bed, {"OP_ID": "OP_BACKUP_PREPARE", "instance_name": name, "mode": "remote"}
    )
    assert isinstance(result, dict)
    return result


def listen(bed: Bed, name: str, disks: int, source_ca: str, compress: str = "none") -> Destination:
    """Imports on node2 into ``<export dir>/<name>.new/d<i>`` with a fresh key."""
    cds = rie.read_domain_secret(bed.cl.paths)
    dest = bed.nodes[NODE2]
    key_name, cert = dest.run_sync(x509_cert_create(3600))
    source_pem = rie.load_signed_x509_cert(source_ca, cds, what="source X509 CA")
    base, salt = rie.new_salt(), rie.new_salt()
    imports, infos = [], []
    for index in range(disks):
        magic = rie.disk_magic(base, name, index)
        opts: ImpExpOptions = {
            "key_name": key_name,
            "ca_pem": source_pem,
            "compress": compress,
            "magic": magic,
            "connect_timeout": 60,
            "bind_address": None,
            "size": None,
        }
        args = {"export": name, "dump": f"d{index}"}
        imports.append(
            dest.run_sync(import_start(opts, {"name": name}, f"disk/{index}", "file", args))
        )
        (status,) = dest.run_sync(impexp_status([imports[-1]]))
        assert status is not None
        infos.append(
            rie.sign_disk_info(cds, salt, index, dest.address, status["listen_port"], magic)
        )
    return Destination(imports, rie.sign_x509_cert(cert, cds, salt), infos, key_name)


def statuses(bed: Bed, dest: Destination) -> list[JsonObject]:
    """The imports' statuses (each one known to the node)."""
    found = bed.nodes[NODE2].run_sync(impexp_status(dest.imports))
    assert all(found), found
    return cast("list[JsonObject]", found)


def finish(bed: Bed, dest: Destination) -> None:
    node = bed.nodes[NODE2]
    for name in dest.imports:
        node.run_sync(impexp_cleanup(name))
    node.run_sync(x509_cert_remove(dest.key_name))


def remote_op(name: str, prep: dict[str, Any], dest: Destination, **fields: Any) -> dict[str, Any]:
    return export_op(
        name,
        dest.disk_info,
        mode="remote",
        x509_key_name=prep["x509_key_name"],
        destination_x509_ca=dest.signed_ca,
        **fields,
    )


def test_remote_export_to_listening_imports(bed: Bed) -> None:
    contents = new_instance(bed, "rx1", "6m", "2m")
    prep = prepare(bed, "rx1")
    cds = rie.read_domain_secret(bed.cl.paths)
    assert rie.check_handshake(cds, prep["handshake"]) is None
    source_key = rie.check_key_name(cds, prep["x509_key_name"])
    dest = listen(bed, "rx1", 2, prep["x509_ca"], compress="zstd")
    try:
        job_id, result = run_job(bed, remote_op("rx1", prep, dest, compress="zstd"))
        assert result == [True, [True, True]]
        wait_until(
            lambda: all(s["exit_status"] == 0 for s in statuses(bed, dest)),
            timeout=30,
            what="the imports' success",
        )
    finally:
        finish(bed, dest)
    received = bed.paths(NODE2).export_dir / "rx1.new"
    assert [(received / f"d{i}").read_bytes() for i in range(2)] == contents
    lines = job_log(bed, job_id)
    host, port = dest.disk_info[1][:2]
    for line in (f"Sending disk 1 to {host}:{port}", "Disk 0 finished sending data"):
        assert line in lines, (line, lines)
    # The source's per-move key is gone with the export.
    with pytest.raises(NodeCallError, match="x509_cert_remove"):
        bed.nodes[NODE1].run_sync(x509_cert_remove(source_key))


def _spoiled(bed: Bed, dest: Destination, prep: dict[str, Any], what: str) -> dict[str, Any]:
    """The export's fields with one piece of the destination's data spoiled."""
    cds = rie.read_domain_secret(bed.cl.paths)
    header, pem = dest.signed_ca.split("\n\n", 1)
    if what == "tampered CA":  # the signature kept, the certificate swapped
        return {"destination_x509_ca": f"{header}\n\n{self_signed_pem(NODE2, -2 * DAY, -DAY)}"}
    if what == "wrong domain secret":
        return {"destination_x509_ca": rie.sign_x509_cert(pem, OTHER_CDS, "abc")}
    if what == "expired certificate":
        return {
            "destination_x509_ca": rie.sign_x509_cert(
                self_signed_pem(NODE2, -2 * DAY, -DAY), cds, "abc"
            )
        }
    if what == "tampered host":
        info = [list(i) for i in dest.disk_info]
        info[0][0] = "127.0.0.1"
        return {"target_node": info}
    if what == "foreign key name":
        return {"x509_key_name": rie.sign_key_name(OTHER_CDS, prep["x509_key_name"][0], "abc")}
    assert what == "disk count"
    return {"target_node": dest.disk_info[:1]}


REFUSALS = {
    "tampered CA": "X509 certificate signature is invalid",
    "wrong domain secret": "X509 certificate signature is invalid",
    "expired certificate": "Invalid destination X509 CA (Certificate is expired",
    "tampered host": "Target info for disk 0: HMAC is wrong",
    "foreign key name": "HMAC for X509 key name is wrong",
    "disk count": "Received destination information for 1 disks, but instance rx2 has 2 disks",
}


def test_refusals_send_nothing(bed: Bed) -> None:
    new_instance(bed, "rx2", "2m", "1m")
    prep = prepare(bed, "rx2")
    dest = listen(bed, "rx2", 2, prep["x509_ca"])
    try:
        for what, text in REFUSALS.items():
            op = {**remote_op("rx2", prep, dest), **_spoiled(bed, dest, prep, what)}
            _, error = run_job(bed, op, status="error")
            assert error[0] == "OpPrereqError" and text in json.dumps(error), (what, error)
        assert [(s["connected"], s["exit_status"]) for s in statuses(bed, dest)] == [
            (False, None),
            (False, None),
        ]
    finally:
        finish(bed, dest)


def test_destination_certificate_checked_on_the_wire(bed: Bed) -> None:
    """Signed data that names a certificate other than the import's: the TLS
    handshake fails, the job fails, nothing is written."""
    new_instance(bed, "rx3", "1m")
    prep = prepare(bed, "rx3")
    dest = listen(bed, "rx3", 1, prep["x509_ca"])
    other_key, other_cert = bed.nodes[NODE2].run_sync(x509_cert_create(3600))
    cds = rie.read_domain_secret(bed.cl.paths)
    try:
        op = {
            **remote_op("rx3", prep, dest),
            "destination_x509_ca": rie.sign_x509_cert(other_cert, cds, "abc"),
        }
        job_id, error = run_job(bed, op, status="error")
        assert "Export failed, errors in disk export: disk(s) 0" in json.dumps(error)
        assert any(x.startswith("Disk 0 failed to send data") for x in job_log(bed, job_id))
        (status,) = statuses(bed, dest)
        assert status["exit_status"] is None or status["exit_status"] != 0
    finally:
        finish(bed, dest)
        bed.nodes[NODE2].run_sync(x509_cert_remove(other_key))
    assert not (bed.paths(NODE2).export_dir / "rx3.new" / "d0").exists()


def remote_import_entry(bed: Bed, job_id: int) -> dict[str, Any] | None:
    """The job's "remote-import" log entry (what move-instance reads), if any yet."""
    with bed.cl.client() as client:
        (row,) = client.query_jobs([job_id], ["oplog"])
    entries = [entry[3] for op in row[0] for entry in op if entry[2] == "remote-import"]
    return entries[0] if entries else None


def test_move_cancelled_on_the_source_side(bed: Bed) -> None:
    """The export of a move cancelled mid-stream: the source instance stays as
    it was, its per-move key goes, the destination's import fails and leaves
    no instance or disk behind."""
    contents = new_instance(bed, "rx4", "32m")
    prep = prepare(bed, "rx4")
    create = {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": "rx4dst",
        "mode": "remote-import",
        "disk_template": "file",
        "disks": [{"size": 32}],
        "nics": [],
        "os_type": "dumper",
        "pnode": NODE2,
        "name_check": False,
        "ip_check": False,
        "start": False,
        "source_handshake": prep["handshake"],
        "source_x509_ca": prep["x509_ca"],
        "source_instance_name": "rx4",
    }
    create_id = submit(bed, create)
    wait_until(lambda: remote_import_entry(bed, create_id), timeout=60, what="remote-import")
    entry = remote_import_entry(bed, create_id)
    assert entry is not None
    source = bed.nodes[NODE1]
    source.run_sync(calls_impexp.test_impexp_gate(True))
    try:
        export = export_op(
            "rx4",
            entry["disks"],
            mode="remote",
            x509_key_name=prep["x509_key_name"],
            destination_x509_ca=entry["x509_ca"],
        )
        export_id = submit(bed, export)
        wait_until(
            lambda: "Disk 0 is now sending data" in job_log(bed, export_id),
            timeout=60,
            what="the export sending",
        )
        with bed.cl.client() as client:
            client.call("CancelJob", export_id, True)
            assert wait_final(client, [export_id], timeout=60)[0][0] == "canceled"
    finally:
        source.run_sync(calls_impexp.test_impexp_gate(False))
    with bed.cl.client() as client:
        assert wait_final(client, [create_id], timeout=120)[0][0] == "error"
    assert bed.cl.gnt("instance", "list", "rx4dst").rc != 0
    assert bed.disk_files(NODE2, "rx4dst") == []
    assert [p.read_bytes() for p in bed.disk_files(NODE1, "rx4")] == contents
    source_key = prep["x509_key_name"][0]
    with pytest.raises(NodeCallError, match="x509_cert_remove"):
        source.run_sync(x509_cert_remove(source_key))
