"""noded's two modes: joining (no cluster yet) and cluster member.

Without cluster certificates noded listens with a self-signed certificate for
its own key (``node-key.pem``, made once) and serves only the join exchange
(:mod:`corral.node.join_protocol`): ``/join/hello`` answers the master's nonce
with the node's proof, a certificate request for its key and what it can
serve; ``/join/finish`` checks the master's proof and the CA against the
token, writes the cluster files and switches the listener to mutual TLS under
the cluster CA.  ``node_leave_cluster`` switches back.  No restart either way:
the listener takes the new TLS context for its next connection, and a request
counts as authenticated only on a connection made under the current cluster
context with a verified client certificate.  Both ways the node forgets the
newest fence token it has seen (:mod:`corral.node.fencing`): the next
cluster's masters count their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from corral import constants as C
from corral import errors, ssconf_files
from corral.crypto.tls import ssl_server_context
from corral.fileio import atomic_write
from corral.node import join_protocol as J
from corral.node.fencing import FenceKeeper
from corral.rpc.transport import WireReply

if TYPE_CHECKING:
    from corral.http.listener import GuardedTCPSite
    from corral.paths import Paths

log = logging.getLogger(__name__)

JOIN_CN = "corral-node-joining"
# Pending hellos kept (a new hello beyond this forgets the oldest).
_MAX_PENDING = 16


def node_key_file(paths: Paths) -> Path:
    return paths.data_dir / "node-key.pem"


def join_cert_file(paths: Paths) -> Path:
    return paths.data_dir / "join-cert.pem"


def token_file(paths: Paths) -> Path:
    return paths.data_dir / "join-token"


def is_joined(paths: Paths) -> bool:
    """Whether the root holds cluster certificates (else noded waits for a join)."""
    return paths.server_pem.exists() or paths.ca_cert.exists()


def cluster_files(paths: Paths) -> list[Path]:
    """What a node that leaves its cluster removes (the master's files never go)."""
    return [
        paths.server_pem,
        paths.client_pem,
        paths.ca_cert,
        paths.ca_key,
        paths.cluster_domain_secret,
        paths.confd_hmac_key,
        *paths.candidate_files,
        *paths.data_dir.glob("ssconf_*"),
    ]


def ensure_identity(paths: Paths) -> bytes:
    """The node's join certificate (PEM), made with its key if need be (0600)."""
    from corral.crypto import certs

    paths.data_dir.mkdir(parents=True, exist_ok=True)
    key_path, cert_path = node_key_file(paths), join_cert_file(paths)
    if not key_path.exists():
        atomic_write(key_path, certs.make_key_pem(), mode=0o600)
    key = key_path.read_bytes()
    if cert_path.exists() and certs.same_public_key(cert_path.read_bytes(), key):
        return cert_path.read_bytes()
    cert = certs.make_self_signed_for_key(key, JOIN_CN, C.CERT_VALIDITY_DAYS)
    atomic_write(cert_path, cert, mode=0o644)
    return cert


def save_token(paths: Paths, text: str) -> None:
    """Keep the token given to noded for the join (0600)."""
    token = J.parse_token(text)
    if is_joined(paths):
        raise errors.ParameterError(
            f"This node is in a cluster already (certificates in {paths.data_dir});"
            " a join token is for a node that is not"
        )
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(token_file(paths), (token.text() + "\n").encode("ascii"), mode=0o600)


def _reply(success: bool, payload: Any, status: int = 200) -> WireReply:
    return WireReply(status, json.dumps([success, payload]).encode("utf-8"))


# Connections made before this many renewals in a row are no longer taken.
_KEPT_CONTEXTS = 4


class Membership:
    """This node's mode and the listener it switches."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.joined = is_joined(paths)
        self._site: GuardedTCPSite | None = None
        self._context: ssl.SSLContext | None = None
        # Contexts whose connections are still the cluster's: the current one,
        # and those before a certificate renewal under the same CAs.
        self._trusted: list[ssl.SSLContext] = []
        self._pending: dict[str, str] = {}  # node nonce -> master nonce
        # The newest fence token of the cluster's masters (corral.node.fencing).
        self.fence = FenceKeeper(paths.fence_token)
        # The key of the certificate request the master last asked for.
        self.pending_key: bytes | None = None

    # The listener
    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of the current mode (made once per switch)."""
        if self._context is None:
            self._context = ssl_server_context(self.paths) if self.joined else self._join_ctx()
            self._trusted.append(self._context)
        return self._context

    def _join_ctx(self) -> ssl.SSLContext:
        for directory in self.paths.cluster_dirs():
            # What cannot be made shows in the capabilities the node reports.
            with contextlib.suppress(OSError):
                if directory != self.paths.queue_dir:
                    directory.mkdir(parents=True, exist_ok=True)
        ensure_identity(self.paths)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(join_cert_file(self.paths), node_key_file(self.paths))
        ctx.verify_mode = ssl.CERT_NONE  # the master proves itself with the token
        return ctx

    def attach(self, site: GuardedTCPSite) -> None:
        self._site = site

    def _switch(self, joined: bool) -> None:
        self.joined = joined
        self._context = None
        self._trusted.clear()
        self._pending.clear()
        self.pending_key = None
        if self._site is not None:
            self._site.set_ssl_context(self.ssl_context())
        log.info("Now %s", "in a cluster" if joined else "waiting to join a cluster")

    def reload(self, *, keep_connections: bool) -> None:
        """Serve with the certificate files as they are now.  The connections
        made before stay the cluster's if ``keep_connections`` (the CAs they
        were checked against are still trusted), else only new ones are."""
        if not self.joined:
            raise errors.OpExecError("This node is not in a cluster: nothing to reload")
        if not keep_connections:
            self._trusted.clear()
        self._context = ssl_server_context(self.paths)
        self._trusted = [*self._trusted[-_KEPT_CONTEXTS:], self._context]
        if self._site is not None:
            self._site.set_ssl_context(self._context)
        log.info("Serving with renewed certificates")

    def authenticated(self, request: web.Request) -> bool:
        """Whether ``request`` came on a connection made under the current cluster context."""
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        return (
            self.joined
            and ssl_object is not None
            and any(ssl_object.context is ctx for ctx in self._trusted)
            and bool(ssl_object.getpeercert())
        )

    def fingerprint(self) -> str:
        return J.pem_fingerprint(ensure_identity(self.paths))

    # The join exchange
    def _token(self) -> J.JoinToken:
        try:
            text = token_file(self.paths).read_text()
        except FileNotFoundError:
            raise errors.OpPrereqError(
                "No join token was given to this node: start its corral-noded with"
                f" --join-token-file PATH or write the token to {token_file(self.paths)}",
                C.ECODE_STATE,
            ) from None
        return J.parse_token(text)

    async def hello(self, body: dict[str, Any]) -> dict[str, Any]:
        """The node's proof, certificate request and capabilities."""
        from corral.crypto import certs
        from corral.node import capabilities

        token = self._token()
        master_nonce, name = body.get("master_nonce"), body.get("node_name")
        units = body.get("storage_units")
        if not all(isinstance(v, str) and v for v in (master_nonce, name)) or not isinstance(
            units, list
        ):
            raise errors.ParameterError(
                "join hello: master_nonce, storage_units and node_name needed"
            )
        assert isinstance(master_nonce, str)
        node_nonce = J.new_nonce()
        if len(self._pending) >= _MAX_PENDING:
            self._pending.pop(next(iter(self._pending)))
        self._pending[node_nonce] = master_nonce
        key = J.token_key(token.secret)
        return {
            "token_id": token.token_id,
            "node_nonce": node_nonce,
            "proof": J.proof(
                key, J.ROLE_NODE, token.token_id, master_nonce, node_nonce, self.fingerprint()
            ),
            "csr": certs.make_csr(node_key_file(self.paths).read_bytes(), str(name)).decode(
                "ascii"
            ),
            "version": C.PROTOCOL_VERSION,
            "capabilities": await asyncio.to_thread(capabilities.report_wire, self.paths, units),
        }

    def finish(self, body: dict[str, Any]) -> None:
        """Check the master, write the cluster files, become a cluster member."""
        token = self._token()
        node_nonce = body.get("node_nonce")
        master_nonce = self._pending.pop(node_nonce, None) if isinstance(node_nonce, str) else None
        if master_nonce is None:
            raise errors.OpPrereqError("Unknown join exchange: start again with a hello")
        assert isinstance(node_nonce, str)
        key = J.token_key(token.secret)
        expected = J.proof(
            key, J.ROLE_MASTER, token.token_id, master_nonce, node_nonce, self.fingerprint()
        )
        if not J.proof_matches(expected, body.get("proof")):
            raise errors.OpPrereqError(
                "The master's proof does not match this node's join token and certificate"
                " (a wrong token, or a man in the middle); nothing was changed"
            )
        files = _checked_files(body, token, node_key_file(self.paths).read_bytes())
        self._write(files)
        token_file(self.paths).unlink(missing_ok=True)
        self.fence.forget()  # a new cluster: its masters' tokens start anew
        self._switch(joined=True)

    def _write(self, files: dict[str, Any]) -> None:
        paths, key = self.paths, node_key_file(self.paths).read_bytes()
        from corral.crypto.certs import write_pem

        write_pem(paths.ca_cert, files["ca_cert"], private=False)
        write_pem(paths.server_pem, files["server_cert"], key)
        write_pem(paths.client_pem, files["client_cert"], key)
        atomic_write(paths.cluster_domain_secret, files["domain_secret"], mode=0o600)
        atomic_write(paths.confd_hmac_key, files["hmac_key"], mode=0o600)
        if files["rapi_pem"]:
            atomic_write(paths.rapi_pem, files["rapi_pem"], mode=0o600)
        write_ssconf_values(paths, files["ssconf"])

    def leave(self) -> None:
        """Remove the cluster files and wait for a join again (with a new key)."""
        if self.paths.config_db.exists():
            raise errors.OpExecError(
                "This node holds the cluster configuration (the master); it cannot leave"
            )
        for path in [
            *cluster_files(self.paths),
            node_key_file(self.paths),
            join_cert_file(self.paths),
        ]:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self.fence.forget()
        asyncio.get_running_loop().call_soon(self._switch, False)


def _checked_files(body: dict[str, Any], token: J.JoinToken, key: bytes) -> dict[str, Any]:
    """The files of ``finish``, checked against the token's CA and the node's key."""
    from corral.crypto import certs

    try:
        ca = str(body["ca_cert"]).encode("ascii")
        server, client = (str(body[k]).encode("ascii") for k in ("server_cert", "client_cert"))
        secret = str(body["domain_secret"]).encode("ascii")
        hmac_key = str(body["hmac_key"]).encode("ascii")
        rapi = body.get("rapi_pem")
        ssconf = dict(body["ssconf"])
    except (KeyError, TypeError, ValueError, UnicodeError) as err:
        raise errors.ParameterError(f"join finish: incomplete or invalid files ({err})") from None
    if J.pem_fingerprint(ca) != token.ca_fingerprint:
        raise errors.OpPrereqError(
            "The cluster CA the master sent is not the one named in this node's join token;"
            " nothing was changed"
        )
    for cert in (server, client):
        if not certs.verify_signed_by(cert, ca) or not certs.same_public_key(cert, key):
            raise errors.OpPrereqError("The master sent a certificate not for this node's key")
    return {
        "ca_cert": ca,
        "server_cert": server,
        "client_cert": client,
        "domain_secret": secret,
        "hmac_key": hmac_key,
        "rapi_pem": str(rapi).encode("ascii") if rapi else b"",
        "ssconf": {str(k): str(v) for k, v in ssconf.items()},
    }


def write_ssconf_values(paths: Paths, values: dict[str, str]) -> None:
    """Write the ssconf files ``values`` names (key: value, see :mod:`corral.ssconf_files`)."""
    for name, value in values.items():
        if not ssconf_files.KEY_RE.match(name):
            raise errors.OpExecError(f"Invalid ssconf key {name!r}")
        path = paths.ssconf_file(name)
        data = ssconf_files.file_data(value)
        with contextlib.suppress(OSError):
            if path.read_bytes() == data:
                continue
        atomic_write(path, data, mode=0o444)


async def join_step(membership: Membership, step: str, data: bytes) -> WireReply:
    """``hello`` or ``finish`` with the request body ``data``: JSON
    ``[success, payload]`` as RPC answers."""
    if membership.joined:
        return _reply(False, J.NOT_JOINING, status=403)
    try:
        body = json.loads(data)
        if not isinstance(body, dict):
            raise ValueError("not an object")
    except ValueError as err:
        return _reply(False, f"Invalid join request: {err}", status=400)
    try:
        if step == "hello":
            return _reply(True, await membership.hello(body))
        membership.finish(body)
        log.info(
            "Joined the cluster (CA %s)", J.pem_fingerprint(membership.paths.ca_cert.read_bytes())
        )
        return _reply(True, None)
    except errors.GenericError as err:
        log.warning("Join %s refused: %s", step, err.message)
        return _reply(False, err.message)


async def serve_join(request: web.Request, membership: Membership, step: str) -> web.Response:
    """``/join/hello`` and ``/join/finish`` (:func:`join_step`) on noded's server."""
    answer = await join_step(membership, step, await request.read())
    return web.Response(body=answer.body, status=answer.status, content_type="application/json")
