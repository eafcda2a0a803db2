"""Assembles corral-rapi: certificate, users, masterd connection, server,
then the drop to the unprivileged user."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from corral.http.accepting import fd_limit
from corral.paths import Paths
from corral.process.daemons import listen_error, on_sighup
from corral.process.privileges import drop_privileges, lookup_user
from corral.rapi.httpd.listener import Listener
from corral.rapi.limits import RapiLimits
from corral.rapi.luxi import LuxiPool
from corral.rapi.master_ip import MasterIpListener, read_master_ip
from corral.rapi.server import RapiServer
from corral.rapi.throttle import LoginThrottle
from corral.rapi.users import UsersFile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """What corral-rapi's options ask for."""

    address: str
    port: int
    ssl: bool
    require_auth: bool
    user: str
    limits: RapiLimits
    login_delay: float = 0.05
    max_login_delay: float = 5.0


def _tls_context(paths: Paths) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(paths.rapi_pem)
    return context


def _users_dir(paths: Paths, user: str) -> int:
    """A descriptor of the users file's directory, which ``user`` may read:
    the file is re-read through it after the drop, whatever the directories
    above allow."""
    directory = paths.rapi_users_dir
    directory.mkdir(mode=0o750, exist_ok=True)
    if os.geteuid() == 0 and user != "root":
        # As Ganeti's ensure-dirs: the directory and the file readable by the group.
        _uid, gid = lookup_user(user)
        for path, mode in ((directory, 0o750), (paths.rapi_users_file, 0o640)):
            if path.exists():
                os.chown(path, 0, gid)
                os.chmod(path, mode)
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _become(paths: Paths, user: str) -> None:
    """Drop root for ``user`` (keeping the open log file writable)."""
    if user == "root" or os.geteuid() != 0:
        if user != "root":
            drop_privileges(user)  # checks that we already are that user
        return
    uid, gid = lookup_user(user)
    log_file = paths.daemon_log("corral-rapi")
    if log_file.exists():
        os.chown(log_file, uid, gid)
    drop_privileges(user)
    log.info("Running as user %s (uid %d)", user, uid)


async def serve(paths: Paths, settings: Settings, ready: Callable[[], None]) -> None:
    """Serve the RAPI until cancelled."""
    tls = _tls_context(paths) if settings.ssl else None
    users = UsersFile(paths.rapi_users_file.name, _users_dir(paths, settings.user))
    users.reload()  # a problem with the file is logged at start
    # luxi is reached from inside the socket directory, by name: the daemon
    # needs no access to the directories above it.
    os.chdir(paths.socket_dir)
    luxi = LuxiPool(paths.master_socket.name)
    rapi = RapiServer(
        luxi,
        users,
        require_auth=settings.require_auth,
        throttle=LoginThrottle(base=settings.login_delay, cap=settings.max_login_delay),
    )
    limits = settings.limits.within_fd_limit(fd_limit())
    listener = Listener(
        rapi, settings.address, settings.port, tls=tls, limits=limits, max_body=rapi.max_body
    )
    on_master_ip = MasterIpListener(
        paths,
        settings.address,
        settings.port,
        lambda ip: Listener(
            rapi, ip, settings.port, tls=tls, limits=limits, max_body=rapi.max_body, freebind=True
        ),
    )
    following: asyncio.Task[None] | None = None
    try:
        try:
            await listener.start()
        except OSError as err:
            raise listen_error(settings.address, settings.port, err) from None
        master_ip = await asyncio.to_thread(read_master_ip, paths)  # still as root
        following = asyncio.get_running_loop().create_task(on_master_ip.follow(master_ip))
        _become(paths, settings.user)
        on_sighup(users.reload)
        log.info("Listening on %s", listener.name)
        ready()
        await asyncio.Event().wait()
    finally:
        await listener.stop()
        if following is not None:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        await luxi.close()
