"""Calls of ``gnt-cluster renew-crypto``: a new key's certificate request,
then the certificate and CAs the master sends (:mod:`corral.node.cert_renewal`)."""

from __future__ import annotations

import asyncio

from corral import errors
from corral.node import cert_renewal
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.join_server import Membership
from corral.rpc import calls_crypto as calls


def _membership(ctx: NodeContext) -> Membership:
    if ctx.membership is None:
        raise errors.OpExecError("This node daemon cannot renew its certificates")
    return ctx.membership


@rpc_handler(calls.node_cert_request)
async def node_cert_request(ctx: NodeContext) -> str:
    """A request for a new key's certificate; the key waits in memory."""
    membership = _membership(ctx)
    key, csr = await asyncio.to_thread(cert_renewal.make_request, ctx.paths)
    membership.pending_key = key
    return csr


@rpc_handler(calls.node_cert_install)
async def node_cert_install(
    ctx: NodeContext, ca_bundle: str, cert: str | None, with_client: bool, keep_connections: bool
) -> None:
    """Write the CAs (and the certificate with the pending key), then serve with them."""
    membership = _membership(ctx)
    key = membership.pending_key if cert is not None else None
    await asyncio.to_thread(cert_renewal.install, ctx.paths, key, ca_bundle, cert, with_client)
    if cert is not None:
        membership.pending_key = None
    membership.reload(keep_connections=keep_connections)
