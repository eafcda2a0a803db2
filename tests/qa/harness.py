"""Run Ganeti 3.0.2's QA suite against a Corral cluster and count what passes.

The suite (``qa/ganeti-qa.py``, unchanged, from :mod:`tests.qa.source`) runs
in Debian's ``/usr/bin/python3`` with Ganeti's library from the ``ganeti-3.0``
package (:mod:`tests.conformance.ganeti`), under :mod:`tests.qa.driver`,
which prints one line per test.  When the cluster's nodes are Corral roots on
this machine (``roots``), ``ssh`` is :mod:`tests.qa.ssh_shim`; otherwise the
system's ssh reaches real nodes.

Operators: ``scripts/ganeti-qa --config qa.json [--root NODE=DIR ...] --yes-do-it``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conformance.ganeti import SYSTEM_PYTHON, VERSION, check_python_deps, ganeti_tree
from tests.qa import ssh_shim
from tests.qa.source import qa_tree

HERE = Path(__file__).resolve().parent
# Node name -> {"root": its Corral root, "pid": a process in its namespace (optional)}
# (see tests/qa/ssh_shim.py).
Nodes = dict[str, dict[str, str | int]]
# Corral's commands with Ganeti's names, as they are on a node's PATH.
COMMAND_PREFIXES = ("gnt-", "ganeti-")
# The nodes' firewall, stood in for: the suite clears its rules at every start
# (``iptables-save | grep -v MARK | iptables-restore``); only its custom SSH port
# tests (N/A: they need LVM) would need real rules.  Rules are kept per node.
FIREWALL = {
    "iptables-save": '#!/bin/sh\ncat "$QA_FIREWALL" 2>/dev/null || true\n',
    "iptables-restore": '#!/bin/sh\ncat > "$QA_FIREWALL"\n',
    "iptables": '#!/bin/sh\necho "$*" >> "$QA_FIREWALL"\n',
}


@dataclass
class Run:
    """The outcome of one run of the suite."""

    results: list[dict[str, Any]]
    returncode: int
    seconds: float

    @property
    def passed(self) -> int:
        return sum(r["outcome"] == "PASS" for r in self.results)

    @property
    def applicable(self) -> int:
        """Test runs that apply here (passed or failed; not skipped, not N/A)."""
        return sum(r["outcome"] in ("PASS", "FAIL") for r in self.results)

    def outcome(self, test: str) -> str | None:
        return next((r["outcome"] for r in self.results if r["test"] == test), None)


def node_commands(work: Path) -> Path:
    """A directory with Corral's ``gnt-*`` (and ``ganeti-*``) commands and the
    firewall's stand-in, no others."""
    bindir = work / "node-bin"
    bindir.mkdir(parents=True, exist_ok=True)
    venv_bin = Path(sys.executable).parent
    for command in sorted(venv_bin.iterdir()):
        if command.name.startswith(COMMAND_PREFIXES) and not (bindir / command.name).exists():
            (bindir / command.name).symlink_to(command)
    for name, script in FIREWALL.items():
        (bindir / name).write_text(script)
        (bindir / name).chmod(0o755)
    return bindir


def write_machine(work: Path, nodes: Nodes) -> dict[str, str]:
    """Set up the ssh shim for ``nodes``; the environment the suite needs for it."""
    bindir = work / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    machine = {
        "nodes": nodes,
        "path": str(node_commands(work)),
        "share": str(ganeti_tree().parent),  # for burnin's PYTHONPATH=/usr/share/ganeti/3.0
        "log": str(work / "ssh.log"),
    }
    (work / "machine.json").write_text(json.dumps(machine, indent=1))
    shim = f"{SYSTEM_PYTHON} -I -S {shlex.quote(str(HERE / 'ssh_shim.py'))}"
    # ssh for the suite, and on the nodes (with scp) for what it runs there
    for directory in (bindir, Path(str(machine["path"]))):
        for name, option in (("ssh", ""), ("scp", " --scp")):
            (directory / name).write_text(f'#!/bin/sh\nexec {shim}{option} "$@"\n')
            (directory / name).chmod(0o755)
    return {ssh_shim.MACHINE_ENV: str(work / "machine.json"), "PATH": f"{bindir}:"}


