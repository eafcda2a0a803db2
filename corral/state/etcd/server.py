"""etcd members run by Corral: Debian's ``etcd`` (3.4), one process per member.

Every member speaks mutual TLS on both its peer and its client port, under
one CA (the cluster CA; a member's certificate is its node's, which names
the node's address and serves as client too).  A member's data lives under
the root it is given; it compacts its history on its own and checks its
database against its peers' when it starts and every few minutes.

A member is stopped by its pid (kept in ``etcd.pid`` beside its data); a
member left over by a process that was killed (kill -9 of noded, of a test)
is ended when the member starts again, so nothing stays behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corral import errors
from corral.state.etcd.client import MAX_REQUEST_BYTES, MAX_TXN_OPS, EtcdClient

ETCD = Path("/usr/bin/etcd")
# Revisions of history each member keeps (older ones are compacted away):
# enough for a follower's watch to catch up after a pause, and a bounded database.
COMPACTION_RETENTION = 10_000
# How often members compare their databases' hashes (etcd 3.4's experimental check).
CORRUPT_CHECK_INTERVAL = "5m"
# Seconds to wait for a member to serve, and for one to exit once asked to.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class EtcdStartError(errors.CommandError):
    """An etcd member did not start, or did not serve in time."""


@dataclass(frozen=True)
class Tls:
    """The CA every member and client trusts, and a member's certificate and key
    (one file may hold both, as ``server.pem`` does)."""

    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class Member:
    """One member's name and addresses."""

    name: str
    ip: str
    client_port: int
    peer_port: int

    @property
    def client_url(self) -> str:
        return f"https://{self.ip}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"https://{self.ip}:{self.peer_port}"


