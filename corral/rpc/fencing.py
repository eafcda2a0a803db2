"""Fence tokens on node calls: how a call carries its master's token, how a node refuses it.

A master acts while it holds the mastership lease, whose token orders every
master there ever was (:mod:`corral.state.ports`).  Every node call that
changes its node (``effect=CHANGES`` in its declaration,
:mod:`corral.rpc.declare`) carries the token of the master that makes it, in
the ``X-Corral-Fence-Token`` header; a call that only reads carries none and
is never refused for it.  A node keeps the newest token it has seen
(:mod:`corral.node.fencing`) and refuses a call with an older one: HTTP 409
with ``[false, <message>]``, which the master's client raises as
:class:`corral.rpc.result.MasterDeposed`.  So a master that was deposed
changes nothing on a node once its successor has called that node, even
before it learns of its successor.  A node its successor has not called yet
would still take it: so masterd's calls also carry the end of its lease
(``X-Corral-Fence-Until``, ``RpcClient.fence_until``); masterd sends none
after it (frozen, cut off from the store) and a node refuses one that comes
after it (held up in the network), as no other master can lead before then.
The nodes' logs show each token's window, which the fault tests check never
overlap across nodes (this assumes the nodes' clocks agree with the
master's to well within the lease).  (Ganeti has nothing of the kind: its new
master "fences" the old one with a best-effort call and by waiting for the
master IP to go.)

Who sends which token:

- masterd: its lease's (``RpcClient.fence``);
- ``gnt-cluster command`` and ``copyfile``, which call the nodes
  themselves: the token of the masterd that named the nodes (luxi
  ``QueryConfigValues`` ``fence_token``, Corral's own field); they act for it;
- anything else that calls noded on its own (tests of a node alone, tests'
  helpers beside a running masterd) sends no header, which counts as
  ``NO_FENCE`` (0), older than every lease's token: a node takes it only
  until a master calls it; beside a running master, the helper sends that
  master's token as it stands in the mastership store.

The console relay and the disk streams are no node calls: root opens the
first from the master at a terminal, and fenced calls (``import_start``,
``transfer_prepare``) set up the others.

Stdlib only: masterd, noded and the gnt-* commands import it.
"""

from __future__ import annotations

import math
from http import HTTPStatus

FENCE_HEADER = "X-Corral-Fence-Token"
# When the calling master's lease ends (epoch seconds): a call that reaches its
# node later is refused, as its master may have been deposed meanwhile.
UNTIL_HEADER = "X-Corral-Fence-Until"
# noded's answer to a call whose token is older than the newest it has seen.
DEPOSED_STATUS = HTTPStatus.CONFLICT.value
# A fence token is a lease's counter: it fits in SQLite's and etcd's integers.
_MAX_TOKEN = (1 << 63) - 1


def header_value(token: int) -> str:
    """The header's value for ``token``."""
    return str(token)


def parse_header(value: str | None) -> int | None:
    """The token a call's header carries (None: no header); ValueError if it
    is not a whole number from 0 to 2**63-1."""
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or int(value) > _MAX_TOKEN:
        raise ValueError(f"Invalid {FENCE_HEADER} header {value[:40]!r}: a whole number expected")
    return int(value)


def until_value(until: float) -> str:
    """The until header's value for the lease end ``until``."""
    return f"{until:.6f}"


def parse_until(value: str | None) -> float | None:
    """The lease end a call's until header carries (None: no header);
    ValueError if it is not a time."""
    if value is None:
        return None
    try:
        until = float(value)
    except ValueError:
        until = math.nan
    if not math.isfinite(until) or until < 0:
        raise ValueError(f"Invalid {UNTIL_HEADER} header {value[:40]!r}: a time expected")
    return until


def late(call: str, token: int, until: float, now: float) -> str:
    """Why a node refuses ``call`` that came after its master's lease ended."""
    return (
        f"Refused {call}: it carries fence token {token}, whose lease ended"
        f" {now - until:.3f} s before the call came; the calling master daemon may"
        " have been deposed meanwhile and must not act any more"
    )


def refusal(call: str, token: int, newest: int) -> str:
    """Why a node refuses ``call`` carrying ``token`` when it has seen ``newest``."""
    return (
        f"Refused {call}: it carries fence token {token}, and this node has taken"
        f" calls of a newer master (token {newest}); the calling master daemon was"
        " deposed and must not act any more"
    )
