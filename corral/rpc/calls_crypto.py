"""Node calls of ``gnt-cluster renew-crypto``: a node's new key and the
certificates the master signs for it (:mod:`corral.node.cert_renewal`)."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, node_call


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES, cluster_client_only=True)
def node_cert_request() -> str:
    """A certificate request (PEM) for a new key of the node's; the key stays
    on the node until ``node_cert_install`` brings its certificate."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES, cluster_client_only=True)
def node_cert_install(
    ca_bundle: str, cert: str | None, with_client: bool, keep_connections: bool
) -> None:
    """Trust the CAs of ``ca_bundle`` (PEM); with ``cert``, serve with it and the
    requested key (and call other nodes with them, ``with_client``); then take
    new connections under these, and the older ones if ``keep_connections``."""
