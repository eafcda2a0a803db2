"""``ssh`` for Ganeti's QA suite when the nodes are Corral roots on this machine.

The suite drives its nodes with ``ssh [options] NODE COMMAND`` (and copies
files between nodes with ``scp``: :func:`copy`).  This stands in for SSH (and
only for SSH): it runs COMMAND with bash, as sshd would, in a
mount and UTS namespace where the host name is NODE, the directories Corral
keeps below the node's root (``/var/lib/ganeti``, ``/etc/ganeti``,
``/var/log/ganeti``, ``/run/ganeti``, ``/srv/ganeti``) are bind mounts of that
root's, and the ``gnt-*`` on PATH are Corral's.  Each invocation is logged
(node, command, exit code, duration).

A node given with the pid of a process in its namespace (a "machine": its
daemons run there too, with a ``/tmp`` of its own) is entered with
``nsenter``; a node given by its root alone gets a fresh namespace per command
(its daemons, outside, share the host's ``/tmp``).

It is run by Debian's ``/usr/bin/python3`` (``-I -S``: stdlib only) from the
``ssh`` wrapper that :mod:`tests.qa.harness` writes; the nodes come from the
JSON file named by ``CORRAL_QA_MACHINE``::

    {"nodes": {"node1.example.com": {"root": "/path/to/node1", "pid": 1234}, ...},
     "path": "<dir with Corral's gnt-*>", "share": "<Ganeti's /usr/share/ganeti>",
     "log": "<log file>"}
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Any

MACHINE_ENV = "CORRAL_QA_MACHINE"
# OpenSSH's options that take an argument (ssh(1), scp(1)).
_WITH_ARGUMENT = set("BDEFIJLOQRSWbceilmopw")
_SCP_WITH_ARGUMENT = set("DFJPSciloX")
# Production path -> path below a node's root.
NODE_DIRS = (
    ("/var/lib/ganeti", "var/lib/ganeti"),
    ("/etc/ganeti", "etc/ganeti"),
    ("/var/log/ganeti", "var/log/ganeti"),
    ("/run/ganeti", "var/run/ganeti"),
    ("/srv/ganeti", "srv/ganeti"),
)
OWN_TMP = ("/tmp", "tmp")  # last: it may hide the roots
SHARE = "/usr/share/ganeti"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def parse(argv: list[str]) -> tuple[str, str | None, set[str]]:
    """``(host, command or None, flags)`` of an ssh command line (no program name)."""
    flags: set[str] = set()
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        arg = argv[i]
        j = 1
        while j < len(arg):
            letter = arg[j]
            if letter in _WITH_ARGUMENT:
                if j == len(arg) - 1:
                    i += 1  # the argument is the next word
                break
            flags.add(letter)
            j += 1
        i += 1
    if i < len(argv) and argv[i] == "--":
        i += 1
    if i >= len(argv):
        raise SystemExit("usage: ssh [options] host [command]")
    rest = argv[i + 1 :]
    return argv[i], " ".join(rest) if rest else None, flags


def mount_script(root: str, share: str | None, scratch: str, own_tmp: bool = False) -> str:
    """Shell lines that make the node's directories (and with ``own_tmp`` its
    ``/tmp``) appear at their production paths, and ``share`` at ``SHARE``; a
    missing mount point gets a throw-away overlay of its parent first."""
    lines = ["set -e"]
    dirs = (*NODE_DIRS, OWN_TMP) if own_tmp else NODE_DIRS
    mounts = [(target, os.path.join(root, below)) for target, below in dirs]
    if share:
        mounts.insert(0, (SHARE, share))
    for index, (target, source) in enumerate(mounts):
        parent = os.path.dirname(target)
        upper, work = f"{scratch}/u{index}", f"{scratch}/w{index}"
        lines += [
            f"mkdir -p {shlex.quote(source)}",
            *([f"chmod 1777 {shlex.quote(source)}"] if target == OWN_TMP[0] else []),
            f"if [ ! -d {target} ]; then mkdir -p {upper} {work};"
            f" mount -t overlay overlay -o lowerdir={parent},upperdir={upper},workdir={work}"
            f" {parent}; mkdir {target}; fi",
            f"mount --bind {shlex.quote(source)} {target}",
        ]
    return "\n".join(lines)


def machine_script(root: str, node: str, share: str | None, scratch: str, own_tmp: bool) -> str:
    """The shell lines that make a new mount and UTS namespace node ``node``'s."""
    return "\n".join([mount_script(root, share, scratch, own_tmp), f"hostname {shlex.quote(node)}"])