def free_port(ip: str) -> int:
    """A TCP port free on ``ip`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ip, 0))
        return int(sock.getsockname()[1])


def member_on(name: str, ip: str) -> Member:
    """A member on ``ip`` with two ports free there now."""
    return Member(name, ip, free_port(ip), free_port(ip))


def argv(
    member: Member,
    cluster: Sequence[Member],
    data_dir: Path,
    tls: Tls,
    *,
    new: bool,
    force_new: bool = False,
) -> list[str]:
    """etcd's command line for ``member`` of ``cluster`` (``new``: the members
    form a new cluster; else it joins one that runs; ``force_new``: the member
    makes itself the only member of its cluster, keeping its data)."""
    initial = ",".join(f"{m.name}={m.peer_url}" for m in cluster)
    flags = {
        "name": member.name,
        "data-dir": str(data_dir),
        "listen-client-urls": member.client_url,
        "advertise-client-urls": member.client_url,
        "listen-peer-urls": member.peer_url,
        "initial-advertise-peer-urls": member.peer_url,
        "initial-cluster": initial,
        "initial-cluster-state": "new" if new else "existing",
        "initial-cluster-token": "corral-" + "-".join(sorted(m.name for m in cluster)),
        "client-cert-auth": "true",
        "trusted-ca-file": str(tls.ca),
        "cert-file": str(tls.cert),
        "key-file": str(tls.key),
        "peer-client-cert-auth": "true",
        "peer-trusted-ca-file": str(tls.ca),
        "peer-cert-file": str(tls.cert),
        "peer-key-file": str(tls.key),
        # etcd's defaults, said here: the stores split their writes to fit them.
        "max-txn-ops": str(MAX_TXN_OPS),
        "max-request-bytes": str(MAX_REQUEST_BYTES),
        "auto-compaction-mode": "revision",
        "auto-compaction-retention": str(COMPACTION_RETENTION),
        "experimental-initial-corrupt-check": "true",
        "experimental-corrupt-check-time": CORRUPT_CHECK_INTERVAL,
        "logger": "zap",
        "log-outputs": "stderr",
    }
    if force_new:
        flags["force-new-cluster"] = "true"
    return [str(ETCD), *(f"--{flag}={value}" for flag, value in flags.items())]


def _clean_env() -> dict[str, str]:
    # etcd reads ETCD_* variables as flags: none may come from our environment.
    return {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}


class EtcdMember:
    """One member process, under ``root`` (its data, pid file and log)."""

    def __init__(self, root: Path, member: Member, cluster: Sequence[Member], tls: Tls) -> None:
        self.root = root
        self.member = member
        self.cluster = list(cluster)
        self.tls = tls
        self.data_dir = root / "data"
        self.pid_file = root / "etcd.pid"
        self.log_file = root / "etcd.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    async def start(
        self, client: EtcdClient | None = None, *, new: bool = True, force_new: bool = False
    ) -> None:
        """Start the member (ending one left over first); with ``client``, wait
        until it serves.  A member of a new cluster serves only once a quorum
        runs: start them all, then wait.  ``new`` is ignored once the member
        has data (it then rejoins the cluster it was in).  ``force_new``: this
        start only, etcd's --force-new-cluster (see :func:`argv`)."""
        if self.pid is not None:
            raise EtcdStartError(f"etcd member {self.member.name} runs already (pid {self.pid})")
        await self._end_leftover()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        command = argv(
            self.member, self.cluster, self.data_dir, self.tls, new=new, force_new=force_new
        )
        with open(self.log_file, "ab") as log:
            self._proc = await asyncio.to_thread(
                subprocess.Popen,
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=_clean_env(),
                start_new_session=True,  # a signal to our group does not reach it
            )
        self.pid_file.write_text(f"{self._proc.pid}\n")
        if client is not None:
            await self.wait_serving(client)

    async def wait_serving(self, client: EtcdClient, timeout: float = START_TIMEOUT) -> None:
        """Wait until the member answers its health check (EtcdStartError if it
        exits or does not answer within ``timeout``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await client.healthy(self.member.client_url):
            if self._proc is not None and self._proc.poll() is not None:
                raise EtcdStartError(
                    f"etcd member {self.member.name} exited with status {self._proc.returncode};"
                    f" see {self.log_file}"
                )
            if loop.time() > deadline:
                raise EtcdStartError(
                    f"etcd member {self.member.name} did not serve within {timeout:.0f} s;"
                    f" see {self.log_file}"
                )
            await asyncio.sleep(0.05)

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Ask the member to exit (SIGTERM), kill it if it does not in time;
        also the member of an earlier manager (by its pid file)."""
        proc, self._proc = self._proc, None
        running = proc is not None and proc.poll() is None
        pid = proc.pid if proc is not None and running else member_pid(self.pid_file, self.data_dir)
        if pid is not None:
            await _terminate(pid, signal.SIGTERM, timeout)
        if proc is not None:
            proc.wait()  # reaps it: it has exited
        self.pid_file.unlink(missing_ok=True)

    async def exited(self) -> int | None:
        """Wait until the process this member started ends, however it ends; its
        exit status (None: it started none)."""
        proc = self._proc
        return None if proc is None else await asyncio.to_thread(proc.wait)

    def kill(self) -> None:
        """SIGKILL, as a crash would (the pid file stays, as it would)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    async def _end_leftover(self) -> None:
        """End the member a killed manager left running on this data directory."""
        pid = member_pid(self.pid_file, self.data_dir)
        if pid is not None:
            await _terminate(pid, signal.SIGKILL, STOP_TIMEOUT)
        self.pid_file.unlink(missing_ok=True)


async def _terminate(pid: int, sig: signal.Signals, timeout: float) -> None:
    """Send ``sig`` to ``pid`` and wait for it to exit; SIGKILL after ``timeout``."""
    for attempt in (sig, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, attempt)
        if await _exited(pid, timeout):
            return
    raise EtcdStartError(f"etcd member (pid {pid}) does not exit")


def member_pid(pid_file: Path, data_dir: Path) -> int | None:
    """The pid in ``pid_file`` if it is an etcd running on ``data_dir`` (else None)."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    ours = cmdline[:1] == [bytes(ETCD)] and f"--data-dir={data_dir}".encode() in cmdline
    return pid if ours else None


async def _exited(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for process ``pid`` to exit; whether it did."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(fd, _settle, done)
    try:
        async with asyncio.timeout(timeout):
            await done
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class EtcdCluster:
    """Members started and stopped together (tests; noded runs one member each)."""

    def __init__(self, members: Sequence[EtcdMember]) -> None:
        self.members = list(members)

    @classmethod
    def on_loopback(cls, root: Path, tls_of: dict[str, Tls], ips: Sequence[str]) -> EtcdCluster:
        """Members named m1, m2... on ``ips`` (one each), with free ports."""
        specs = [member_on(f"m{i}", ip) for i, ip in enumerate(ips, 1)]
        return cls([EtcdMember(root / s.name, s, specs, tls_of[s.name]) for s in specs])

    @property
    def endpoints(self) -> list[str]:
        return [m.member.client_url for m in self.members]

    async def start(self, client: EtcdClient) -> None:
        """Start every member, then wait until each serves."""
        for member in self.members:
            await member.start()
        for member in self.members:
            await member.wait_serving(client)

    async def stop(self) -> None:
        for member in self.members:
            await member.stop()

    async def leader(self, client: EtcdClient) -> EtcdMember:
        """The member that leads now (as the first member that answers says)."""
        for member in self.members:
            if member.pid is None:
                continue
            status = await client.status(member.member.client_url)
            leader_id = status.get("leader")
            if status["header"]["member_id"] == leader_id:
                return member
        raise EtcdStartError("No etcd member leads")
