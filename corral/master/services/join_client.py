"""The master's side of the join exchange (:mod:`corral.node.join_protocol`).

The node waiting to join presents a self-signed certificate: TLS here does not
verify it, but records its fingerprint, and the node's proof must be bound to
that very fingerprint (:meth:`JoinSession.hello`).  Nothing secret is sent
before that proof checks out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from typing import Any

from corral import constants as C
from corral import errors
from corral.node import join_protocol as J
from corral.paths import Paths
from corral.storage.units import StorageUnit

# The whole exchange is small; a node that takes longer is not joining.
JOIN_TIMEOUT = 60.0
CONNECT_TIMEOUT = 10.0
# The node's answers are a few kilobytes (a certificate request, capabilities).
MAX_ANSWER = 1024 * 1024


def _client_context(paths: Paths) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    # The node's certificate is self-signed; the token's proof authenticates it.
    ctx.verify_mode = ssl.CERT_NONE
    # A node of this cluster asks for a client certificate: it then answers that
    # it is in a cluster already, rather than failing the handshake.
    ctx.load_cert_chain(paths.client_pem)
    return ctx


class JoinSession:
    """One join exchange with the node daemon at ``address``: both requests on
    one TLS connection, whose certificate fingerprint the proofs are bound to."""

    def __init__(self, paths: Paths, node_name: str, address: str, port: int) -> None:
        self.node_name = node_name
        self._address, self._port = address, port
        self._where = f"{address}:{port}"
        self._ctx = _client_context(paths)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.master_nonce = J.new_nonce()
        self.fingerprint: str | None = None

    async def __aenter__(self) -> JoinSession:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self._address, self._port, ssl=self._ctx),
                CONNECT_TIMEOUT,
            )
        except ssl.SSLError as err:
            raise errors.OpPrereqError(
                f"The node daemon at {self._where} refused the TLS handshake ({err.reason});"
                " is it in another cluster?",
                C.ECODE_ENVIRON,
            ) from None
        except (OSError, TimeoutError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else "timed out"
            raise errors.OpPrereqError(
                f"Cannot reach the node daemon of {self.node_name} at {self._where}: {reason};"
                " start corral-noded on the node (without cluster certificates it waits"
                " for a join)",
                C.ECODE_ENVIRON,
            ) from None
        self._reader, self._writer = reader, writer
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object else None
        if not der:
            await self.__aexit__()
            raise errors.OpExecError(f"No certificate from the node daemon at {self._where}")
        self.fingerprint = J.fingerprint(der)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await self._writer.wait_closed()
            self._writer = None

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        """The node's payload (HTTP/1.1 on the session's connection)."""
        assert self._reader is not None and self._writer is not None
        data = json.dumps(body).encode("utf-8")
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self._where}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        try:
            self._writer.write(head.encode("ascii") + data)
            answer = await asyncio.wait_for(self._read_answer(), JOIN_TIMEOUT)
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError) as err:
            raise errors.OpPrereqError(
                f"The join exchange with {self._where} broke off: {err or 'timed out'}",
                C.ECODE_ENVIRON,
            ) from None
        return self._payload(answer)

    async def _read_answer(self) -> bytes:
        assert self._reader is not None
        head = await self._reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if not 0 <= length <= MAX_ANSWER:
            raise OSError(f"answer of {length} bytes")
        return await self._reader.readexactly(length)

    def _payload(self, data: bytes) -> Any:
        try:
            success, payload = json.loads(data)
        except (ValueError, TypeError):
            text = data[:200].decode("utf-8", "replace")
            raise errors.OpPrereqError(
                f"The daemon at {self._where} does not speak the join exchange: {text!r}",
                C.ECODE_ENVIRON,
            ) from None
        if not success:
            raise errors.OpPrereqError(
                f"Node {self.node_name} cannot join: {payload}", C.ECODE_ENVIRON
            )
        return payload

    async def hello(self, storage_units: list[StorageUnit]) -> dict[str, Any]:
        """The node's answer: token id, nonce, proof, CSR, version, capabilities
        (checked against the cluster's ``storage_units``)."""
        body = {
            "master_nonce": self.master_nonce,
            "storage_units": [unit.to_wire() for unit in storage_units],
            "node_name": self.node_name,
        }
        payload = await self._post(J.HELLO_PATH, body)
        if not isinstance(payload, dict):
            raise errors.OpExecError(f"Invalid join answer from {self._where}")
        return payload

    def check_node_proof(self, key: bytes, hello: dict[str, Any]) -> None:
        """The node knows the token's key, and bound its proof to the certificate we saw."""
        assert self.fingerprint is not None
        expected = J.proof(
            key,
            J.ROLE_NODE,
            str(hello["token_id"]),
            self.master_nonce,
            str(hello["node_nonce"]),
            self.fingerprint,
        )
        if not J.proof_matches(expected, hello.get("proof")):
            raise errors.OpPrereqError(
                f"The node at {self._where} did not prove knowledge of its join token for the"
                f" certificate it presented (fingerprint {self.fingerprint}): a wrong token"
                " or a man in the middle; nothing was sent to it",
                C.ECODE_ENVIRON,
            )

    async def finish(self, key: bytes, hello: dict[str, Any], files: dict[str, Any]) -> None:
        """Send our proof and the cluster files; the node then is in the cluster."""
        assert self.fingerprint is not None
        token_id, node_nonce = str(hello["token_id"]), str(hello["node_nonce"])
        our_proof = J.proof(
            key, J.ROLE_MASTER, token_id, self.master_nonce, node_nonce, self.fingerprint
        )
        await self._post(J.FINISH_PATH, {"node_nonce": node_nonce, "proof": our_proof, **files})
