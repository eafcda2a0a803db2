"""The node RPC calls of exports, imports and moves between clusters.

An import listens for one disk stream and writes it to a destination; an
export sends a source to an import's port (:mod:`corral.node.impexp`); the
master follows both with ``impexp_wait`` (``impexp_status`` once one
ended or after a short wait) and ends them with
``impexp_abort``/``impexp_cleanup``.  ``x509_cert_*`` make and remove the
per-move keys of a move between clusters; the ``export_*`` calls manage the
finished exports in the node's export directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corral import constants as C
from corral.rpc.calls import RpcCall

# The node answers impexp_wait within its timeout (capped at 30 s there).
_WAIT_CAP = 30.0


def _wait_timeout(args: Sequence[Any]) -> float:
    try:
        wait = min(max(float(args[1]), 0.0), _WAIT_CAP)
    except (TypeError, ValueError, IndexError):
        wait = 0.0  # the node refuses it at once
    return wait + C.RPC_TMO_URGENT


IMPEXP_CALLS = (
    RpcCall(
        "x509_cert_create",
        C.RPC_TMO_NORMAL,
        ("validity",),
        "Make a key and self-signed certificate for a move: [name, cert_pem]",
    ),
    RpcCall("x509_cert_remove", C.RPC_TMO_NORMAL, ("name",), "Remove a per-move key"),
    RpcCall(
        "import_start",
        C.RPC_TMO_NORMAL,
        ("opts", "instance", "component", "dest", "dest_args"),
        "Listen for one disk stream and write it to the destination: the import's name",
    ),
    RpcCall(
        "export_start",
        C.RPC_TMO_NORMAL,
        ("opts", "host", "port", "instance", "component", "source", "source_args"),
        "Send a source to an import's port: the export's name",
    ),
    RpcCall("impexp_status", C.RPC_TMO_FAST, ("names",), "Progress of imports/exports"),
    RpcCall(
        "impexp_wait",
        _wait_timeout,
        ("names", "timeout"),
        "Progress of imports/exports once one of them ended, or after timeout seconds",
    ),
    RpcCall("impexp_abort", C.RPC_TMO_NORMAL, ("name",), "Stop an import/export"),
    RpcCall("impexp_cleanup", C.RPC_TMO_NORMAL, ("name",), "Forget an import/export"),
    RpcCall("export_info", C.RPC_TMO_FAST, ("name",), "The config.ini of an export"),
    RpcCall(
        "finalize_export",
        C.RPC_TMO_NORMAL,
        ("instance_name", "config_text"),
        "Write an export's config.ini and make the export the current one",
    ),
    RpcCall("export_remove", C.RPC_TMO_FAST, ("name",), "Remove an export"),
    RpcCall(
        "export_discard",
        C.RPC_TMO_FAST,
        ("instance_name",),
        "Remove an unfinished export (<instance>.new): whether there was one",
    ),
    RpcCall("test_impexp_gate", C.RPC_TMO_URGENT, ("closed",), "Pause exports (for tests)"),
)
