"""OP_BACKUP_EXPORT (mode local) and OP_BACKUP_REMOVE on real nodes: file
disks streamed through the OS export script (or read raw) into the target
node's export directory, byte for byte, with Ganeti's config.ini; refusals
that change nothing; a failing export script and a cancelled job leave no
half export and the previous one intact."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.exports import config_ini
from corral.process.daemons import start_daemon
from tests.helpers.backup import (
    NODE1,
    NODE2,
    Bed,
    export_op,
    fill_disks,
    job_log,
    node_call,
    run_job,
    submit,
)
from tests.helpers.instances import add, ok
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import daemon_env, noded_cmd
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

# The export script dumps its disk; "broken" fails on disk 1 after some data.
DUMP = '#!/bin/bash\nstat -c %s "$EXPORT_DEVICE" >&"$EXP_SIZE_FD"\nexec cat "$EXPORT_DEVICE"\n'
BROKEN = (
    '#!/bin/sh\nif [ "$EXPORT_INDEX" = 1 ]; then\n'
    '  head -c 65536 "$EXPORT_DEVICE"; echo "disk 1 is unreadable" >&2; exit 3\nfi\n'
    'exec cat "$EXPORT_DEVICE"\n'
)


ABORTED = re.compile(r"Aborting (import|export) '([^']+)' on ")


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with cluster_with_nodes(tmp_path_factory.mktemp("export"), (NODE2,)) as (cl, extra):
        make_os(cl.paths, "dumper", variants=None, scripts={"export": DUMP})
        make_os(cl.paths, "broken", variants=None, scripts={"export": BROKEN})
        yield Bed(cl, extra)


def new_instance(bed: Bed, name: str, os_name: str, *sizes: str, start: bool = False) -> None:
    disks = [f"--disk={i}:size={size}" for i, size in enumerate(sizes)]
    extra = [] if start else ["--no-start"]
    ok(add(bed.cl, name, "-t", "file", *disks, "-o", os_name, "--no-install", "-n", NODE1, *extra))


def export_dir(bed: Bed, node: str, name: str) -> Path:
    return bed.paths(node).export_dir / name


def check_export(bed: Bed, node: str, name: str, contents: list[bytes]) -> None:
    """The export of ``name`` on ``node``: config.ini and dumps equal to ``contents``."""
    directory = export_dir(bed, node, name)
    info = config_ini.parse((directory / "config.ini").read_text())
    assert info.name == name
    dumps = [directory / str(disk.dump) for disk in info.disks]
    assert [p.read_bytes() for p in dumps] == contents
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        ["config.ini", *(p.name for p in dumps)]
    )
    assert not directory.with_name(f"{name}.new").exists()


def test_local_export_to_another_node(bed: Bed) -> None:
    new_instance(bed, "ex1", "dumper", "5m", "3m")
    contents = fill_disks(bed, "ex1")
    job_id, result = run_job(bed, export_op("ex1", NODE2))
    assert result == [True, [True, True]]
    check_export(bed, NODE2, "ex1", contents)
    lines = job_log(bed, job_id)
    for line in (
        f"Exporting disk/0 from {NODE1} to {NODE2}",
        "disk/0 is now listening, starting export",
        "disk/0 finished sending data",
        "disk/1 finished receiving data",
        f"Finalizing export on {NODE2}",
    ):
        assert line in lines, (line, "\n".join(lines))
    # Again to the master: the export on node2 is removed as older.
    job_id, result = run_job(bed, export_op("ex1", NODE1))
    assert result == [True, [True, True]]
    check_export(bed, NODE1, "ex1", contents)
    assert not export_dir(bed, NODE2, "ex1").exists()
    assert "Removing old exports for instance ex1" in job_log(bed, job_id)


def test_compressed_streams_stored_plain(bed: Bed) -> None:
    new_instance(bed, "ex2", "dumper", "4m")
    contents = fill_disks(bed, "ex2")
    for compress in ("none", "gzip-fast", "zstd"):
        _, result = run_job(bed, export_op("ex2", NODE2, compress=compress))
        assert result == [True, [True]]
        check_export(bed, NODE2, "ex2", contents)


def test_export_script_failing_on_second_disk(bed: Bed) -> None:
    new_instance(bed, "ex3", "dumper", "2m", "2m")
    contents = fill_disks(bed, "ex3")
    run_job(bed, export_op("ex3", NODE2))
    ok(bed.cl.gnt("instance", "modify", "--os-type", "broken", "ex3"))
    job_id, error = run_job(bed, export_op("ex3", NODE2), status="error")
    assert "Export failed, errors in export finalization, disk export: disk(s) 1" in json.dumps(
        error
    )
    lines = job_log(bed, job_id)
    assert any(x.startswith("disk/1 failed to send data") and "unreadable" in x for x in lines)
    check_export(bed, NODE2, "ex3", contents)  # the previous one, intact; no .new


def test_running_instance_needs_long_sleep(bed: Bed) -> None:
    new_instance(bed, "ex4", "dumper", "2m", start=True)
    contents = fill_disks(bed, "ex4")
    _, error = run_job(bed, export_op("ex4", NODE2), status="error")
    assert "--long-sleep option; aborting" in json.dumps(error)
    assert bed.hv_state(NODE1, "ex4") == "running"
    _, error = run_job(bed, export_op("ex4", NODE2, shutdown=False), status="error")
    assert "requested a live export" in json.dumps(error)
    job_id, result = run_job(bed, export_op("ex4", NODE2, long_sleep=True))
    assert result == [True, [True]]
    check_export(bed, NODE2, "ex4", contents)
    lines = job_log(bed, job_id)
    assert "Shutting down instance ex4" in lines and "Starting instance ex4" in lines
    assert bed.hv_state(NODE1, "ex4") == "running"


def test_remove_instance_after_export(bed: Bed) -> None:
    new_instance(bed, "ex5", "dumper", "2m", start=True)
    contents = fill_disks(bed, "ex5")
    _, error = run_job(
        bed, export_op("ex5", NODE2, shutdown=False, remove_instance=True), status="error"
    )
    assert "Can not remove instance without shutting it down before" in json.dumps(error)
    disks = bed.disk_files(NODE1, "ex5")
    _, result = run_job(bed, export_op("ex5", NODE2, remove_instance=True))
    assert result == [True, [True]]
    check_export(bed, NODE2, "ex5", contents)
    assert bed.cl.gnt("instance", "list", "ex5").rc != 0
    assert not any(p.exists() for p in disks)
    assert bed.hv_state(NODE1, "ex5") is None


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"compress": "lzop"}, "Compression tool not allowed, tools allowed are [gzip"),
        ({"target_node": "nosuch.example.com"}, "Node 'nosuch.example.com' not known"),
        ({"zero_free_space": True}, "'zero_free_space' of OP_BACKUP_EXPORT is not supported"),
        ({"mode": "remote"}, "Missing X509 key name for encryption"),
        ({"long_sleep": True, "shutdown": False}, "The long sleep option only makes sense"),
    ],
)
def test_refusals_change_nothing(bed: Bed, fields: dict[str, Any], text: str) -> None:
    name = "exr"
    if bed.cl.gnt("instance", "list", name).rc != 0:
        new_instance(bed, name, "dumper", "1m")
    before = sorted(bed.paths(NODE2).export_dir.glob("*"))
    op = {**export_op(name, NODE2), **fields}
    try:
        _, error = run_job(bed, op, status="error")
    except errors.OpPrereqError as err:  # refused at submission
        error = str(err)
    assert text in json.dumps(error)
    assert sorted(bed.paths(NODE2).export_dir.glob("*")) == before


def test_cancelled_mid_export_cleans_both_ends(bed: Bed) -> None:
    new_instance(bed, "ex6", "dumper", "32m", start=True)
    fill_disks(bed, "ex6")
    source = bed.nodes[NODE1]
    node_call(source, "test_impexp_gate", True)
    try:
        job_id = submit(bed, export_op("ex6", NODE2, long_sleep=True))
        wait_until(
            lambda: any(x.endswith(f"is sending data on {NODE1}") for x in job_log(bed, job_id)),
            timeout=60,
            what="the export sending",
        )
        assert export_dir(bed, NODE2, "ex6.new").exists()
        with bed.cl.client() as client:
            client.call("CancelJob", job_id, True)
            (status,) = wait_final(client, [job_id], timeout=60)[0]
        assert status in ("canceled", "error")
    finally:
        node_call(source, "test_impexp_gate", False)
    assert not export_dir(bed, NODE2, "ex6.new").exists()
    assert not export_dir(bed, NODE2, "ex6").exists()
    # Both ends were aborted, then forgotten by their nodes.
    aborted = {}
    for line in job_log(bed, job_id):
        found = ABORTED.search(line)
        if found:
            aborted[found.group(2)] = found.group(1)
    assert set(aborted.values()) == {"import", "export"}, aborted
    for name, mode in aborted.items():
        node = bed.nodes[NODE2 if mode == "import" else NODE1]
        assert node_call(node, "impexp_status", [name]) == [None]
    assert bed.hv_state(NODE1, "ex6") == "running"


def test_backup_remove(bed: Bed) -> None:
    new_instance(bed, "ex7", "dumper", "1m")
    run_job(bed, export_op("ex7", NODE2))
    assert export_dir(bed, NODE2, "ex7").exists()
    job_id, result = run_job(bed, {"OP_ID": "OP_BACKUP_REMOVE", "instance_name": "ex7"})
    assert result is None and not export_dir(bed, NODE2, "ex7").exists()
    job_id, _ = run_job(bed, {"OP_ID": "OP_BACKUP_REMOVE", "instance_name": "gone.example.com"})
    assert any(x.startswith("Export not found.") for x in job_log(bed, job_id))


def test_hooks_environment(bed: Bed, tmp_path: Path) -> None:
    out = tmp_path / "env"
    scripts = []
    for node in (NODE1, NODE2):
        for phase in ("pre", "post"):
            directory = bed.paths(node).hooks_dir / f"instance-export-{phase}.d"
            directory.mkdir(parents=True, exist_ok=True)
            script = directory / "50dump"
            script.write_text(f"#!/bin/sh\nenv > {out}.{node}.$GANETI_HOOKS_PHASE\n")
            script.chmod(0o755)
            scripts.append(script)
    new_instance(bed, "exh", "dumper", "1m")
    try:
        run_job(bed, export_op("exh", NODE2, shutdown_timeout=7))
    finally:
        for script in scripts:
            script.unlink()
    for node in (NODE1, NODE2):
        for phase in ("pre", "post"):
            text = Path(f"{out}.{node}.{phase}").read_text()
            env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            expected = {
                "GANETI_HOOKS_PATH": "instance-export",
                "GANETI_OBJECT_TYPE": "INSTANCE",
                "GANETI_EXPORT_MODE": "local",
                "GANETI_EXPORT_NODE": NODE2,
                "GANETI_EXPORT_DO_SHUTDOWN": "True",
                "GANETI_SHUTDOWN_TIMEOUT": "7",
                "GANETI_REMOVE_INSTANCE": "False",
                "GANETI_INSTANCE_NAME": "exh",
                "GANETI_INSTANCE_PRIMARY": NODE1,
            }
            assert {k: env.get(k) for k in expected} == expected, (node, phase)


@pytest.mark.slow
def test_target_killed_mid_export(bed: Bed) -> None:
    """node2's noded killed while it receives: the job fails within Ganeti's
    error timeout, the instance runs again; node2, back, drops the partial
    export and keeps the previous one."""
    new_instance(bed, "ex8", "dumper", "32m", start=True)
    contents = fill_disks(bed, "ex8")
    run_job(bed, export_op("ex8", NODE2, long_sleep=True))
    source, target = bed.nodes[NODE1], bed.nodes[NODE2]
    node_call(source, "test_impexp_gate", True)
    try:
        job_id = submit(bed, export_op("ex8", NODE2, long_sleep=True))
        wait_until(
            lambda: any(x.startswith("disk/0 sent") for x in job_log(bed, job_id)),
            timeout=60,
            what="the export sending",
        )
        pid = target.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: target.pid is None, timeout=30, what="node2's noded gone")
    finally:
        node_call(source, "test_impexp_gate", False)
    try:
        with bed.cl.client() as client:
            status, error = wait_final(client, [job_id], ("opresult",), timeout=120)[0]
        assert status == "error"
        assert "Export failed, errors in export finalization, disk export: disk(s) 0" in json.dumps(
            error
        )
        assert bed.hv_state(NODE1, "ex8") == "running"
        assert export_dir(bed, NODE2, "ex8.new").exists()  # node2 was not there to remove it
    finally:
        start_daemon(noded_cmd(target.address, target.port), daemon_env(target.paths), timeout=30)
    wait_until(
        lambda: not export_dir(bed, NODE2, "ex8.new").exists(),
        timeout=30,
        what="the partial export gone",
    )
    check_export(bed, NODE2, "ex8", contents)


@pytest.mark.slow
def test_source_killed_mid_export(bed: Bed) -> None:
    """node1's noded (the source) killed while it sends: the job fails and
    the target keeps no partial export."""
    new_instance(bed, "ex9", "dumper", "32m")
    fill_disks(bed, "ex9")
    source = bed.nodes[NODE1]
    node_call(source, "test_impexp_gate", True)
    try:
        job_id = submit(bed, export_op("ex9", NODE2))
        wait_until(
            lambda: any(x.startswith("disk/0 sent") for x in job_log(bed, job_id)),
            timeout=60,
            what="the export sending",
        )
        pid = source.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: source.pid is None, timeout=30, what="node1's noded gone")
        with bed.cl.client() as client:
            status, error = wait_final(client, [job_id], ("opresult",), timeout=120)[0]
        assert status == "error" and "disk export: disk(s) 0" in json.dumps(error)
        assert not export_dir(bed, NODE2, "ex9.new").exists()
        assert not export_dir(bed, NODE2, "ex9").exists()
    finally:
        start_daemon(noded_cmd(source.address, source.port), daemon_env(source.paths), timeout=30)
        node_call(source, "test_impexp_gate", False)
