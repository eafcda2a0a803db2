"""Separate network stacks for the nodes of a test cluster.

Each node gets a network namespace of its own with one veth whose peer sits
on a bridge in a "hub" namespace, and an address of ``10.213.0.0/24`` that
exists only inside these namespaces: nothing the nodes send can leave them.
Every name carries a random suffix (parallel runs do not collide) and
everything made here is removed again on exit, also after a failure.

Typical use::

    with NetnsBed(3) as bed:
        subprocess.run(bed.wrap(1, ["corral-noded", "--bind", bed.address(1), ...]))
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from types import TracebackType

from pyroute2 import IPRoute, NetNS, netns  # type: ignore[import-untyped]

SUBNET = "10.213.0"
PREFIX = 24


class NetnsBed:
    """``count`` node namespaces (numbered from 1) joined by a bridge; each
    node's interface is named ``ifname`` if given (the same in every
    namespace, as a cluster's master_netdev is), else by the bed and node."""

    def __init__(self, count: int, ifname: str | None = None) -> None:
        if not 1 <= count <= 200:
            raise ValueError(f"A bed has 1 to 200 nodes, not {count}")
        self.count = count
        self.tag = secrets.token_hex(3)
        self.hub = f"crl{self.tag}hub"
        self._made: list[str] = []
        self._ifname = ifname

    def namespace(self, node: int) -> str:
        """The name of node ``node``'s namespace."""
        return f"crl{self.tag}n{node}"

    def address(self, node: int) -> str:
        """Node ``node``'s address, reachable from the other nodes only."""
        return f"{SUBNET}.{node + 1}"

    def interface(self, node: int) -> str:
        """The name of node ``node``'s veth, inside its namespace."""
        return self._ifname or f"v{self.tag}n{node}"

    def wrap(self, node: int, argv: list[str]) -> list[str]:
        """``argv`` run inside node ``node``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node), *argv]

    def __enter__(self) -> NetnsBed:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _create(self) -> None:
        netns.create(self.hub)
        self._made.append(self.hub)
        bridge = f"br{self.tag}"
        with NetNS(self.hub) as hub:
            hub.link("add", ifname=bridge, kind="bridge")
            _up(hub, bridge)
            _up(hub, "lo")
        for node in range(1, self.count + 1):
            self._add_node(node, bridge)

    def _add_node(self, node: int, bridge: str) -> None:
        name = self.namespace(node)
        netns.create(name)
        self._made.append(name)
        inside, outside = self.interface(node), f"v{self.tag}h{node}"
        # Both ends are made in the node's namespace, then one moves to the hub.
        with NetNS(name) as ns:
            ns.link("add", ifname=inside, kind="veth", peer=outside)
            ns.link("set", index=_index(ns, outside), net_ns_fd=self.hub)
            index = _index(ns, inside)
            ns.addr("add", index=index, address=self.address(node), prefixlen=PREFIX)
            _up(ns, inside)
            _up(ns, "lo")
        with NetNS(self.hub) as hub:
            port = _index(hub, outside)
            hub.link("set", index=port, master=_index(hub, bridge))
            _up(hub, outside)

    def close(self) -> None:
        """Remove every namespace made (their veths and the bridge go with them)."""
        while self._made:
            name = self._made.pop()
            with contextlib.suppress(OSError):
                netns.remove(name)


def _index(ipr: IPRoute | NetNS, ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise RuntimeError(f"No interface {ifname}")
    return int(found[0])


def _up(ipr: IPRoute | NetNS, ifname: str) -> None:
    ipr.link("set", index=_index(ipr, ifname), state="up")


@contextlib.contextmanager
def netns_bed(count: int) -> Iterator[NetnsBed]:
    """A :class:`NetnsBed` of ``count`` nodes for the ``with`` block."""
    with NetnsBed(count) as bed:
        yield bed
