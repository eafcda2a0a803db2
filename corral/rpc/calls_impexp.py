"""The node calls of exports, imports and moves between clusters.

An import listens for one disk stream and writes it to a destination; an
export sends a source to an import's port (:mod:`corral.node.impexp`); the
master follows both with ``impexp_wait`` (``impexp_status`` once one
ended or after a short wait) and ends them with
``impexp_abort``/``impexp_cleanup``.  ``x509_cert_*`` make and remove the
per-move keys of a move between clusters; the ``export_*`` calls manage the
finished exports in the node's export directory.

A stream's ``instance`` is as much of the instance descriptor as its end
needs (its disks' descriptions for a disk, its OS parameters for a script):
the node checks it for the kind of end it opens.
"""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import TypedDict

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import JsonObject

# The node answers impexp_wait within its timeout (capped at 30 s there).
_WAIT_CAP = 30.0


class ImpExpOptions(TypedDict, total=False):
    """The options of a stream (``corral.node.impexp.service.check_options``)."""

    key_name: str | None
    ca_pem: str | None
    compress: str
    magic: str
    connect_timeout: float
    bind_address: str | None
    size: int | None


def _wait_timeout(args: Sequence[Any]) -> float:
    try:
        wait = min(max(float(args[1]), 0.0), _WAIT_CAP)
    except (TypeError, ValueError, IndexError):
        wait = 0.0  # the node refuses it at once
    return wait + C.RPC_TMO_URGENT


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def x509_cert_create(validity: int) -> list[str]:
    """Make a key and self-signed certificate for a move: ``[name, cert_pem]``."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def x509_cert_remove(name: str) -> None:
    """Remove a per-move key."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def import_start(
    opts: ImpExpOptions, instance: JsonObject, component: str, dest: str, dest_args: JsonObject
) -> str:
    """Listen for one disk stream and write it to the destination: the import's name."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def export_start(
    opts: ImpExpOptions,
    host: str,
    port: int,
    instance: JsonObject,
    component: str,
    source: str,
    source_args: JsonObject,
) -> str:
    """Send a source to an import's port: the export's name."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def impexp_status(names: list[str]) -> list[JsonObject | None]:
    """Progress of imports/exports (Ganeti's ImportExportStatus; None: unknown)."""


@node_call(_wait_timeout, effect=READS)
def impexp_wait(names: list[str], timeout: float) -> list[JsonObject | None]:
    """Progress of imports/exports once one of them ended, or after timeout seconds."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def impexp_abort(name: str) -> None:
    """Stop an import/export."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def impexp_cleanup(name: str) -> None:
    """Forget an import/export."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def export_list() -> list[str]:
    """The exports kept on the node."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def export_info(name: str) -> str:
    """The config.ini of an export."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def finalize_export(instance_name: str, config_text: str) -> None:
    """Write an export's config.ini and make the export the current one."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES)
def export_remove(name: str) -> None:
    """Remove an export."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES)
def export_discard(instance_name: str) -> bool:
    """Remove an unfinished export (<instance>.new): whether there was one."""


@node_call(C.RPC_TMO_URGENT, effect=CHANGES)
def test_impexp_gate(closed: bool) -> None:
    """Pause exports after their first frame (for tests)."""
