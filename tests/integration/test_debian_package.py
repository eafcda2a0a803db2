"""The Debian package (packaging/build_deb.py) installed into a clean Debian 12
root made with debootstrap from Debian's packages, with apt (its Depends come
from the mirror); a cluster made there by the package's commands in a
network namespace of its own; its daemons stopped and started again through
the installed units' own command lines (``EnvironmentFile=``, ``ExecStart=``
and a notify socket, as systemd runs them: systemd cannot run here); an
instance; then ``apt-get purge``, which leaves nothing of the package."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.debian_root import PATH, DebianRoot, Namespace
from tests.helpers.noded import REPO_ROOT
from tests.helpers.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="chroot and namespaces need root"),
]

VENV_PYTHON = "/usr/lib/corral/venv/bin/python3"
NODE, NODE_IP, CLUSTER = "node1.example.com", "127.0.0.2", "cluster.example.com"
INSTANCE = "inst1.example.com"
# gnt-cluster init's daemons, in their start order.
DAEMONS = ("corral-noded", "corral-masterd", "corral-rapi")
CONFFILES = ("/etc/default/ganeti", "/etc/logrotate.d/corral")
READY_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package, built from the repository."""
    out = tmp_path_factory.mktemp("deb")
    build = [sys.executable, str(REPO_ROOT / "packaging" / "build_deb.py"), "--out", str(out)]
    done = subprocess.run(build, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (package,) = out.glob("corral_*-1_amd64.deb")
    return package


@pytest.fixture(scope="module")
def root(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebianRoot]:
    """A clean Debian 12 root with the package installed by apt, its names
    in /etc/hosts (no resolver: the namespace has no network)."""
    debian = DebianRoot.unpack(tmp_path_factory.mktemp("debian") / "root")
    try:
        shutil.copy(deb, debian.path(f"/tmp/{deb.name}"))
        # logrotate (recommended) runs the package's snippet for real
        debian.apt("install", "-q", "--no-install-recommends", f"/tmp/{deb.name}", "logrotate")
        debian.path("/etc/hosts").write_text(
            f"127.0.0.1 localhost\n{NODE_IP} {NODE}\n{NODE_IP} {CLUSTER}\n"
        )
        yield debian
    finally:
        shutil.rmtree(debian.root, ignore_errors=True)


@pytest.fixture
def ns(root: DebianRoot) -> Iterator[Namespace]:
    """The cluster's namespaces; every daemon of the root stopped at the end."""
    namespace = Namespace(root)
    try:
        yield namespace
    finally:
        stop_daemons(root)
        namespace.close()


def daemon_pid(root: DebianRoot, daemon: str) -> int | None:
    """The pid of the root's running ``daemon`` (its pid file), if the process
    runs the package's python: never another process."""
    try:
        pid = int(root.path(f"/run/ganeti/{daemon}.pid").read_text())
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except (OSError, ValueError):
        return None
    return pid if argv0.decode() == VENV_PYTHON else None


def stop_daemons(root: DebianRoot) -> None:
    """SIGTERM to the root's daemons (metad too, if noded started it), and
    wait until they are gone."""
    pids = [p for d in (*reversed(DAEMONS), "corral-metad") if (p := daemon_pid(root, d))]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not any(_alive(pid) for pid in pids), 30, f"daemons {pids} to stop")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# The units' command lines, as systemd reads them


def unit_settings(root: DebianRoot, unit: str) -> dict[str, list[str]]:
    """The unit's settings: key → its values, in order."""
    settings: dict[str, list[str]] = {}
    for line in root.path(f"/lib/systemd/system/{unit}").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith(("#", ";", "[")):
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def environment_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines, quotes removed, comments skipped (systemd.exec(5))."""
    variables = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith(("#", ";")):
            variables[key.strip()] = " ".join(shlex.split(value))
    return variables


def unit_command(root: DebianRoot, unit: str) -> tuple[list[str], dict[str, str]]:
    """ExecStart= of ``unit`` with its variables expanded, and its environment:
    systemd's own (PATH, INVOCATION_ID) and its EnvironmentFile= files ('-':
    a missing one is skipped); its conditions must hold.  ``$VAR`` expands to the value's words,
    ``${VAR}`` to one word, as systemd does."""
    settings = unit_settings(root, unit)
    for condition in settings.get("ConditionPathExists", []):
        assert root.path(condition).exists(), f"systemd would skip {unit}: no {condition}"
    env = {"PATH": PATH, "LANG": "C.UTF-8", "INVOCATION_ID": secrets.token_hex(16)}
    for name in settings.get("EnvironmentFile", []):
        path = root.path(name.removeprefix("-"))
        if path.exists() or not name.startswith("-"):
            env.update(environment_file(path))
    (exec_start,) = settings["ExecStart"]
    argv: list[str] = []
    for word in shlex.split(exec_start):
        if word.startswith("${") and word.endswith("}"):
            argv.append(env.get(word[2:-1], ""))
        elif word.startswith("$"):
            argv += env.get(word[1:], "").split()
        else:
            argv.append(word)
    return argv, env


def start_unit(ns: Namespace, unit: str, log: Path) -> subprocess.Popen[bytes]:
    """Run the unit's command in the namespace, as systemd would, until the
    daemon says READY=1 on the notify socket (``Type=notify``)."""
    argv, env = unit_command(ns.root, unit)
    notify = ns.root.path(f"/run/notify-{unit}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(notify))
        notify.chmod(0o777)  # as systemd's: corral-rapi is gnt-rapi when it is ready
        listener.settimeout(0.2)
        env["NOTIFY_SOCKET"] = f"/run/notify-{unit}"
        with log.open("ab") as out:
            proc = subprocess.Popen(ns.command(argv, env), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=out)  # fmt: skip
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            assert proc.poll() is None, f"{unit} exited ({proc.returncode}): {log.read_text()}"
            assert time.monotonic() < deadline, f"{unit} not ready: {log.read_text()}"
            try:
                if listener.recv(256) == b"READY=1":
                    break
            except TimeoutError:
                continue
    notify.unlink()
    return proc


def logrotate(root: DebianRoot, ns: Namespace) -> None:
    """Run logrotate on the package's snippet, forced: every daemon's log is
    rotated and opened again (SIGHUP from its postrotate), as it says in its
    new log; etcd's (as a master candidate has it) is copied and truncated."""
    etcd_log = root.path("/var/lib/ganeti/etcd/etcd.log")
    etcd_log.parent.mkdir(mode=0o700, exist_ok=True)
    etcd_log.write_text("etcd's lines\n")
    ns.run("logrotate", "--force", "--state", "/tmp/logrotate.state", "/etc/logrotate.d/corral")
    logs = [root.path(f"/var/log/ganeti/{d}.log") for d in DAEMONS]
    assert all(log.with_name(log.name + ".1").exists() for log in logs)
    wait_until(
        lambda: all("Log files opened again" in log.read_text() for log in logs),
        READY_TIMEOUT,
        "every daemon to open its log again",
    )
    assert etcd_log.with_name("etcd.log.1").read_text() == "etcd's lines\n"
    assert etcd_log.stat().st_size == 0


