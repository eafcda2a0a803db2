"""A throw-away two-node Corral cluster for Ganeti's QA suite, and the run.

Everything happens in a private network and mount namespace (``unshare -n
-m``; this module re-executes itself there), so that the cluster's names can
be given in a private ``/etc/hosts`` (nodes on 127.0.0.1 and .2, instances on
198.51.100.0/24, which is unreachable there: their IP check finds nothing,
and nothing leaves) and the nodes can be machines of their own:

1. ``lo`` up; throw-away overlays where mount points must be made; the
   work directory bound at ``/srv/corral-qa`` (outside ``/tmp``);
2. one mount and UTS namespace per node (:func:`machines`): its host name,
   Ganeti's directories and ``/tmp`` from its root (:mod:`tests.qa.ssh_shim`);
   its daemons run there and the ssh shim enters it;
3. a two-node cluster (:mod:`corral.testbed`: ``gnt-cluster init``, a joined
   node) with the fake hypervisor and the file, sharedfile and diskless disk
   templates, an OS definition on both nodes and a RAPI user: what an
   operator sets up before running the QA on an existing cluster;
4. Ganeti's burnin, its confd queries included, without the step that
   detaches disks (:func:`tests.qa.harness.run_burnin`), then the suite
   (:func:`tests.qa.harness.run_suite`).

``python -m tests.qa.throwaway --work DIR [--tests fast|full]`` prints one
line per test and ``N/M``; ``DIR/results.json`` has the results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from corral import testbed
from corral.paths import Paths
from tests.conformance.ganeti import ganeti_tree
from tests.qa import config as qa_config
from tests.qa.harness import Nodes, Run, run_burnin, run_suite, write_machine
from tests.qa.source import qa_tree
from tests.qa.ssh_shim import NODE_DIRS, SHARE, machine_script

INSIDE_ENV = "CORRAL_QA_NAMESPACE"
MOUNT = Path("/srv/corral-qa")
NODES = 2
SHARED_DIR = "srv/ganeti/shared-file-storage"
# An OS definition as the QA needs one: installs nothing, exports and imports
# the disk's bytes (the export/import tests compare nothing inside).
OS_SCRIPTS = {
    "create": "#!/bin/sh\nexit 0\n",
    "export": '#!/bin/sh\nset -e\nexec dd if="$EXPORT_DEVICE" bs=1M status=none\n',
    "import": '#!/bin/sh\nset -e\nexec dd of="$IMPORT_DEVICE" bs=1M status=none\n',
    "rename": "#!/bin/sh\nexit 0\n",
    "verify": "#!/bin/sh\nexit 0\n",
}


@dataclass(frozen=True)
class Machines:
    """Node K on 127.0.0.K (the namespace has a loopback network of its own),
    its commands run in its machine (the process ``pids[K - 1]``'s namespaces)."""

    pids: tuple[int, ...]

    def address(self, node: int) -> str:
        return f"127.0.0.{node}"

    def wrap(self, node: int, argv: list[str]) -> list[str]:
        return ["nsenter", "-t", str(self.pids[node - 1]), "-m", "-u", "--", *argv]


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True)


def prepare_namespace(work: Path) -> Path:
    """Loopback up, ``/etc/hosts``, mount points; ``work`` as the nodes see it
    (``MOUNT``)."""
    _sh("ip", "link", "set", "lo", "up")
    targets = [target for target, _ in NODE_DIRS]
    overlaid: set[str] = set()
    for target in [*targets, SHARE, str(MOUNT), "/etc/hosts"]:
        parent = os.path.dirname(target)
        if parent in overlaid or (target != "/etc/hosts" and os.path.isdir(target)):
            continue
        layer = work / "overlays" / parent.strip("/").replace("/", "-")
        (layer / "upper").mkdir(parents=True)
        (layer / "work").mkdir()
        options = f"lowerdir={parent},upperdir={layer / 'upper'},workdir={layer / 'work'}"
        _sh("mount", "-t", "overlay", "overlay", "-o", options, parent)
        overlaid.add(parent)
    for target in [*targets, SHARE, str(MOUNT)]:
        os.makedirs(target, exist_ok=True)
    Path("/etc/hosts").write_text(qa_config.hosts_file(NODES))
    _sh("mount", "--bind", str(work), str(MOUNT))
    return MOUNT


@contextmanager
def machines(work: Path, roots: dict[str, Path]) -> Iterator[Nodes]:
    """One namespace per node, held by a process that ends with this block."""
    share = str(ganeti_tree().parent)
    holders: list[subprocess.Popen[str]] = []
    try:
        for name, root in roots.items():
            scratch = str(work / "overlays" / name)
            script = machine_script(str(root), name, share, scratch, own_tmp=True)
            script += "\necho ready\nexec cat"  # until this block closes its input
            argv = ["unshare", "-m", "-u", "--propagation", "private", "sh", "-c", script]
            holders.append(
                subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            )
            assert holders[-1].stdout is not None
            if holders[-1].stdout.readline() != "ready\n":
                raise RuntimeError(f"Cannot make the namespace of node {name}")
        yield {
            name: {"root": str(root), "pid": holder.pid}
            for (name, root), holder in zip(roots.items(), holders, strict=True)
        }
    finally:
        for holder in holders:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait()


