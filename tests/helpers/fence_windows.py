"""The fence windows in noded's logs, and whether masters' windows overlap.

noded logs, when a fence token goes out of force on a node (a newer one
comes, noded stops), the times of the first and the last fenced call that
token let in there (``corral.node.fencing.WINDOW_LINE``), on the machine's
clock, which every node of a test bed shares.  A token's window across the
cluster runs from its first call let in on any node to its last on any
node.  The windows of two masters must not overlap, and must come in the
order of their tokens: a deposed master's call let in anywhere after its
successor's first is a call of a master that was no longer the master.

Refusals are logged one line each ("Refused <call>: fence token T, older
than N", or "..., its lease ended S s before the call came"), past a burst
only counted ("Suppressed K similar messages ...":
corral.process.lograte); both are counted here.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

WINDOW = re.compile(
    r"Fence token (\d+) window: (\d+) calls let in from (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?)"
)
# Refused as older than the newest token, or as come after its lease ended.
REFUSED = re.compile(r"Refused \S+: fence token (\d+), ")
SUPPRESSED = re.compile(r"Suppressed (\d+) similar messages in \S+ s: Refused %s: fence token")
# masterd's lines for what a deposed master tried: a write etcd refused
# (corral.state.etcd.keyspace), a fenced node call it did not send once its
# lease may have run out (corral.rpc.client); each with its summary line.
MASTERD_REFUSALS = {
    "writes": re.compile(r"Write refused: Refused to write"),
    "calls": re.compile(r"Fenced call refused: RPC call"),
}
MASTERD_SUPPRESSED = {
    "writes": re.compile(r"Suppressed (\d+) similar messages in \S+ s: Write refused: %s"),
    "calls": re.compile(r"Suppressed (\d+) similar messages in \S+ s: Fenced call refused: %s"),
}


@dataclass(frozen=True)
class Window:
    """The fenced calls one node let in with one token."""

    node: str
    token: int
    calls: int
    first: float
    last: float


@dataclass
class NodeLog:
    """What one node's log says: its windows and the calls it refused."""

    windows: list[Window] = field(default_factory=list)
    refused: dict[int, int] = field(default_factory=dict)  # token -> calls
    refused_uncounted: int = 0  # suppressed refusal lines: tokens unknown


def parse(node: str, lines: Iterable[str]) -> NodeLog:
    """The windows and refusals in the log ``lines`` of node ``node``."""
    found = NodeLog()
    for line in lines:
        if match := WINDOW.search(line):
            token, calls, first, last = match.groups()
            found.windows.append(Window(node, int(token), int(calls), float(first), float(last)))
        elif match := REFUSED.search(line):
            token = int(match.group(1))
            found.refused[token] = found.refused.get(token, 0) + 1
        elif match := SUPPRESSED.search(line):
            found.refused_uncounted += int(match.group(1))
    return found


def read(logs: dict[str, Path]) -> list[NodeLog]:
    """Parse each node's log file (``{node name: noded's log}``)."""
    return [parse(node, path.read_text().splitlines()) for node, path in logs.items()]


@dataclass(frozen=True)
class Span:
    """One token's window across the cluster."""

    token: int
    first: float
    last: float
    calls: int


@dataclass
class Verdict:
    """The windows checked: overlaps (empty: none), refusals, calls let in."""

    spans: list[Span]
    overlaps: list[str]
    late: list[Window]  # calls let in with a token after its successor's first call
    refused: int
    calls: int

    def __bool__(self) -> bool:
        return not self.overlaps and not self.late

    def __str__(self) -> str:
        tokens = ", ".join(f"{s.token}: {s.calls}" for s in self.spans)
        state = "no overlap" if self else "; ".join(self.overlaps)
        return (
            f"{len(self.spans)} fence windows ({state}); calls let in per token: {tokens};"
            f" {self.refused} refused, {len(self.late)} let in late"
        )


def spans(windows: Iterable[Window]) -> list[Span]:
    """Each token's window across all nodes, by token."""
    by_token: dict[int, list[Window]] = {}
    for window in windows:
        by_token.setdefault(window.token, []).append(window)
    return [
        Span(
            token,
            min(w.first for w in group),
            max(w.last for w in group),
            sum(w.calls for w in group),
        )
        for token, group in sorted(by_token.items())
    ]


def check(logs: Iterable[NodeLog]) -> Verdict:
    """Whether the tokens' windows across all nodes neither overlap nor come
    out of token order; which nodes let a deposed token's calls in late."""
    logs = list(logs)
    windows = [w for log in logs for w in log.windows]
    found = spans(windows)
    overlaps = [
        f"token {a.token}'s calls ({a.first:.6f} to {a.last:.6f}) reach past token"
        f" {b.token}'s first ({b.first:.6f})"
        for a, b in itertools.pairwise(found)
        if a.last >= b.first
    ]
    late = [w for w in windows if any(s.token > w.token and w.last >= s.first for s in found)]
    refused = sum(sum(log.refused.values()) + log.refused_uncounted for log in logs)
    return Verdict(found, overlaps, late, refused, sum(w.calls for w in windows))


def masterd_refusals(masterd_log: Path) -> dict[str, int]:
    """What one masterd's log says it was refused as a deposed master:
    ``{"writes": etcd's refusals, "calls": fenced node calls not sent}``."""
    counts = dict.fromkeys(MASTERD_REFUSALS, 0)
    for line in masterd_log.read_text().splitlines():
        for kind, pattern in MASTERD_REFUSALS.items():
            if pattern.search(line):
                counts[kind] += 1
            elif match := MASTERD_SUPPRESSED[kind].search(line):
                counts[kind] += int(match.group(1))
    return counts
