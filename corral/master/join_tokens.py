"""The master's one-time join tokens (``gnt-node join-token``).

One JSON file, 0600, in the data directory: per token id the hash of its
secret (:func:`corral.node.join_protocol.token_key`), its expiry, whether it
was used, and the join exchange that holds it right now.  A join reserves
its token before it sends the node anything, marks it used once the node
accepted, and gives it back if the join failed: a failed join leaves the
token usable, and two joins never share one.  A reservation lapses after
RESERVE_TTL (a master that died mid-join).  A lock file serialises the
command that adds tokens and masterd that uses them.  Stdlib only (the gnt-*
commands use it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time

from corral import constants as C
from corral import errors
from corral import paths as P
from corral.node import join_protocol as J

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

TOKENS_FILE = "join-tokens.json"
DEFAULT_TTL = 3600
# Seconds a join exchange holds its token at most: longer than the exchange
# may take (corral.master.services.join_client's time-outs).
RESERVE_TTL = 300.0
# Used and expired tokens are kept this long (for clear messages), then dropped.
_KEEP_AFTER = 7 * 24 * 3600


def _file(root: str) -> str:
    return P.below(root, f"{P.DATA_DIR}/{TOKENS_FILE}")


@contextlib.contextmanager
def _locked(root: str) -> Iterator[dict[str, Any]]:
    """The tokens, locked; written back (atomically, 0600) when the block ends."""
    path = _file(root)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            with open(path) as file:
                tokens: dict[str, Any] = json.load(file)
        except FileNotFoundError:
            tokens = {}
        except ValueError:
            raise errors.ConfigurationError(f"The join token file {path} is corrupt") from None
        before = json.dumps(tokens, sort_keys=True)
        yield tokens
        now = time.time()
        for token_id in [k for k, v in tokens.items() if v["expires"] + _KEEP_AFTER < now]:
            del tokens[token_id]
        if json.dumps(tokens, sort_keys=True) != before:
            tmp = f"{path}.tmp"
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
                json.dump(tokens, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
    finally:
        os.close(fd)


def create(root: str, ca_fingerprint: str, ttl: int = DEFAULT_TTL) -> str:
    """A new token valid for ``ttl`` seconds; its text (the secret is not kept)."""
    token = J.new_token(ca_fingerprint)
    with _locked(root) as tokens:
        tokens[token.token_id] = {
            "key": J.token_key(token.secret).hex(),
            "expires": time.time() + ttl,
            "used": False,
        }
    return token.text()


def _usable(tokens: dict[str, Any], token_id: object, holder: str | None = None) -> dict[str, Any]:
    """The token's entry if a join (``holder``, if it reserved it) may use it."""
    entry: dict[str, Any] | None = tokens.get(token_id) if isinstance(token_id, str) else None
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


def key_of(root: str, token_id: object) -> bytes:
    """The key of a usable token; OpPrereqError if it is unknown, used,
    expired or held by another join."""
    with _locked(root) as tokens:
        return bytes.fromhex(_usable(tokens, token_id)["key"])


def reserve(root: str, token_id: str, holder: str) -> None:
    """Hold a usable token for the join exchange ``holder`` (checking again
    that it is usable): no other join can use it until it is used or released."""
    with _locked(root) as tokens:
        entry = _usable(tokens, token_id, holder)
        entry["reserved"] = {"holder": holder, "until": time.time() + RESERVE_TTL}


def use(root: str, token_id: str, holder: str) -> None:
    """Mark a token used: the join ``holder`` reserved it for succeeded."""
    with _locked(root) as tokens:
        entry = _usable(tokens, token_id, holder)
        entry["used"] = True
        entry.pop("reserved", None)


def release(root: str, token_id: str, holder: str) -> None:
    """Give back a token ``holder`` reserved: its join failed, the token stays usable."""
    with _locked(root) as tokens:
        entry = tokens.get(token_id)
        if entry is not None and (entry.get("reserved") or {}).get("holder") == holder:
            del entry["reserved"]
