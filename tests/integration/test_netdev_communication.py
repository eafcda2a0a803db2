"""The tap of an instance communication NIC (Ganeti's kvm-ifup-os, through netlink).

Everything runs in a network namespace of the test's own
(tests/helpers/netns_thread.py): taps, addresses and routes made here exist
nowhere else and go away with the namespace.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from pyroute2 import IPRoute  # type: ignore[import-untyped]

from corral import constants as C
from corral import errors
from corral.node import netdev
from corral.node.communication import communication_tap, is_communication_nic
from corral.node.hypervisor.spec import InstanceSpec, NicSpec
from tests.helpers.netns_thread import NamespaceThread

IFF_UP = 0x1
MAIN = 254
RTPROT_BOOT = 3
SCOPE_LINK = 253
GUEST_A, GUEST_B = "169.254.0.5", "169.254.0.6"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


@pytest.fixture
def ns() -> Iterator[NamespaceThread]:
    with NamespaceThread() as space:
        yield space


def _index(name: str) -> int | None:
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=name)
        return int(found[0]) if found else None


def _flags(name: str) -> int:
    with IPRoute() as ipr:
        return int(ipr.get_links(ipr.link_lookup(ifname=name)[0])[0]["flags"])


def _addresses(name: str) -> list[tuple[str, int, str | None]]:
    """(address, prefix length, broadcast) of the IPv4 addresses of ``name``."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=name)[0]
        return [
            (a.get_attr("IFA_ADDRESS"), a["prefixlen"], a.get_attr("IFA_BROADCAST"))
            for a in ipr.get_addr(family=2, index=index)
        ]


def _main_routes() -> list[tuple[str, int, int, int, int]]:
    """(destination, prefix length, out interface, protocol, scope) of main's unicast routes."""
    with IPRoute() as ipr:
        return [
            (r.get_attr("RTA_DST"), r["dst_len"], r.get_attr("RTA_OIF"), r["proto"], r["scope"])
            for r in ipr.get_routes(family=2, table=MAIN)
            if r.get_attr("RTA_DST") and r["type"] == 1
        ]


def _route_to(address: str) -> Any:
    """The interface the kernel sends to ``address`` through."""
    with IPRoute() as ipr:
        return ipr.route("get", dst=address)[0].get_attr("RTA_OIF")


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def test_the_tap_has_the_metadata_address_and_a_route_to_its_guest(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-comm-a", 1)
    with ns.call(netdev.create_tap, name):
        ns.call(netdev.configure_communication, name, GUEST_A)
        index = ns.call(_index, name)
        assert ns.call(_flags, name) & IFF_UP
        assert ns.call(_addresses, name) == [("169.254.169.254", 32, "169.254.255.255")]
        assert ns.call(_main_routes) == [(GUEST_A, 32, index, RTPROT_BOOT, SCOPE_LINK)]
        # What Ganeti's QA reads (the tap has no carrier without a QEMU: "linkdown").
        route = ns.call(_ip, "route", "show", GUEST_A).split()
        assert route[:5] == [GUEST_A, "dev", name, "scope", "link"]
        inet = ns.call(_ip, "address", "show", "dev", name).split("inet ")[1].split()
        assert inet[:3] == ["169.254.169.254/32", "brd", "169.254.255.255"]
        # Configured again (a migration back, a restart over a left-over tap): no error, no copy.
        ns.call(netdev.configure_communication, name, GUEST_A)
        assert len(ns.call(_addresses, name)) == 1
        assert len(ns.call(_main_routes)) == 1
        ns.call(netdev.remove_tap, name)
        assert ns.call(_index, name) is None
        assert ns.call(_main_routes) == []


def test_each_guest_is_reached_through_its_own_tap(ns: NamespaceThread) -> None:
    first, second = netdev.tap_name("inst-comm-b", 1), netdev.tap_name("inst-comm-c", 0)
    with ns.call(netdev.create_tap, first), ns.call(netdev.create_tap, second):
        ns.call(netdev.configure_communication, first, GUEST_A)
        ns.call(netdev.configure_communication, second, GUEST_B)
        # Both taps hold the one metadata address; the routes tell the guests apart.
        for name in (first, second):
            assert ns.call(_addresses, name)[0][0] == C.INSTANCE_COMMUNICATION_HOST_IP
        assert ns.call(_route_to, GUEST_A) == ns.call(_index, first)
        assert ns.call(_route_to, GUEST_B) == ns.call(_index, second)
        ns.call(netdev.remove_tap, first)
        # The other guest keeps its tap, address and route.
        assert ns.call(_main_routes) == [
            (GUEST_B, 32, ns.call(_index, second), RTPROT_BOOT, SCOPE_LINK)
        ]
        assert ns.call(_addresses, second)[0][0] == C.INSTANCE_COMMUNICATION_HOST_IP


@pytest.mark.parametrize(
    "ip, message",
    [
        (None, "needs an IPv4 address of its network; got 'None'"),
        ("10.1.2.3", "10.1.2.3 of an instance communication NIC is not in 169.254.0.0/16"),
        ("fe80::5", "fe80::5 of an instance communication NIC is not in 169.254.0.0/16"),
    ],
)
def test_a_bad_address_is_refused_and_the_tap_removed(
    ns: NamespaceThread, ip: str | None, message: str
) -> None:
    name = netdev.tap_name("inst-comm-d", 0)
    with ns.call(netdev.create_tap, name):
        with pytest.raises(errors.OpExecError, match=message):
            ns.call(netdev.configure_communication, name, ip)
        assert ns.call(_index, name) is None
        assert ns.call(_main_routes) == []


def _nic(index: int, name: str | None, mode: str = "routed", ip: str | None = GUEST_A) -> NicSpec:
    mac = f"52:54:00:00:00:0{index}"
    return NicSpec(index=index, uuid=f"u{index}", mac=mac, mode=mode,
                   link="communication_rt", ip=ip, name=name)  # fmt: skip


def test_which_nic_is_the_communication_nic() -> None:
    comm = f"{C.INSTANCE_COMMUNICATION_NIC_PREFIX}inst1.example.com"
    assert is_communication_nic(_nic(1, comm))
    assert not is_communication_nic(_nic(1, comm, mode="bridged"))  # Ganeti's test too
    assert not is_communication_nic(_nic(0, "eth0"))
    assert not is_communication_nic(_nic(0, None))


def _spec(nics: list[NicSpec]) -> InstanceSpec:
    return InstanceSpec(name="inst1.example.com", uuid="uuid-1", hypervisor="kvm", os="",
                        memory=128, vcpus=1, hvparams={}, beparams={},
                        nics=tuple(nics))  # fmt: skip


def test_communication_tap_names_the_tap_the_hypervisor_makes() -> None:
    comm = f"{C.INSTANCE_COMMUNICATION_NIC_PREFIX}inst1.example.com"
    spec = _spec([_nic(0, None, "bridged", None), _nic(1, comm)])
    assert communication_tap(spec, "/srv/n1") == (netdev.tap_name("uuid-1", 1, "/srv/n1"), GUEST_A)
    assert communication_tap(_spec([_nic(0, None, "bridged", None)]), "/srv/n1") is None