def node_command(node: str, entry: dict[str, Any], command: str, share: str | None,
                 scratch: str) -> list[str]:  # fmt: skip
    """The argv that runs ``command`` as it would run on ``node`` (``scratch``: where
    overlays keep their files, if a mount point must be made)."""
    run = 'cd /root 2>/dev/null || cd /\nexec bash -c "$1"'
    if "pid" in entry:
        return ["nsenter", "-t", str(entry["pid"]), "-m", "-u", "sh", "-c", run, "ssh", command]
    script = machine_script(entry["root"], node, share, scratch, own_tmp=False) + "\n" + run
    return ["unshare", "-m", "-u", "--propagation", "private", "sh", "-c", script, "ssh", command]


def _environment(path: str, firewall: str) -> dict[str, str]:
    """A login environment, as sshd gives (nothing of the suite's), where the
    firewall's stand-in keeps the node's rules, and the nodes for ssh from a node."""
    return {
        MACHINE_ENV: os.environ[MACHINE_ENV],
        "QA_FIREWALL": firewall,
        "PATH": f"{path}:{SYSTEM_PATH}",
        "HOME": "/root",
        "USER": "root",
        "LOGNAME": "root",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
    }


def _log(log: str, line: str) -> None:
    with open(log, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def copy(argv: list[str]) -> int:
    """``scp [options] SOURCE... NODE:DIRECTORY`` (what the suite runs on a node to
    move a file disk): each SOURCE is sent as a tar stream through ``ssh NODE``."""
    words: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-") and not words:
            i += 2 if arg[1:] and arg[-1] in _SCP_WITH_ARGUMENT and len(arg) == 2 else 1
            continue
        words.append(arg)
        i += 1
    *sources, target = words
    host, colon, directory = target.partition(":")
    if not colon or not sources or any(":" in source for source in sources):
        print("scp (QA stand-in): only local files to NODE:DIRECTORY", file=sys.stderr)
        return 1
    for source in sources:
        parent, name = os.path.split(os.path.normpath(source))
        pack = ["tar", "--sparse", "-C", parent or ".", "-cf", "-", name]  # disks are sparse
        tar = subprocess.Popen(pack, stdout=subprocess.PIPE)
        unpack = f"tar -C {shlex.quote(directory)} -xf -"
        rc = subprocess.run(["ssh", host, unpack], stdin=tar.stdout, check=False).returncode
        if tar.wait() or rc:
            return 1
    return 0


def main(argv: list[str]) -> int:
    """Run ``ssh argv`` on a node; its exit code (255 for ssh's own errors)."""
    with open(os.environ[MACHINE_ENV], encoding="utf-8") as source:
        machine = json.load(source)
    host, command, flags = parse(argv)
    stamp = f"{time.strftime('%H:%M:%S')} [{os.getpid()}] {host}"
    entry = machine["nodes"].get(host)
    if entry is None:
        _log(machine["log"], f"{stamp} unknown host: {command!r}")
        print(f"ssh: Could not resolve hostname {host}: Name or service not known", file=sys.stderr)
        return 255
    if command is None:  # -N: a connection for multiplexing, nothing to run
        _log(machine["log"], f"{stamp} (no command) {sorted(flags)}")
        stop = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)
        parent = os.getppid()
        while os.getppid() == parent and signal.sigtimedwait(stop, 1) is None:
            pass  # until stopped, or the suite is gone without stopping it
        return 0
    _log(machine["log"], f"{stamp} $ {command}")
    start = time.monotonic()
    state = os.path.dirname(machine["log"])
    scratch = os.path.join(state, "overlays", str(os.getpid()))
    argv = node_command(host, entry, command, machine.get("share"), scratch)
    env = _environment(machine["path"], os.path.join(state, f"firewall-{host}"))
    rc = subprocess.run(argv, env=env, check=False).returncode
    rc = 128 - rc if rc < 0 else rc
    _log(machine["log"], f"{stamp} rc={rc} {time.monotonic() - start:.2f}s")
    return rc


if __name__ == "__main__":
    sys.exit(copy(sys.argv[2:]) if sys.argv[1:2] == ["--scp"] else main(sys.argv[1:]))
