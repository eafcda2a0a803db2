"""The master's side of the join exchange (:mod:`corral.node.join_protocol`).

The node waiting to join presents a self-signed certificate: TLS here does not
verify it, but records its fingerprint, and the node's proof must be bound to
that very fingerprint (:meth:`JoinSession.hello`).  Nothing secret is sent
before that proof checks out.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.node import join_protocol as J

if TYPE_CHECKING:
    from corral.rpc.transport import Transport
    from corral.storage.units import StorageUnit

# The whole exchange is small; a node that takes longer is not joining.
JOIN_TIMEOUT = 60.0
CONNECT_TIMEOUT = 10.0


class JoinSession:
    """One join exchange with the node daemon at ``address`` (reached through
    ``transport``): both requests on one connection, whose certificate
    fingerprint the proofs are bound to."""

    def __init__(self, transport: Transport, node_name: str, address: str) -> None:
        self.node_name = node_name
        self._channel = transport.join_channel(address)
        self._where = self._channel.where
        self.master_nonce = J.new_nonce()
        self.fingerprint: str | None = None

    async def __aenter__(self) -> JoinSession:
        try:
            await asyncio.wait_for(self._channel.connect(), CONNECT_TIMEOUT)
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
        der = self._channel.peer_cert
        if not der:
            await self.__aexit__()
            raise errors.OpExecError(f"No certificate from the node daemon at {self._where}")
        self.fingerprint = J.fingerprint(der)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._channel.close()

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        """The node's payload."""
        data = json.dumps(body).encode("utf-8")
        try:
            answer = await asyncio.wait_for(self._channel.post(path, data), JOIN_TIMEOUT)
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError) as err:
            raise errors.OpPrereqError(
                f"The join exchange with {self._where} broke off: {err or 'timed out'}",
                C.ECODE_ENVIRON,
            ) from None
        return self._payload(answer)

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
