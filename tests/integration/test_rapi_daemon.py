"""corral-rapi starts and stops with the cluster, and a RAPI that cannot start
leaves no cluster behind."""

from __future__ import annotations

import base64
import os
import signal
import ssl
import urllib.request
from pathlib import Path

from corral.bootstrap import MASTERD, NODED, RAPI
from corral.process.daemons import running_pid
from tests.helpers.cluster import new_root, running_cluster


def _get(url: str, cafile: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(cafile))
    with urllib.request.urlopen(url, context=context, timeout=30) as answer:
        return bytes(answer.read())


def test_init_starts_rapi_and_destroy_stops_it(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        pid = running_pid(cl.paths.pid_file(RAPI))
        assert pid is not None
        # The certificate names the node's address: host name checks pass.
        assert _get(f"{cl.rapi_url}/version", cl.rapi_ca) == b"2"
        result = cl.gnt("cluster", "destroy", "--yes-do-it")
        assert result.rc == 0, result.stderr
        assert running_pid(cl.paths.pid_file(RAPI)) is None
        # It ran as gnt-rapi, so it could not remove its pid file: destroy did.
        assert not cl.paths.pid_file(RAPI).exists()
        assert not cl.paths.rapi_pem.exists()


def test_init_fails_whole_when_rapi_cannot_start(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    cl.paths.daemon_defaults.parent.mkdir(parents=True)
    cl.paths.daemon_defaults.write_text('RAPI_ARGS="--user no-such-user-corral"\n')
    result = cl.init()
    try:
        assert result.rc == 1
        assert "User 'no-such-user-corral' does not exist" in result.stderr
        for daemon in (RAPI, MASTERD, NODED):
            assert running_pid(cl.paths.pid_file(daemon)) is None, daemon
        assert not cl.paths.config_db.exists()
        assert not cl.paths.rapi_pem.exists()
    finally:
        cl.stop()


def test_plain_http_with_no_ssl_and_sighup_rereads_users(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    cl.paths.daemon_defaults.parent.mkdir(parents=True)
    cl.paths.daemon_defaults.write_text('RAPI_ARGS="--no-ssl --port 5081"\n')
    result = cl.init()
    try:
        assert result.rc == 0, result.stderr
        url = f"http://{cl.node_ip}:5081"
        with urllib.request.urlopen(f"{url}/version", timeout=30) as answer:
            assert answer.read() == b"2"
        # SIGHUP re-reads the users file (as Ganeti's); the daemon goes on.
        pid = running_pid(cl.paths.pid_file(RAPI))
        assert pid is not None
        cl.add_rapi_user("admin", "pw", "write")
        os.kill(pid, signal.SIGHUP)
        request = urllib.request.Request(
            f"{url}/2/query/instance?fields=name",  # needs a user
            headers={"Authorization": "Basic " + base64.b64encode(b"admin:pw").decode()},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200
        assert running_pid(cl.paths.pid_file(RAPI)) == pid
    finally:
        cl.stop()
