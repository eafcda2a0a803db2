"""A kvm guest with an instance communication NIC reaches 169.254.169.254 on
its node, through its own tap, and the tap goes with the guest.  All inside a
network namespace of the test's own (the event loop runs in it)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyroute2 import IPRoute  # type: ignore[import-untyped]

from corral import constants as C
from corral.node.communication import communication_tap
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.spec import NicSpec
from corral.paths import Paths
from tests.helpers.kvm_guest import booted, guest_spec
from tests.helpers.kvm_guest import short_root as kvm_short_root
from tests.helpers.netns_thread import NamespaceThread

GUEST_IP = "169.254.0.5"


@pytest.fixture
def short_root() -> Iterator[Path]:
    with kvm_short_root("kvmc") as root:
        yield root


def _route_device(address: str) -> str | None:
    """The interface the node sends to ``address`` through (None: no route)."""
    with IPRoute() as ipr:
        try:
            oif = ipr.route("get", dst=address)[0].get_attr("RTA_OIF")
        except Exception:  # ENETUNREACH once the tap and its route are gone
            return None
        return str(ipr.get_links(oif)[0].get_attr("IFLA_IFNAME"))


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_guest_pings_the_metadata_address_through_its_tap(short_root: Path) -> None:
    name = "comm1"
    nic = NicSpec(0, "nic-uuid", "52:54:00:00:00:05", C.INSTANCE_COMMUNICATION_NETWORK_MODE,
                  C.INSTANCE_COMMUNICATION_NETWORK_LINK, "", GUEST_IP,
                  C.INSTANCE_COMMUNICATION_NIC_PREFIX + name)  # fmt: skip
    spec = dataclasses.replace(guest_spec(name), nics=(nic,))
    found = communication_tap(spec, str(short_root))
    assert found is not None
    tap, address = found
    assert address == GUEST_IP

    async def scenario() -> tuple[str | None, str | None]:
        hv = KvmHypervisor(Paths(short_root))
        async with booted(hv, spec) as console:
            await console.wait_for("CORRAL-GUEST-SHELL")
            await console.send(
                f"ip link set eth0 up && ip addr add {GUEST_IP}/16 dev eth0"
                f" && ping -c 1 -W 20 {C.INSTANCE_COMMUNICATION_HOST_IP}\n"
            )
            # The answer came back: the node has the address, and its /32 route
            # sends the reply to this guest through its tap.
            await console.wait_for("1 packets received", start=len(console.lines))
            during = await asyncio.to_thread(_route_device, GUEST_IP)
        await hv.close()
        return during, await asyncio.to_thread(_route_device, GUEST_IP)

    with NamespaceThread() as ns:
        during, after = ns.call(asyncio.run, scenario())
    assert (during, after) == (tap, None)
