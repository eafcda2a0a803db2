"""Instance creation from exports (OP_INSTANCE_CREATE modes ``import`` and
``remote-import``) on a three-node cluster of real daemons: data through the
OS import script byte for byte, the rename script after it, Ganeti-written
exports, refusals that create nothing, and failures (a source that never
connects, a source node killed mid-import) that leave nothing behind.

Remote imports here wait CONNECT_TIMEOUT seconds for their source (the
test-only CORRAL_TEST_RIE_CONNECT_TIMEOUT, read by masterd) instead of
Ganeti's five minutes.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from corral.cmdlib.installer import CONNECT_TIMEOUT_ENV
from corral.cmdlib.intents import PREFIX
from corral.crypto import rie
from corral.paths import Paths
from corral.process.daemons import start_daemon
from corral.rpc import calls_impexp
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, ok, query
from tests.helpers.jobs import wait_final
from tests.helpers.kvm_guest import kill_mirror_daemons, short_root
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import REPO_ROOT, Noded, daemon_env, noded_cmd
from tests.helpers.offline_config import durable_values
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

NODE1, NODE2, NODE3 = "node1.example.com", "node2.example.com", "node3.example.com"
MIB = 1024 * 1024
CONNECT_TIMEOUT = 8
GANETI_EXPORT = REPO_ROOT / "tests" / "data" / "ganeti-export" / "config.ini"
GANETI_NAME = "ganeti-src.example.com"
GANETI_DUMP = "5bbf9362-4d8f-491b-9a0a-4828e5a9ac88"
OS_PARAMS = {"greeting": "a greeting", "private_note": "a note"}


def os_scripts(dumps: Path) -> dict[str, str]:
    """The OS "envdump": export/import stream the disk through stdout/stdin;
    import and rename record their environment in ``dumps``."""

    def record(kind: str, suffix: str = "") -> str:
        return f'env | sort > "{dumps}/{kind}-$INSTANCE_NAME{suffix}.env"\n'

    return {
        "export": (
            "#!/bin/sh\n"
            + record("export", "-$EXPORT_INDEX")
            # dash cannot redirect to fds above 9
            + 'stat -c %s "$EXPORT_DEVICE" > /dev/fd/$EXP_SIZE_FD\n'
            'exec cat "$EXPORT_DEVICE"\n'
        ),
        "import": (
            "#!/bin/sh\n"
            + record("import", "-$IMPORT_INDEX")
            + 'exec dd of="$IMPORT_DEVICE" bs=1M conv=notrunc status=none\n'
        ),
        "rename": "#!/bin/sh\n" + record("rename"),
    }


@dataclass
class Bed:
    cl: TestCluster
    nodes: dict[str, Noded]
    dumps: Path

    def paths(self, node: str) -> Paths:
        return self.nodes[node].paths

    def env(self, script: str, instance: str, index: int | None = None) -> dict[str, str]:
        suffix = "" if index is None else f"-{index}"
        path = self.dumps / f"{script}-{instance}{suffix}.env"
        return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    # A short root: a mirrored disk's storage daemon has its QMP socket there
    # (a unix socket's path is at most 107 bytes).
    with short_root("imp") as base:
        yield from _bed(base)


def _bed(base: Path) -> Iterator[Bed]:
    dumps = base / "dumps"
    dumps.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CONNECT_TIMEOUT_ENV, str(CONNECT_TIMEOUT))  # inherited by masterd
        with cluster_with_nodes(base, (NODE2, NODE3)) as (cl, extra):
            nodes = {NODE1: Noded(cl.paths, cl.node_ip, cl.port, NODE1)}
            nodes.update({n.name: n for n in extra})
            for node in nodes.values():
                make_os(node.paths, "envdump", parameters=OS_PARAMS, scripts=os_scripts(dumps))
            try:
                yield Bed(cl, nodes, dumps)
            finally:
                # Mirrored disks' exports outlive noded by design.
                for node in nodes.values():
                    kill_mirror_daemons(node.paths.run_dir)


# Helpers
def submit(bed: Bed, op: dict[str, Any]) -> int:
    with bed.cl.client() as client:
        return client.submit_job([op])


def run(bed: Bed, op: dict[str, Any], timeout: float = 120) -> tuple[str, Any]:
    """Run one opcode; its job's status and result (the error when it failed)."""
    job_id = submit(bed, op)
    with bed.cl.client() as client:
        status, result = wait_final(client, [job_id], ("opresult",), timeout=timeout)[0]
    return status, result[0]


