"""The master's one-time join tokens (``gnt-node join-token``).

Kept in masterd's durable state (``join-tokens/<id>``): per token id the hash
of its secret (:func:`corral.node.join_protocol.token_key`), its expiry,
whether it was used, and the join exchange that holds it right now.  A join
reserves its token before it sends the node anything, marks it used once the
node accepted, and gives it back if the join failed: a failed join leaves the
token usable, and two joins never share one (a check and its change are one
step: the state answers from memory).  A reservation lapses after
RESERVE_TTL (a master that died mid-join).
"""

from __future__ import annotations

import time
from typing import Any

from corral import constants as C
from corral import errors
from corral.node import join_protocol as J
from corral.services.durable import DurableState

PREFIX = "join-tokens/"
DEFAULT_TTL = 3600
# Seconds a join exchange holds its token at most: longer than the exchange
# may take (corral.services.join_client's time-outs).
RESERVE_TTL = 300.0
# Used and expired tokens are kept this long (for clear messages), then dropped.
_KEEP_AFTER = 7 * 24 * 3600


async def create(state: DurableState, ca_fingerprint: str, ttl: int = DEFAULT_TTL) -> str:
    """A new token valid for ``ttl`` seconds; its text (the secret is not kept)."""
    now = time.time()
    for key, entry in state.scan(PREFIX).items():
        if entry["expires"] + _KEEP_AFTER < now:
            await state.delete(key)
    token = J.new_token(ca_fingerprint)
    entry = {"key": J.token_key(token.secret).hex(), "expires": now + ttl, "used": False}
    await state.put(PREFIX + token.token_id, entry)
    return token.text()


def _usable(token_id: object, entry: dict[str, Any] | None, holder: str | None) -> dict[str, Any]:
    if entry is None:
        raise errors.OpPrereqError(
            f"The node's join token ({token_id}) was not made by this cluster's master;"
            " give the node a token from 'gnt-node join-token'",
            C.ECODE_INVAL,
        )
    if entry["used"]:
        raise errors.OpPrereqError(
            f"The node's join token ({token_id}) was used already; a token joins one node"
            " once: make a new one with 'gnt-node join-token'",
            C.ECODE_INVAL,
        )
    if entry["expires"] < time.time():
        raise errors.OpPrereqError(
            f"The node's join token ({token_id}) has expired; make a new one with"
            " 'gnt-node join-token'",
            C.ECODE_INVAL,
        )
    reserved = entry.get("reserved")
    if reserved and reserved["until"] > time.time() and reserved["holder"] != holder:
        raise errors.OpPrereqError(
            f"The node's join token ({token_id}) is in use by another join right now;"
            " a token joins one node: try again once that join ended, or make a new"
            " token with 'gnt-node join-token'",
            C.ECODE_STATE,
        )
    return entry


def _entry(state: DurableState, token_id: object, holder: str | None = None) -> dict[str, Any]:
    """A copy of the token's entry if a join (``holder``, if it reserved it) may use it."""
    entry = state.get(PREFIX + token_id) if isinstance(token_id, str) else None
    return _usable(token_id, None if entry is None else dict(entry), holder)


def key_of(state: DurableState, token_id: object) -> bytes:
    """The key of a usable token; OpPrereqError if it is unknown, used,
    expired or held by another join."""
    return bytes.fromhex(_entry(state, token_id)["key"])


async def reserve(state: DurableState, token_id: str, holder: str) -> None:
    """Hold a usable token for the join exchange ``holder`` (checking again
    that it is usable): no other join can use it until it is used or released."""
    entry = _entry(state, token_id, holder)
    entry["reserved"] = {"holder": holder, "until": time.time() + RESERVE_TTL}
    await state.put(PREFIX + token_id, entry)


async def use(state: DurableState, token_id: str, holder: str) -> None:
    """Mark a token used: the join ``holder`` reserved it for succeeded."""
    entry = _entry(state, token_id, holder)
    entry["used"] = True
    entry.pop("reserved", None)
    await state.put(PREFIX + token_id, entry)


async def release(state: DurableState, token_id: str, holder: str) -> None:
    """Give back a token ``holder`` reserved: its join failed, the token stays usable."""
    entry = state.get(PREFIX + token_id)
    if entry is not None and (entry.get("reserved") or {}).get("holder") == holder:
        await state.put(PREFIX + token_id, {k: v for k, v in entry.items() if k != "reserved"})
