"""gnt-cluster command and copyfile on a three-node cluster of real daemons:
each node's noded does the work under the cluster's mutual TLS, only for the
cluster's client certificate, and logs it; the output is Ganeti's (compared
with Ganeti's own gnt-cluster in tests/conformance/test_cluster_remote.py).

The nodes share this machine, each under its own root: a command sees its
node's root in CORRAL_ROOT, and a file below the master's root lands below
each node's (as Ganeti's virtual clusters exchange their roots)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.cli import noded_client
from corral.paths import Paths
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded, start_noded
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

NODE1, NODE2, NODE3 = (f"node{k}.example.com" for k in (1, 2, 3))
SEPARATOR = "-" * 48


class Bed:
    """The cluster and its two other nodes."""

    def __init__(self, cl: TestCluster, nodes: list[Noded]) -> None:
        self.cl = cl
        self.nodes = nodes

    def root(self, name: str) -> Path:
        if name == NODE1:
            return self.cl.paths.root
        return next(n for n in self.nodes if n.name == name).paths.root

    def noded(self, name: str) -> Noded:
        return next(n for n in self.nodes if n.name == name)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    root = tmp_path_factory.mktemp("remote")
    with running_cluster(root / "node1") as cl:
        nodes: list[Noded] = []
        try:
            for name in (NODE2, NODE3):
                nodes.append(add_node(cl, root / name.split(".")[0], name))
            yield Bed(cl, nodes)
        finally:
            for node in nodes:
                node.stop()


def gnt_cluster(bed: Bed, *args: str) -> Result:
    return bed.cl.gnt("cluster", *args)


def section(name: str, output: str, code: int) -> str:
    """One node's part of gnt-cluster command's output, as Ganeti prints it."""
    return f"{SEPARATOR}\nnode: {name}\n{output}\nreturn code = {code}\n"


def test_command_runs_on_every_node_the_master_last(bed: Bed) -> None:
    result = gnt_cluster(bed, "command", 'echo "$CORRAL_ROOT";', "echo err >&2;", "exit 3")
    assert (result.rc, result.stderr) == (0, "")
    assert result.stdout == "".join(
        section(name, f"{bed.root(name)}\nerr\n", 3) for name in (NODE2, NODE3, NODE1)
    )


def test_command_machine_names_and_failures_only(bed: Bed) -> None:
    # Fails (two lines of output, code 1) everywhere but on node 2.
    text = f'test "$CORRAL_ROOT" = {bed.root(NODE2)} || {{ echo one; echo two; exit 1; }}'
    result = gnt_cluster(bed, "command", "-M", "--failure-only", text)
    assert result.rc == 0
    assert result.stdout == "".join(
        f"{SEPARATOR}\n{name}: one\n{name}: two\nreturn code = 1\n" for name in (NODE3, NODE1)
    )


def test_command_on_chosen_nodes_and_groups(bed: Bed) -> None:
    result = gnt_cluster(bed, "command", "-n", NODE1, "-n", NODE3, "echo", "hi")
    assert result.stdout == section(NODE3, "hi\n", 0) + section(NODE1, "hi\n", 0)
    result = gnt_cluster(bed, "command", "-g", "default", "-n", NODE2, "true")
    assert result.stdout == section(NODE2, "", 0)
    result = gnt_cluster(bed, "command", "-g", "no-such-group", "true")
    assert (result.rc, result.stdout) == (0, "")


def test_command_refuses_an_unknown_node(bed: Bed) -> None:
    result = gnt_cluster(bed, "command", "-n", "nosuch.example.com", "true")
    assert result.rc == 1 and result.stdout == ""
    assert "Node name nosuch.example.com not found" in result.stderr


def test_command_output_reaches_the_terminal_byte_for_byte(bed: Bed) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "corral.cli.gnt_cluster",
            "command",
            "-n",
            NODE2,
            r"printf 'caf\351'",
        ],
        env=bed.cl.env,
        capture_output=True,
        check=False,
    )
    head = f"{SEPARATOR}\nnode: {NODE2}\n".encode()
    assert proc.stdout == head + b"caf\xe9\nreturn code = 0\n"


def test_offline_nodes_are_skipped_with_a_note(bed: Bed) -> None:
    assert bed.cl.gnt("node", "modify", "--offline", "yes", NODE3).rc == 0
    try:
        result = gnt_cluster(bed, "command", "echo", "hi")
        assert result.stderr == f"Note: skipping offline node(s): {NODE3}\n"
        assert result.stdout == section(NODE2, "hi\n", 0) + section(NODE1, "hi\n", 0)
        source = bed.cl.paths.root / "offline-copy"
        source.write_text("x")
        result = gnt_cluster(bed, "copyfile", str(source))
        assert result.stderr == f"Note: skipping offline node(s): {NODE3}\n"
        assert not (bed.root(NODE3) / "offline-copy").exists()
    finally:
        back = bed.cl.gnt("node", "modify", "--force", "--offline", "no", NODE3)
        assert back.rc == 0, back.stderr


def test_copyfile_copies_content_mode_and_times_to_the_other_nodes(bed: Bed) -> None:
    source = bed.cl.paths.root / "etc" / "corral-copied"
    source.parent.mkdir(exist_ok=True)
    source.write_bytes(b"payload\x00\xff")
    source.chmod(0o4750)
    os.utime(source, (1_000_000, 1_600_000_000))
    for name in (NODE2, NODE3):
        (bed.root(name) / "etc").mkdir(exist_ok=True)
    result = gnt_cluster(bed, "copyfile", str(source))
    assert (result.rc, result.stdout, result.stderr) == (0, "", "")
    for name in (NODE2, NODE3):
        copy = bed.root(name) / "etc" / "corral-copied"
        st = copy.stat()
        assert copy.read_bytes() == b"payload\x00\xff"
        assert st.st_mode & 0o7777 == 0o4750
        assert (int(st.st_atime), int(st.st_mtime)) == (1_000_000, 1_600_000_000)


def test_copyfile_to_chosen_nodes_and_over_the_replication_network(bed: Bed) -> None:
    source = bed.cl.paths.root / "chosen"
    source.write_text("one\n")
    result = gnt_cluster(bed, "copyfile", "-n", NODE3, "-n", NODE1, str(source))
    assert (result.rc, result.stderr) == (0, "")
    assert (bed.root(NODE3) / "chosen").read_text() == "one\n"
    assert not (bed.root(NODE2) / "chosen").exists()
    source.write_text("two\n")
    result = gnt_cluster(bed, "copyfile", "--use-replication-network", str(source))
    assert (result.rc, result.stderr) == (0, "")
    assert all((bed.root(n) / "chosen").read_text() == "two\n" for n in (NODE2, NODE3))


def test_copyfile_refuses_what_is_not_a_file(bed: Bed, tmp_path: Path) -> None:
    missing = gnt_cluster(bed, "copyfile", str(tmp_path / "missing"))
    assert missing.rc == 1
    assert missing.stderr == (
        "Failure: prerequisites not met for this operation:\n"
        f"error type: wrong_input, error details:\nNo such filename '{tmp_path}/missing'\n"
    )
    directory = gnt_cluster(bed, "copyfile", str(tmp_path))
    assert directory.rc == 1
    assert f"'{tmp_path}' is not a regular file" in directory.stderr


def test_copyfile_reports_what_a_node_refuses(bed: Bed) -> None:
    source = bed.cl.paths.root / "nodir" / "file"
    source.parent.mkdir()
    source.write_text("x")
    port = bed.cl.port
    result = gnt_cluster(bed, "copyfile", "-n", NODE2, str(source))
    assert result.rc == 0  # as Ganeti's: a failed copy is reported, not an error
    assert result.stderr == (
        f"Copy of file {source} to node {NODE2}:{port} failed:"
        f" Directory {bed.root(NODE2)}/nodir does not exist\n"
    )


def test_gnt_commands_stay_light(bed: Bed) -> None:
    """A whole command run loads neither aiohttp nor cryptography nor pydantic."""
    code = (
        "import sys, corral.cli.gnt_cluster as tool; rc = tool.main(['command', 'true']);"
        " print(rc, sorted(m for m in ('aiohttp', 'cryptography', 'pydantic')"
        " if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=bed.cl.env, capture_output=True, text=True, check=True
    )
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stdout + proc.stderr


def test_each_use_is_logged_on_the_node(bed: Bed) -> None:
    result = gnt_cluster(bed, "command", "-n", NODE2, "echo logged-marker-7")
    assert result.rc == 0
    log = Paths(bed.root(NODE2)).daemon_log("corral-noded")
    wait_until(
        lambda: "Running for the master: echo logged-marker-7" in log.read_text(),
        10,
        "the command in node 2's log",
    )
    assert "run_command called by corral-masterd at " in log.read_text()


def test_a_node_certificate_does_not_give_root_on_other_nodes(bed: Bed) -> None:
    """Node 2's own certificate (every node holds one, signed by the cluster
    CA) is refused: only the master's client certificate may run commands."""
    node2, node3 = bed.noded(NODE2), bed.noded(NODE3)
    ctx = noded_client.tls_context(str(node2.paths.root))
    ctx.load_cert_chain(node2.paths.server_pem)
    marker = node3.paths.root / "must-not-exist"
    with pytest.raises(noded_client.NodeCallError, match="only for the cluster's client"):
        noded_client.call(ctx, node3.address, node3.port, "run_command", [f"touch {marker}"], 30)
    with pytest.raises(noded_client.NodeCallError, match="only for the cluster's client"):
        noded_client.call(
            ctx, node3.address, node3.port, "copy_file", ["/x", True, "", 0, 0, 0], 30
        )
    # The node's certificate still serves what nodes do for each other.
    assert noded_client.call(ctx, node3.address, node3.port, "version", [], 30)
    assert not marker.exists() and not (node3.paths.root / "x").exists()
    log = node3.paths.daemon_log("corral-noded")
    wait_until(
        lambda: f"Refused run_command from {NODE2} at " in log.read_text(),
        10,
        "the refusal in node 3's log",
    )


def test_an_unreachable_node_gets_its_error_line_the_others_are_done(bed: Bed) -> None:
    node3 = bed.noded(NODE3)
    source = bed.cl.paths.root / "while-down"
    source.write_text("copied\n")
    node3.stop()
    try:
        result = gnt_cluster(bed, "command", "echo", "up")
        where = f"{node3.address}:{node3.port}"
        assert result.stdout == (
            section(NODE2, "up\n", 0)
            + section(NODE3, f"Cannot connect to {where}: Connection refused\n", 255)
            + section(NODE1, "up\n", 0)
        )
        result = gnt_cluster(bed, "copyfile", str(source))
        assert result.rc == 0
        assert result.stderr == (
            f"Copy of file {source} to node {NODE3}:{node3.port} failed:"
            f" Cannot connect to {where}: Connection refused\n"
        )
        assert (bed.root(NODE2) / "while-down").read_text() == "copied\n"
    finally:
        start_noded(node3.paths, node3.address, node3.port)
