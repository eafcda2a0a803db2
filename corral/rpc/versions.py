"""Software versions on node calls, and what a cluster of mixed versions does.

Every node call carries its sender's Corral release (``X-Corral-Version``)
and node-call protocol version (``X-Corral-Node-Calls``); every answer of
noded carries the node's own.  :data:`NODE_CALLS` counts the incompatible
changes of the node calls (a call removed, its arguments or its answer
changed in a way the other side would misread); adding a call does not
change it.  Corral that sends no version (before versioned node calls, e.g.
200d382) counts as node calls 0.

The rules, which make a rolling upgrade possible, one node at a time:

- a master and a node whose node-call versions are at most :data:`MAX_SKEW`
  apart work together: the master upgraded first runs its older nodes, and
  a node upgraded before its master answers it;
- a call the node cannot do (it has no such call, or takes other arguments)
  fails with an error naming the node, both versions and what to upgrade,
  and the node changes nothing; any other failure of a node whose node calls
  differ names both versions too (:func:`failure`);
- versions further apart are refused before the call runs: noded answers
  HTTP 426 naming both versions and the side to upgrade; a master also
  refuses the answer of such a node (one too old to refuse by itself).

Operators see each node's release and node-call version in ``gnt-cluster
verify`` (``ENODEVERSION``).  Stdlib only, and none of the slow modules
(no dataclasses, no typing): noded, masterd and the gnt-* commands import it.
"""

from __future__ import annotations

import corral

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Callable

NODE_CALLS = 1
MAX_SKEW = 1
RELEASE_HEADER = "X-Corral-Version"
CALLS_HEADER = "X-Corral-Node-Calls"
# noded's answer to a caller whose version is too far from its own.
MISMATCH_STATUS = 426
# Answers of noded to a call it cannot do: no such call, or arguments it refuses.
CANNOT_DO = frozenset({400, 404})


class Version:
    """A side's Corral release and node-call protocol version."""

    __slots__ = ("calls", "release")

    def __init__(self, release: str, calls: int) -> None:
        self.release = release
        self.calls = calls

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and (other.release, other.calls) == (
            self.release,
            self.calls,
        )

    def __hash__(self) -> int:
        return hash((self.release, self.calls))

    def __repr__(self) -> str:
        return f"Version({self.release!r}, {self.calls})"

    def __str__(self) -> str:
        if self == UNVERSIONED:
            return "a Corral from before versioned node calls"
        return f"Corral {self.release} (node calls {self.calls})"


OWN = Version(corral.__version__, NODE_CALLS)
# A side that sent no version.
UNVERSIONED = Version("unknown", 0)


def headers() -> dict[str, str]:
    """The headers that say this side's version."""
    return {RELEASE_HEADER: OWN.release, CALLS_HEADER: str(OWN.calls)}


def of_headers(get: Callable[[str], str | None]) -> Version:
    """The version said by the headers that ``get`` looks up (a mapping's or
    a message's ``get``): none or unreadable, unversioned."""
    try:
        calls = int(get(CALLS_HEADER) or "")
    except ValueError:
        return UNVERSIONED
    return Version(get(RELEASE_HEADER) or "unknown", calls)


def too_far(master: Version, node: Version, node_name: str) -> str | None:
    """Why ``master`` and ``node`` cannot work together (None: they can)."""
    if abs(master.calls - node.calls) <= MAX_SKEW:
        return None
    older = f"node {node_name}" if node.calls < master.calls else "the master"
    return (
        f"Node {node_name} runs {node} and the master runs {master}: versions more than"
        f" {MAX_SKEW} apart do not work together; upgrade {older} first"
    )


def failure(call: str, node: Version, node_name: str, message: str, status: int) -> str:
    """The error of a call that failed on a node of another version: a call
    the node refused as unknown or malformed says it cannot do it and what
    to upgrade; another failure says both versions when their node calls
    differ (the node may have failed for it).  Else the node's message."""
    if node == OWN:
        return message
    if status in CANNOT_DO:
        upgrade = f"upgrade node {node_name}" if node.calls <= OWN.calls else "upgrade the master"
        return (
            f"Node {node_name} runs {node}, which cannot do {call} as the master running"
            f" {OWN} asks ({message}); {upgrade}"
        )
    if node.calls != OWN.calls:
        return f"{message} (node {node_name} runs {node}, the master {OWN})"
    return message
