"""Ganeti 3.0.2's own gnt-cluster command, copyfile and rename against a
two-node Corral cluster: Corral's commands print the same bytes and leave
with the same exit code.

Ganeti's command and copyfile reach the nodes with ssh and scp; here they
find shims first on their PATH, outside Ganeti's code: ``ssh`` runs the
remote command with ``/bin/sh -c`` on this machine (what sshd does on a
node), ``scp`` succeeds without copying.  Corral's commands go to the nodes'
noded.  The commands compared print the same on every node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.compare import Output, difference
from tests.conformance.ganeti import SYSTEM_PYTHON, ganeti_tree, run_in_namespace
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.multinode import add_node

NODE2 = "node2.example.com"
OLD, NEW = "cluster.example.com", "cluster2.example.com"
# Ganeti's ssh: options, then user@host, then the words of the remote command.
SSH_SHIM = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    *@*) shift; break ;;
    *) shift ;;
  esac
done
exec /bin/sh -c "$*"
"""
SCP_SHIM = "#!/bin/sh\nexit 0\n"


@pytest.fixture(scope="module")
def cl(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    root = tmp_path_factory.mktemp("remote-conformance")
    with running_cluster(root / "node1") as cluster:
        node2 = add_node(cluster, root / "node2", NODE2)
        try:
            yield cluster
        finally:
            node2.stop()


@pytest.fixture(scope="module")
def shims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("shims")
    for name, text in (("ssh", SSH_SHIM), ("scp", SCP_SHIM)):
        (directory / name).write_text(text)
        (directory / name).chmod(0o755)
    return directory


def ganeti_cluster(cl: TestCluster, shims: Path, argv: list[str]) -> Result:
    command = [SYSTEM_PYTHON, str(ganeti_tree() / "gnt-cluster"), *argv]
    env = {"PATH": f"{shims}:/usr/sbin:/usr/bin:/sbin:/bin"}
    return run_in_namespace(cl.paths.root, command, env=env)


def assert_same(cl: TestCluster, shims: Path, argv: list[str]) -> Output:
    theirs = Output.of(ganeti_cluster(cl, shims, argv))
    ours = Output.of(cl.gnt("cluster", *argv))
    assert "Traceback" not in theirs.stderr, theirs.stderr
    assert ours == theirs, f"{argv}\n{difference(theirs, ours)}"
    return ours


@pytest.mark.parametrize(
    "argv",
    [
        ["command", "echo out; echo err >&2; exit 3"],
        ["command", "-M", "printf 'a\\nb\\n'; exit 1"],
        ["command", "--failure-only", "true"],
        ["command", "--failure-only", "-M", "echo no; false"],
        ["command", "-n", NODE2, "echo", "one", "two"],
        ["command", "-g", "default", "-n", NODE2, "-n", "node1.example.com", "echo g"],
        ["command", "-g", "no-such-group", "true"],
        ["command", "-n", "nosuch.example.com", "true"],
        ["command"],
        ["copyfile"],
        ["copyfile", "a", "b"],
        ["copyfile", "/nonexistent/file"],
        ["copyfile", "-n", NODE2, "/nonexistent/file"],
        ["rename"],
        ["rename", "-f", OLD],
        ["rename", "-f", "Bad!Name"],
        ["rename", "-f", "--dry-run", NEW],
        ["rename", NEW],
    ],
    ids=" ".join,
)
def test_same_output(cl: TestCluster, shims: Path, argv: list[str]) -> None:
    assert_same(cl, shims, argv)


def test_copyfile_of_a_file(cl: TestCluster, shims: Path) -> None:
    source = cl.paths.root / "copied"
    source.write_text("x\n")
    assert assert_same(cl, shims, ["copyfile", str(source)]) == Output(0, "", "")


def test_rename_and_back(cl: TestCluster, shims: Path) -> None:
    theirs = ganeti_cluster(cl, shims, ["rename", "-f", NEW])
    assert (theirs.rc, theirs.stderr) == (0, "")
    ours = cl.gnt("cluster", "rename", "-f", OLD)
    swapped = ours.stdout.replace(OLD, "<old>").replace(NEW, OLD).replace("<old>", NEW)
    assert (ours.rc, swapped, ours.stderr) == (0, theirs.stdout, "")
    assert theirs.stdout == f"Cluster renamed from '{OLD}' to '{NEW}'\n"