def test_the_package_installs_what_an_operator_of_ganeti_expects(root: DebianRoot) -> None:
    assert "gnt-rapi:" in root.path("/etc/passwd").read_text()
    for command in ("gnt-cluster", "gnt-instance", "ganeti-watcher", "corral-noded"):
        script = root.path(f"/usr/sbin/{command}").read_text()
        assert script.startswith(f"#!{VENV_PYTHON}\n")
    assert root.path("/usr/share/man/man8/gnt-cluster.8.gz").is_file()
    assert os.readlink(root.path("/usr/share/bash-completion/completions/gnt-node")) == "corral"
    assert root.path("/usr/share/doc/corral/copyright").read_text().startswith("BSD 2-Clause")
    assert os.readlink(root.path("/lib/systemd/system/ganeti-noded.service")) == (
        "corral-noded.service"
    )
    timer = unit_settings(root, "ganeti-watcher.timer")
    assert timer["OnCalendar"] == ["*:0/5"]
    # enabled as debhelper would: ganeti.target pulls the node's and master's daemons
    wants = root.path("/etc/systemd/system/ganeti.target.wants")
    assert {p.name for p in wants.iterdir()} >= {f"{d}.service" for d in DAEMONS}
    assert root.path("/etc/systemd/system/timers.target.wants/ganeti-watcher.timer").is_symlink()


def test_a_cluster_runs_from_the_units_and_purge_leaves_nothing(
    root: DebianRoot, ns: Namespace, tmp_path: Path
) -> None:
    # gnt-cluster init from /usr/sbin starts the daemons with the venv's python
    ns.run("gnt-cluster", "init", "--node-name", NODE, "--node-ip", NODE_IP, CLUSTER)
    for daemon in DAEMONS:
        pid = daemon_pid(root, daemon)
        assert pid is not None, f"{daemon} does not run the package's python"
    stop_daemons(root)
    assert all(daemon_pid(root, d) is None for d in DAEMONS)

    # at boot, as the shipped /etc/default/ganeti says: noded's address there
    defaults = root.path("/etc/default/ganeti")
    defaults.write_text(
        defaults.read_text().replace('NODED_ARGS=""', f'NODED_ARGS="--bind {NODE_IP}"')
    )
    procs = [start_unit(ns, f"{d}.service", tmp_path / f"{d}.log") for d in DAEMONS]
    record = json.loads(root.path("/var/lib/ganeti/corral-noded.start").read_text())
    assert record["argv"][:2] == [VENV_PYTHON, "/usr/sbin/corral-noded"]
    assert record["supervisor"] == "systemd"  # the watcher leaves it to systemd
    ns.run("gnt-cluster", "verify")
    ns.run("corral-examples", "install-os", "demo")
    ns.run("gnt-instance", "add", "-t", "file", "--disk", "0:size=1g", "-o", "demo+default",
           "--no-name-check", "--no-ip-check", INSTANCE)  # fmt: skip
    listed = ns.run("gnt-instance", "list", "--no-headers", "-o", "name,status").stdout.split()
    assert listed == [INSTANCE, "running"]
    logrotate(root, ns)
    for proc in reversed(procs):
        proc.terminate()
        assert proc.wait(30) == 0

    files = set(root.chroot("dpkg", "-L", "corral").split("\n")) - {"", "/."}
    # byte-compiled at build time: the daemons and commands wrote no bytecode
    venv = root.path("/usr/lib/corral")
    assert {f"/{p.relative_to(root.root)}" for p in venv.rglob("*")} <= files
    root.apt("purge", "-q", "corral")
    # no file or link stays; directories other packages hold too do (/usr/sbin, ...)
    left = [f for f in sorted(files) if os.path.lexists(root.path(f)) and not root.path(f).is_dir()]
    assert not left
    assert not venv.exists()
    assert not any(root.path(f).exists() for f in CONFFILES)
    assert not root.path("/var/log/ganeti").exists()
    # what Debian's policy and the administrator keep: the system user, the cluster
    assert "gnt-rapi:" in root.path("/etc/passwd").read_text()
    assert root.path("/var/lib/ganeti/config.db").exists()
    assert any(root.path("/srv/ganeti/file-storage").iterdir())  # the instance's disk