def _install_os(root: Path) -> None:
    os_dir = Paths(root).os_search_path[0] / qa_config.OS_NAME
    os_dir.mkdir(parents=True, exist_ok=True)
    (os_dir / "ganeti_api_version").write_text("20\n")
    # the parameter the suite's performance tests set
    (os_dir / "parameters.list").write_text("fake_os_param A parameter for Ganeti's QA\n")
    for name, script in OS_SCRIPTS.items():
        (os_dir / name).write_text(script)
        (os_dir / name).chmod(0o755)


def prepare_roots(roots: list[Path]) -> None:
    """The OS definition on every node, the shared directory (node 1's, as over NFS)."""
    (roots[0] / SHARED_DIR).mkdir(parents=True)
    for other in roots[1:]:
        (other / SHARED_DIR).parent.mkdir(parents=True)
        (other / SHARED_DIR).symlink_to(roots[0] / SHARED_DIR, target_is_directory=True)
    for root in roots:
        _install_os(root)


def start_cluster(root: Path, nodes: Nodes) -> testbed.Testbed:
    """The cluster of the QA config on the machines ``nodes``, ready for the suite."""
    pids = tuple(int(entry["pid"]) for entry in nodes.values())
    bed = testbed.up(root, NODES, network=Machines(pids), init_args=qa_config.INIT_ARGS)
    try:
        users = bed.master.paths.rapi_users_file
        users.parent.mkdir(parents=True, exist_ok=True)
        users.write_text(f"{qa_config.RAPI_USER} {{CLEARTEXT}}{qa_config.RAPI_SECRET} write\n")
    except BaseException:
        bed.down()
        raise
    return bed


def run(work: Path, tests: str, *, echo: bool = True) -> Run:
    """Prepare this namespace, run the suite against a new cluster, stop it."""
    seen = prepare_namespace(work)
    root = seen / "bed"
    roots = {testbed.node_name(k): root / f"node{k}" for k in range(1, NODES + 1)}
    prepare_roots(list(roots.values()))
    config = qa_config.qa_config(tests)
    with machines(seen, roots) as nodes:
        bed = start_cluster(root, nodes)
        try:
            write_machine(seen, nodes)
            # Burnin on the new cluster, its confd queries included, without
            # its disk steps: they detach and remove disks of running instances
            # (hotplug_if_possible), which the fake hypervisor cannot hotplug,
            # so Ganeti refuses the removal too; the suite's TestClusterBurnin
            # runs every step.
            burnin = run_burnin(config, seen, "--no-add-disks")
            if echo:
                print(f"{burnin['outcome']:<4} {burnin['test']}: {burnin['reason']}", flush=True)
            if burnin["outcome"] == "FAIL":
                # All of it: the error comes before burnin's clean-up lines.
                print((seen / "burnin.log").read_text()[-20000:], flush=True)
                print(_confd_state(roots), flush=True)
            result = run_suite(config, seen, nodes, echo=echo)
            result.results.insert(0, burnin)
            (seen / "results.json").write_text(json.dumps(result.results, indent=1))
            return result
        finally:
            bed.down()


def _confd_state(roots: dict[str, Path]) -> str:
    """Each node's config.data (there or not) and its confd's log lines."""
    lines = []
    for name, node_root in roots.items():
        paths = Paths(node_root)
        lines.append(f"{name}: config.data {'present' if paths.config_data.exists() else 'absent'}")
        log = paths.daemon_log("corral-noded")
        if log.exists():
            lines += [line for line in log.read_text().splitlines() if "confd" in line]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.qa.throwaway", description=__doc__)
    parser.add_argument("--work", required=True, type=Path, help="an empty directory")
    parser.add_argument("--tests", choices=qa_config.SUBSETS, default="full")
    opts = parser.parse_args(argv)
    work = opts.work.absolute()
    if os.environ.get(INSIDE_ENV) != str(work):
        # Ganeti's package and the suite's source come from the network, which
        # the namespace has not: fetched first (once, into .cache).
        ganeti_tree()
        qa_tree()
        unshare = ["unshare", "--net", "--mount", "--propagation", "private"]
        command = [*unshare, sys.executable, "-m", "tests.qa.throwaway", *(argv or sys.argv[1:])]
        return subprocess.run(command, env={**os.environ, INSIDE_ENV: str(work)}).returncode
    result = run(work, opts.tests)
    print(f"{result.passed}/{result.applicable}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