def job_log(bed: Bed, job_id: int) -> list[list[Any]]:
    """The job's log entries: [serial, timestamp, type, message]."""
    with bed.cl.client() as client:
        (row,) = client.query_jobs([job_id], ["oplog"])
    return [entry for op in row[0] for entry in op]


def messages(bed: Bed, job_id: int) -> list[str]:
    return [str(entry[3]) for entry in job_log(bed, job_id) if entry[2] == "message"]


def import_op(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "import",
        "disk_template": "file",
        "disks": [],
        "nics": [],
        "name_check": False,
        "ip_check": False,
        "start": False,
        **fields,
    }


def disk_files(bed: Bed, node: str, name: str) -> list[Path]:
    directory = bed.paths(node).file_storage_dir / name
    if not directory.exists():
        return []
    return sorted(directory.glob("*.disk*"), key=lambda p: p.name.rsplit("disk", 1)[1])


def fill(paths: list[Path]) -> list[bytes]:
    """Random data over each file (a zero run in the middle); the contents."""
    contents = []
    for path in paths:
        size = path.stat().st_size
        data = os.urandom(size // 2) + bytes(size // 4) + os.urandom(size - size // 2 - size // 4)
        path.write_bytes(data)
        contents.append(data)
    return contents


def ganeti_export(bed: Bed, node: str, config: str | None = None) -> bytes:
    """Ganeti's sample export (tests/data/ganeti-export) in ``node``'s export
    directory, with an 8 MiB dump; the dump's content."""
    directory = bed.paths(node).export_dir / GANETI_NAME
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.ini").write_text(config or GANETI_EXPORT.read_text())
    data = os.urandom(8 * MIB)
    (directory / GANETI_DUMP).write_bytes(data)
    return data


def remove_exports(bed: Bed) -> None:
    for node in bed.nodes:
        shutil.rmtree(bed.paths(node).export_dir, ignore_errors=True)


def instances(bed: Bed) -> set[str]:
    return set(query(bed.cl, ["name"]))


def assert_nothing_created(bed: Bed, name: str) -> None:
    """No instance, no disk on any node, no add left half-done, no move key."""
    assert name not in instances(bed)
    for node in bed.nodes:
        assert disk_files(bed, node, name) == [], node
        crypto = bed.paths(node).run_dir / "crypto"
        assert not crypto.exists() or not any(crypto.iterdir()), node
    assert not durable_values(bed.cl.paths, PREFIX)


# Local imports
def test_export_then_import_under_a_new_name_on_another_node(bed: Bed) -> None:
    ok(
        add(
            bed.cl,
            "src1",
            "-t",
            "file",
            "--disk=0:size=6m",
            "--disk=1:size=3m",
            "-o",
            "envdump+default",
            "-O",
            "greeting=hi",
            "--os-parameters-private",
            "private_note=psst",
            "--tags",
            "t1",
            "-B",
            "maxmem=192,minmem=64",
            "-n",
            NODE1,
            "--no-start",
        )
    )
    contents = fill(disk_files(bed, NODE1, "src1"))
    sizes = query(bed.cl, ["disk.sizes"], "src1")["src1"]["disk.sizes"]
    export = submit(
        bed, {"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "src1", "target_node": NODE2}
    )
    with bed.cl.client() as client:
        assert wait_final(client, [export], timeout=120)[0][0] == "success", messages(bed, export)
    job_id = submit(bed, import_op("imp1", src_node=NODE2, src_path="src1", pnode=NODE3, nics=[{}]))
    with bed.cl.client() as client:
        assert wait_final(client, [job_id], timeout=120)[0][0] == "success"
    assert [p.read_bytes() for p in disk_files(bed, NODE3, "imp1")] == contents
    lines = messages(bed, job_id)
    assert "* running the instance OS import scripts..." in lines
    assert "Running rename script for imp1" in lines
    # The export's OS, parameters and tags; the disks' sizes.
    info = query(bed.cl, ["os", "be/maxmem", "be/minmem", "tags", "disk.sizes", "pnode"], "imp1")
    assert info["imp1"] == {
        "os": "envdump+default",
        "be/maxmem": 192,
        "be/minmem": 64,
        "tags": ["t1"],
        "disk.sizes": sizes,
        "pnode": NODE3,
    }
    for index in (0, 1):
        env = bed.env("import", "imp1", index)
        assert env["IMPORT_INDEX"] == str(index)
        assert env["IMPORT_DEVICE"] == env["IMPORT_DISK_PATH"] == env[f"DISK_{index}_PATH"]
        assert (env["OSP_GREETING"], env["OSP_PRIVATE_NOTE"]) == ("hi", "psst")
    rename = bed.env("rename", "imp1")
    assert (rename["INSTANCE_NAME"], rename["OLD_INSTANCE_NAME"]) == ("imp1", "src1")
    # Back under its own name, the instance keeps its MAC (Ganeti's rule).
    macs = query(bed.cl, ["nic.macs"], "src1")["src1"]["nic.macs"]
    ok(bed.cl.gnt("instance", "remove", "-f", "src1"))
    # The export named by its path, as Ganeti's users may give it.
    fields = {"src_node": NODE2, "src_path": "/srv/ganeti/export/src1", "pnode": NODE1}
    status, result = run(bed, import_op("src1", nics=[{}], **fields))
    assert status == "success", result
    assert query(bed.cl, ["nic.macs"], "src1")["src1"]["nic.macs"] == macs
    assert [p.read_bytes() for p in disk_files(bed, NODE1, "src1")] == contents
    for name in ("src1", "imp1"):
        ok(bed.cl.gnt("instance", "remove", "-f", name))
    remove_exports(bed)


def test_import_beside_its_source_needs_a_new_mac(bed: Bed) -> None:
    """The export's MAC is kept (Ganeti's rule), so while the source exists the
    import is refused, saying how to get a new MAC; with one it works."""
    ok(
        add(
            bed.cl,
            "src3",
            "-t",
            "file",
            "--disk=0:size=2m",
            "-o",
            "envdump+default",
            "--net",
            "0:mac=aa:00:00:33:44:55",
            "-n",
            NODE1,
            "--no-start",
        )
    )
    status, _ = run(
        bed, {"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "src3", "target_node": NODE2}
    )
    assert status == "success"
    try:
        fields = {"src_node": NODE2, "src_path": "src3", "pnode": NODE1}
        status, error = run(bed, import_op("imp3", **fields))  # the export's NICs
        assert status == "error" and error[0] == "OpPrereqError", error
        assert error[1] == [
            "MAC address aa:00:00:33:44:55 already in use in cluster;"
            " use --net 0:mac=generate for a new one",
            "resource_not_unique",
        ]
        assert_nothing_created(bed, "imp3")
        status, result = run(bed, import_op("imp3", nics=[{"mac": "generate"}], **fields))
        assert status == "success", result
        assert query(bed.cl, ["nic.macs"], "imp3")["imp3"]["nic.macs"] != ["aa:00:00:33:44:55"]
    finally:
        for name in ("src3", "imp3"):
            bed.cl.gnt("instance", "remove", "-f", name)
        remove_exports(bed)


def test_import_of_a_ganeti_export_found_on_any_node(bed: Bed) -> None:
    data = ganeti_export(bed, NODE2)
    # No source node: Ganeti's rule, the export is looked for on every node.
    status, result = run(bed, import_op("gimp", pnode=NODE1, src_path=GANETI_NAME, start=True))
    assert status == "success", result
    assert query(bed.cl, ["status"], "gimp")["gimp"]["status"] == "running"
    assert [p.read_bytes() for p in disk_files(bed, NODE1, "gimp")] == [data]
    fields = ["os", "tags", "nic.macs", "nic.links", "osparams", "disk.sizes"]
    assert query(bed.cl, fields, "gimp")["gimp"] == {
        "os": "envdump+default",
        "tags": ["from-ganeti"],
        "nic.macs": ["aa:00:00:4c:13:59"],  # the exported NIC's
        "nic.links": ["gnt-br0"],
        "osparams": {"greeting": "hello"},
        "disk.sizes": [8],
    }
    env = bed.env("import", "gimp", 0)
    assert env["OSP_PRIVATE_NOTE"] == "privvalue"
    assert bed.env("rename", "gimp")["OLD_INSTANCE_NAME"] == GANETI_NAME
    ok(bed.cl.gnt("instance", "remove", "-f", "gimp"))
    remove_exports(bed)


@pytest.mark.parametrize("identify", [False, True])
def test_identify_defaults(bed: Bed, identify: bool) -> None:
    ganeti_export(bed, NODE2)
    fields = {"src_path": GANETI_NAME, "pnode": NODE1, "identify_defaults": identify}
    status, result = run(bed, import_op("idimp", **fields))
    assert status == "success", result
    custom = ["custom_beparams", "custom_osparams", "custom_nicparams"]
    got = query(bed.cl, custom, "idimp")["idimp"]
    if identify:
        # Every exported value is the cluster's default but the OS parameter.
        assert got == {
            "custom_beparams": {},
            "custom_osparams": {"greeting": "hello"},
            "custom_nicparams": [{"link": "gnt-br0"}],
        }
    else:
        # As Ganeti: an import makes every exported value the instance's own.
        assert got["custom_beparams"] == {
            "always_failover": False,
            "auto_balance": True,
            "maxmem": 128,
            "minmem": 128,
            "spindle_use": 1,
            "vcpus": 1,
        }
        assert got["custom_nicparams"] == [{"link": "gnt-br0", "mode": "bridged", "vlan": ""}]
    ok(bed.cl.gnt("instance", "remove", "-f", "idimp"))
    remove_exports(bed)


BAD_IMPORTS = [
    # (export's config.ini or None for none, opcode changes, error text)
    (None, {"src_path": "nosuch"}, "No export found for relative path nosuch"),
    (None, {"src_node": NODE2, "src_path": "nosuch"}, "No export or invalid export found"),
    ("[export]\nversion = 0\n", {}, "section [instance] missing"),
    ("this is no ini file", {}, "Invalid export configuration: File contains no section"),
    (
        GANETI_EXPORT.read_text().replace("version = 0", "version = 3"),
        {},
        "Wrong export version 3 (wanted 0)",
    ),
    (None, {"disks": [{"size": 8}, {"size": 8}]}, "The export has 1 disk(s) but 2 were given"),
    (None, {"disks": [{"size": 4}]}, "smaller than the exported disk (8 MiB)"),
    (
        GANETI_EXPORT.read_text().replace("envdump+default", "nosuchos+default"),
        {},
        "OS 'nosuchos' not found on node",
    ),
    (None, {"disks": [{"size": 8, "adopt": "/dev/x"}]}, "Disk adoption not allowed"),
    (None, {"compress": "lzma"}, "Compression tool not allowed"),
    (
        None,
        {"src_node": NODE2, "src_path": f"/var/lib/ganeti/export/{GANETI_NAME}"},
        "Corral imports only from the export directory /srv/ganeti/export, not /var/lib",
    ),
    (None, {"src_path": f"/srv/ganeti/export/{GANETI_NAME}"}, "requires a source node option"),
]


@pytest.mark.parametrize(("config", "changes", "text"), BAD_IMPORTS)
def test_bad_imports_create_nothing(
    bed: Bed, config: str | None, changes: dict[str, Any], text: str
) -> None:
    ganeti_export(bed, NODE2, config)
    try:
        fields = {"pnode": NODE3, "src_path": GANETI_NAME, **changes}
        status, error = run(bed, import_op("badimp", **fields))
        assert status == "error"
        assert error[0] == "OpPrereqError" and text in error[1][0], error
        assert_nothing_created(bed, "badimp")
    finally:
        remove_exports(bed)


def test_export_missing_its_dump_fails_and_leaves_nothing(bed: Bed) -> None:
    ganeti_export(bed, NODE2)
    (bed.paths(NODE2).export_dir / GANETI_NAME / GANETI_DUMP).unlink()
    try:
        job_id = submit(bed, import_op("nodump", src_path=GANETI_NAME, pnode=NODE3))
        with bed.cl.client() as client:
            status, error = wait_final(client, [job_id], ("opresult",), timeout=120)[0]
        assert status == "error"
        assert f"No file {GANETI_DUMP} in the export {GANETI_NAME}" in json.dumps(error)
        assert_nothing_created(bed, "nodump")
    finally:
        remove_exports(bed)


def test_failing_rename_script_is_only_a_warning(bed: Bed) -> None:
    for node in bed.nodes.values():
        scripts = {**os_scripts(bed.dumps), "rename": "#!/bin/sh\nexit 3\n"}
        make_os(node.paths, "badrename", scripts=scripts)
    config = GANETI_EXPORT.read_text().replace("envdump+default", "badrename+default")
    config = config.replace("greeting = hello", "").replace("private_note = privvalue", "")
    data = ganeti_export(bed, NODE2, config)
    try:
        job_id = submit(bed, import_op("brimp", src_path=GANETI_NAME, pnode=NODE3))
        with bed.cl.client() as client:
            assert wait_final(client, [job_id], timeout=120)[0][0] == "success"
        warnings = [m for m in messages(bed, job_id) if "WARNING" in m]
        assert any("Failed to run rename script for brimp on node" in m for m in warnings)
        assert [p.read_bytes() for p in disk_files(bed, NODE3, "brimp")] == [data]
        ok(bed.cl.gnt("instance", "remove", "-f", "brimp"))
    finally:
        remove_exports(bed)


def _restart(node: Noded) -> None:
    start_daemon(noded_cmd(node.address, node.port), daemon_env(node.paths), timeout=30)


@pytest.mark.slow
def test_source_noded_killed_mid_import(bed: Bed) -> None:
    ganeti_export(bed, NODE2)
    source = bed.nodes[NODE2]
    source.run_sync(calls_impexp.test_impexp_gate(True))
    try:
        job_id = submit(bed, import_op("kimp", src_node=NODE2, pnode=NODE3, src_path=GANETI_NAME))
        wait_until(
            lambda: "disk/0 is now listening, starting export" in messages(bed, job_id),
            timeout=60,
            what="the import listening",
        )
        assert len(disk_files(bed, NODE3, "kimp")) == 1
        pid = source.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: source.pid is None, timeout=30, what="node2's noded gone")
    finally:
        try:
            with bed.cl.client() as client:
                status = wait_final(client, [job_id], timeout=120)[0][0]
        finally:
            _restart(source)
            source.run_sync(calls_impexp.test_impexp_gate(False))
    assert status == "error"
    assert_nothing_created(bed, "kimp")
    remove_exports(bed)


# Remote imports
def signed_cert(cds: bytes, *, days: int = 1, expired: bool = False) -> str:
    """A self-signed certificate signed with the domain secret ``cds``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    start = now - datetime.timedelta(days=3 if expired else 0, minutes=5)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "source.example.com")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(
            now - datetime.timedelta(days=1) if expired else now + datetime.timedelta(days=days)
        )
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    return rie.sign_x509_cert(pem, cds, rie.new_salt())


def remote_op(bed: Bed, name: str, **fields: Any) -> dict[str, Any]:
    cds = rie.read_domain_secret(bed.cl.paths)
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "remote-import",
        "disk_template": "file",
        "disks": [{"size": 4}, {"size": 2}],
        "nics": [{}],
        "os_type": "envdump+default",
        "pnode": NODE3,
        "name_check": False,
        "ip_check": False,
        "start": False,
        "source_handshake": rie.compute_handshake(cds),
        "source_x509_ca": signed_cert(cds),
        "source_instance_name": "far-away.example.com",
        "source_shutdown_timeout": 0,
        **fields,
    }


def _tampered(signed: str) -> str:
    header, _, pem = signed.partition("\n\n")
    lines = pem.splitlines()
    lines[3] = lines[3][:10] + ("A" if lines[3][10] != "A" else "B") + lines[3][11:]
    return header + "\n\n" + "\n".join(lines) + "\n"


OTHER_SECRET = b"not-this-clusters-secret"
BAD_REMOTE = [
    ({"source_handshake": None}, "Missing source handshake"),
    (
        {"source_handshake": rie.compute_handshake(OTHER_SECRET)},
        "Invalid handshake: Hash didn't match, clusters don't share the same domain secret",
    ),
    ({"source_handshake": [1, "x"]}, "Invalid handshake: Invalid data"),
    ({"source_x509_ca": None}, "Missing source X509 CA"),
    ({"source_x509_ca": signed_cert(OTHER_SECRET)}, "Unable to load source X509 CA"),
    ({"source_x509_ca": "tampered"}, "Unable to load source X509 CA"),
    ({"source_x509_ca": "expired"}, "Invalid source X509 CA (Certificate is expired"),
    ({"source_instance_name": None}, "Missing source instance name"),
    ({"hypervisor": "kvm"}, "Hypervisor 'kvm' is not enabled"),
]


@pytest.mark.parametrize(("changes", "text"), BAD_REMOTE)
def test_bad_remote_imports_create_nothing(bed: Bed, changes: dict[str, Any], text: str) -> None:
    op = remote_op(bed, "badremote", **changes)
    cds = rie.read_domain_secret(bed.cl.paths)
    if changes.get("source_x509_ca") == "tampered":
        op["source_x509_ca"] = _tampered(signed_cert(cds))
    elif changes.get("source_x509_ca") == "expired":
        op["source_x509_ca"] = signed_cert(cds, expired=True)
    status, error = run(bed, op)
    assert status == "error"
    assert error[0] == "OpPrereqError" and text in error[1][0], error
    assert_nothing_created(bed, "badremote")


def remote_import_entry(bed: Bed, job_id: int) -> dict[str, Any] | None:
    entries = [e[3] for e in job_log(bed, job_id) if e[2] == "remote-import"]
    assert len(entries) <= 1
    return entries[0] if entries else None


def test_remote_import_whose_source_never_connects(bed: Bed) -> None:
    job_id = submit(bed, remote_op(bed, "lonely"))
    wait_until(lambda: remote_import_entry(bed, job_id) is not None, timeout=60, what="entry")
    entry = remote_import_entry(bed, job_id)
    assert entry is not None and sorted(entry) == ["disks", "x509_ca"]
    cds = rie.read_domain_secret(bed.cl.paths)
    # What the source would use: each disk's signed address on node3, the
    # destination's certificate signed with the domain secret.
    node3 = bed.nodes[NODE3]
    for index, info in enumerate(entry["disks"]):
        host, port, magic = rie.check_disk_info(cds, index, info)
        assert host == node3.address and port > 0 and len(magic) == 40
    assert "BEGIN CERTIFICATE" in rie.load_signed_x509_cert(entry["x509_ca"], cds)
    with bed.cl.client() as client:
        status, result = wait_final(client, [job_id], ("opresult",), timeout=60)[0]
    assert status == "error"
    # Whichever sees it first: the node's import or the master following it.
    log = json.dumps(messages(bed, job_id))
    assert (
        f"No exporter connected within {CONNECT_TIMEOUT} s" in log
        or f"Not connected after {CONNECT_TIMEOUT} seconds" in log
    ), log
    assert "Could not import disk/0, disk/1 of instance lonely" in json.dumps(result)
    assert_nothing_created(bed, "lonely")


def test_remote_import_cancelled_while_waiting_for_its_source(bed: Bed) -> None:
    job_id = submit(bed, remote_op(bed, "cancelled"))
    wait_until(lambda: remote_import_entry(bed, job_id) is not None, timeout=60, what="entry")
    ok(bed.cl.gnt("job", "cancel", "--kill", "--yes-do-it", str(job_id)))
    with bed.cl.client() as client:
        assert wait_final(client, [job_id], timeout=60)[0][0] == "canceled"
    assert_nothing_created(bed, "cancelled")


def test_remote_import_from_a_prepared_export(bed: Bed) -> None:
    """A move inside one cluster, as move-instance drives two: prepare the
    source, create the destination, export to what it logged."""
    ok(
        add(
            bed.cl,
            "rsrc",
            "-t",
            "file",
            "--disk=0:size=4m",
            "--disk=1:size=2m",
            "-o",
            "envdump+default",
            "-n",
            NODE1,
            "--no-start",
        )
    )
    contents = fill(disk_files(bed, NODE1, "rsrc"))
    status, prepared = run(
        bed, {"OP_ID": "OP_BACKUP_PREPARE", "instance_name": "rsrc", "mode": "remote"}
    )
    assert status == "success", prepared
    op = remote_op(
        bed,
        "rdst",
        source_handshake=prepared["handshake"],
        source_x509_ca=prepared["x509_ca"],
        source_instance_name="rsrc",
        compress="zstd",
    )
    job_id = submit(bed, op)
    wait_until(lambda: remote_import_entry(bed, job_id) is not None, timeout=60, what="entry")
    entry = remote_import_entry(bed, job_id)
    assert entry is not None
    export = {
        "OP_ID": "OP_BACKUP_EXPORT",
        "instance_name": "rsrc",
        "mode": "remote",
        "target_node": entry["disks"],
        "x509_key_name": prepared["x509_key_name"],
        "destination_x509_ca": entry["x509_ca"],
        "compress": "zstd",
    }
    status, result = run(bed, export)
    assert status == "success", result
    with bed.cl.client() as client:
        assert wait_final(client, [job_id], timeout=60)[0][0] == "success"
    assert [p.read_bytes() for p in disk_files(bed, NODE3, "rdst")] == contents
    assert bed.env("rename", "rdst")["OLD_INSTANCE_NAME"] == "rsrc"
    assert "Disk 1 finished receiving data" in messages(bed, job_id)
    for name in ("rsrc", "rdst"):
        ok(bed.cl.gnt("instance", "remove", "-f", name))
    assert_nothing_created(bed, "rdst")


def test_a_mirrored_instance_exported_and_imported_writes_both_copies(bed: Bed) -> None:
    templates = "diskless,file,mirrored"
    ok(
        bed.cl.gnt(
            "cluster", "modify", f"--enabled-disk-templates={templates}",
            f"--ipolicy-disk-templates={templates}",
        )
    )  # fmt: skip
    ok(
        add(
            bed.cl, "msrc", "-t", "mirrored", "--disk=0:size=6m", "-o", "envdump+default",
            "-n", f"{NODE1}:{NODE2}", "--no-start",
        )
    )  # fmt: skip
    [on1], [on2] = disk_files(bed, NODE1, "msrc"), disk_files(bed, NODE2, "msrc")
    [data] = fill([on1])
    on2.write_bytes(data)  # both copies the same, as the quorum keeps them
    export = submit(
        bed, {"OP_ID": "OP_BACKUP_EXPORT", "instance_name": "msrc", "target_node": NODE3}
    )
    with bed.cl.client() as client:
        assert wait_final(client, [export], timeout=120)[0][0] == "success", messages(bed, export)
    op = import_op(
        "mimp", src_node=NODE3, src_path="msrc", disk_template="mirrored", pnode=NODE2, nics=[{}],
        snode=NODE3,
    )  # fmt: skip
    status, result = run(bed, op)
    assert status == "success", result
    # The import script's writes reached both copies (through the quorum).
    [primary], [secondary] = disk_files(bed, NODE2, "mimp"), disk_files(bed, NODE3, "mimp")
    assert primary.read_bytes() == data and secondary.read_bytes() == data
    for name in ("msrc", "mimp"):
        ok(bed.cl.gnt("instance", "remove", "-f", name))