def run_suite(
    config: dict[str, Any],
    work: Path,
    nodes: Nodes | None = None,
    *,
    timeout: float = 3600,
    echo: bool = True,
) -> Run:
    """Run the QA suite with ``config`` (Ganeti's QA JSON); the suite's output
    goes to ``work/qa.log``, the shim's log to ``work/ssh.log``; ``nodes``: the
    nodes the ssh shim reaches (else the system's ssh is used)."""
    work.mkdir(parents=True, exist_ok=True)
    tree, qa = ganeti_tree(), qa_tree()
    check_python_deps()
    env = {
        "PATH": ssh_shim.SYSTEM_PATH,
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(tree),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if nodes:
        extra = write_machine(work, nodes)
        env["PATH"] = extra.pop("PATH") + env["PATH"]
        env.update(extra)
    config_file = work / "qa.json"
    config_file.write_text(json.dumps(config, indent=1))
    results_file = work / "results.json"
    results_file.unlink(missing_ok=True)
    argv = [SYSTEM_PYTHON, "-u", str(HERE / "driver.py"), str(qa / "qa"), str(config_file)]
    start = time.monotonic()
    with (work / "qa.log").open("w") as log:
        # A session of its own: whatever the suite leaves running ends with it.
        proc = subprocess.Popen(
            [*argv, str(results_file)], cwd=qa / "qa", env=env, stdout=subprocess.PIPE,
            stderr=log, text=True, start_new_session=True,
        )  # fmt: skip
        assert proc.stdout is not None
        watchdog = threading.Timer(timeout, _end_session, (proc.pid,))
        watchdog.start()
        try:
            for line in proc.stdout:
                if echo:
                    print(line, end="", flush=True)
            rc = proc.wait()
        finally:
            watchdog.cancel()
            _end_session(proc.pid)
            proc.wait()
    results = json.loads(results_file.read_text()) if results_file.exists() else []
    return Run(results, rc, time.monotonic() - start)


def run_burnin(config: dict[str, Any], work: Path, *extra: str) -> dict[str, Any]:
    """Ganeti's burnin (the ganeti-3.0 package's) run on the master as the suite's
    TestClusterBurnin runs it, with ``extra`` options; a result as the driver's.
    Needs ``write_machine`` (``run_suite``) to have set up ``work`` first."""
    options, disks = config["options"], config["disks"]
    share = f"/usr/share/ganeti/{VERSION.rpartition('.')[0]}"  # /usr/share/ganeti/3.0
    command = [
        # Unbuffered: its errors (stderr) land in the log where they happened.
        "env", f"PYTHONPATH={share}", "PYTHONUNBUFFERED=1", f"{share}/burnin",
        f"--os={config['os']}",
        f"--minmem-size={config['minmem']}", f"--maxmem-size={config['maxmem']}",
        f"--disk-size={','.join(d['size'] for d in disks)}",
        f"--disk-growth={','.join(d['growth'] for d in disks)}",
        f"--disk-template={options['burnin-disk-template']}",
        f"--rename={options['burnin-rename']}",
        f"--reboot-types={','.join(options['reboot-types'])}", *extra,
        *(i["name"] for i in config["instances"][: options["burnin-instances"]]),
    ]  # fmt: skip
    env = {**os.environ, ssh_shim.MACHINE_ENV: str(work / "machine.json")}
    master = config["nodes"][0]["primary"]
    start = time.monotonic()
    with (work / "burnin.log").open("w") as log:
        proc = subprocess.run(
            [str(work / "bin" / "ssh"), master, shlex.join(command)], env=env, stdout=log,
            stderr=subprocess.STDOUT, timeout=900, check=False,
        )  # fmt: skip
    lines = [line.strip() for line in (work / "burnin.log").read_text().splitlines()]
    tail = " | ".join([f"exit {proc.returncode}", *filter(None, lines)][-8:])
    return {
        "test": f"burnin {' '.join(extra)}".strip(),
        "outcome": "PASS" if proc.returncode == 0 else "FAIL",
        "reason": "" if proc.returncode == 0 else tail,
        "seconds": round(time.monotonic() - start, 2),
        "block": "harness",
    }


def _end_session(leader: int) -> None:
    """Kill the session the suite ran in (daemons it starts leave it: setsid)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader, signal.SIGKILL)


def _roots(values: list[str]) -> Nodes:
    nodes: Nodes = {}
    for value in values:
        name, sep, root = value.partition("=")
        if not sep or not name or not root:
            raise SystemExit(f"--root takes NODE=DIR, not {value!r}")
        nodes[name] = {"root": str(Path(root).absolute())}
    return nodes


def main(argv: list[str] | None = None) -> int:
    """``scripts/ganeti-qa``: run the suite against an existing Corral cluster."""
    parser = argparse.ArgumentParser(prog="ganeti-qa", description=__doc__)
    parser.add_argument("--config", required=True, type=Path, help="Ganeti's QA JSON file")
    parser.add_argument(
        "--root", action="append", default=[], metavar="NODE=DIR",
        help="a node that is a Corral root on this machine (then ssh is the shim)",
    )  # fmt: skip
    parser.add_argument("--work", type=Path, default=Path("ganeti-qa-work"),
                        help="logs and results (default ./ganeti-qa-work)")  # fmt: skip
    parser.add_argument("--yes-do-it", action="store_true",
                        help="really run it (the suite changes the cluster)")  # fmt: skip
    opts = parser.parse_args(argv)
    if not opts.yes_do_it:
        parser.error("the suite changes (and with cluster-destroy on, destroys) the cluster;"
                     " give --yes-do-it to run it")  # fmt: skip
    config = json.loads(opts.config.read_text())
    run = run_suite(config, opts.work.absolute(), _roots(opts.root) or None)
    print(f"{run.passed}/{run.applicable}")
    return 0 if run.returncode == 0 and run.passed == run.applicable else 1


if __name__ == "__main__":
    sys.exit(main())
