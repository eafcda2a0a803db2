"""gnt-backup end to end on a fake-hypervisor cluster: export (the OS export
script's stream), list, import as a new instance with the same disk data,
remove; and the export's progress as bars when attached to a terminal, as
plain job log lines otherwise."""

from __future__ import annotations

import os
import pty
import select
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.rapi.client import RapiClient
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.osdef import make_os
from tests.helpers.two_clusters import DUMPER_SCRIPTS, OS_NAME, add_instance, disk_file

pytestmark = pytest.mark.slow

NODE = "node1.example.com"
MIB = 1024 * 1024
# An export script slow enough (~2.5 s for 4 MiB) for the job to report progress.
SLOW_EXPORT = (
    "#!/bin/sh\nset -e\n"
    "for i in 0 1 2 3 4 5 6 7 8 9; do\n"
    '  dd if="$EXPORT_DEVICE" bs=400K skip=$i count=1 status=none\n'
    "  sleep 0.25\n"
    "done\n"
)


@pytest.fixture
def bcluster(tmp_path: Path) -> Iterator[TestCluster]:
    with running_cluster(tmp_path) as cl:
        make_os(cl.paths, OS_NAME, scripts=DUMPER_SCRIPTS)
        yield cl


def test_export_list_import_remove(bcluster: TestCluster) -> None:
    cl = bcluster
    data = os.urandom(3 * MIB + 7)
    add_instance(cl, "web1.example.com", data)
    result = cl.gnt("backup", "export", "-n", NODE, "web1.example.com")
    assert result.rc == 0, result.stderr
    assert "disk/0 finished sending data" in result.stdout
    result = cl.gnt("backup", "list", "--no-headers", "--separator=|")
    assert result.stdout == f"{NODE}|web1.example.com\n"
    assert cl.gnt("backup", "list", "-n", "node9.example.com", "--no-headers").stdout == ""

    src_dir = cl.paths.root / "srv" / "ganeti" / "export" / "web1.example.com"
    result = cl.gnt(
        "backup", "import", "-n", NODE, "-t", "file", "--src-node", NODE,
        f"--src-dir={src_dir}", "--net", "0:mac=generate", "--no-name-check",
        "--no-ip-check", "web2.example.com",
    )  # fmt: skip
    assert result.rc == 0, result.stderr
    assert disk_file(cl, "web2.example.com").read_bytes()[: len(data)] == data
    info = cl.gnt("instance", "list", "--no-headers", "-o", "os,status", "web2.example.com")
    assert info.stdout.split() == [f"{OS_NAME}+default", "ADMIN_down"]

    result = cl.gnt("backup", "remove", "web1.example.com")
    assert result.rc == 0, result.stderr
    assert cl.gnt("backup", "list", "--no-headers").stdout == ""
    assert not src_dir.exists()


def test_export_and_import_through_rapi(bcluster: TestCluster) -> None:
    """PUT /2/instances/[i]/export (``destination``: the node) and POST
    /2/instances in import mode (``src_node``, ``src_path``), as Ganeti's rlib2."""
    cl = bcluster
    data = os.urandom(MIB + 99)
    add_instance(cl, "web1.example.com", data)
    cl.add_rapi_user("admin", "adm1n", "write")
    with RapiClient(cl.node_ip, username="admin", password="adm1n", ca_file=str(cl.rapi_ca)) as c:
        job = c.export_instance("web1.example.com", "local", NODE, shutdown=True)
        status = c.wait_for_job(job, timeout=120)
        assert status["status"] == "success", status
        finished, disks = status["opresult"][0]
        assert finished is True and disks == [True]
        src_path = str(cl.paths.root / "srv" / "ganeti" / "export" / "web1.example.com")
        job = c.create_instance(
            "import", "web2.example.com", "file", [], [{"mac": "generate"}],
            pnode=NODE, src_node=NODE, src_path=src_path, name_check=False, ip_check=False,
        )  # fmt: skip
        status = c.wait_for_job(job, timeout=120)
        assert status["status"] == "success", status
    assert disk_file(cl, "web2.example.com").read_bytes()[: len(data)] == data


def on_terminal(cl: TestCluster, argv: list[str]) -> tuple[int, str]:
    """Run ``gnt-backup argv`` with a pty as its standard output; rc and output."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(sys.executable, [sys.executable, "-m", "corral.cli.gnt_backup", *argv],
                   {**cl.env, "COLUMNS": "150"})  # fmt: skip
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        assert ready, "gnt-backup went quiet"
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode().replace("\r\n", "\n")


def test_progress_bar_on_a_terminal(bcluster: TestCluster) -> None:
    cl = bcluster
    make_os(cl.paths, OS_NAME, scripts={**DUMPER_SCRIPTS, "export": SLOW_EXPORT})
    add_instance(cl, "web1.example.com", os.urandom(4 * MIB))
    rc, output = on_terminal(cl, ["export", "-n", NODE, "web1.example.com"])
    assert rc == 0, output
    # Bars, redrawn in place (cursor up + clear); no raw progress lines.
    assert "\x1b[1F\x1b[J" in output
    assert "disk/0 [" in output and "% " in output and " MiB/s" in output
    assert " disk/0 sent " not in output
    assert "disk/0 finished sending data" in output

    # Without a terminal: Ganeti's lines, one per report.
    result = cl.gnt("backup", "export", "-n", NODE, "web1.example.com")
    assert result.rc == 0, result.stderr
    assert " disk/0 sent " in result.stdout and "\x1b" not in result.stdout
