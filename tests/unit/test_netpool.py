"""A network's address pool: Ganeti's sizes, reservations and messages."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.netpool import AddressPool, AddressPoolError
from corral.objects import Network


def net(subnet: str = "10.1.0.0/28", **fields: object) -> Network:
    return Network(name="net1", network=subnet, **fields)


def test_a_new_pool_reserves_network_broadcast_and_gateway() -> None:
    pool = AddressPool.initialize(net(gateway="10.1.0.1"))
    assert pool.external_addresses() == ["10.1.0.0", "10.1.0.1", "10.1.0.15"]
    assert (pool.size, pool.free_count, pool.reserved_count) == (16, 13, 3)
    assert pool.map() == "XX.............X"
    assert pool.first_free() == "10.1.0.2"


@pytest.mark.parametrize(
    ("subnet", "message"),
    [
        ("10.0.0.0/31", "A network with only 2 host(s) is too small, please specify at least a /30"
                        " network"),
        ("10.0.0.0/15", "A big network with 131072 host(s) is currently not supported. please"
                        " specify at most a /16 network"),
    ],
)  # fmt: skip
def test_a_pool_has_between_4_and_65536_addresses(subnet: str, message: str) -> None:
    with pytest.raises(AddressPoolError) as err:
        AddressPool.initialize(net(subnet))
    assert str(err.value) == message
    assert AddressPool.initialize(net("10.0.0.0/30")).free_count == 2
    assert AddressPool.initialize(net("10.0.0.0/16")).free_count == 65534


def test_gateway_outside_the_subnet_is_refused() -> None:
    with pytest.raises(AddressPoolError, match=r"^10\.1\.0\.0/28 does not contain 10\.2\.0\.1$"):
        AddressPool.initialize(net(gateway="10.2.0.1"))


def test_instances_use_addresses_that_are_not_stored() -> None:
    network = net(ext_reservations=["10.1.0.0", "10.1.0.15"])
    pool = AddressPool(network, used=["10.1.0.2", "10.1.0.3", "192.168.1.1"])
    assert pool.is_reserved("10.1.0.2") and not pool.is_reserved("10.1.0.2", external=True)
    assert pool.reserved_count == 4
    assert pool.first_free() == "10.1.0.1"
    assert pool.first_free(taken=["10.1.0.1", "10.9.9.9"]) == "10.1.0.4"
    assert network.ext_reservations == ["10.1.0.0", "10.1.0.15"]


@pytest.mark.parametrize(
    ("action", "address", "external", "message"),
    [
        ("reserve", "10.1.0.0", True, "IP 10.1.0.0 is already externally reserved"),
        ("reserve", "10.1.0.2", False, "IP 10.1.0.2 is already used by an instance"),
        ("release", "10.1.0.5", True, "IP 10.1.0.5 is not externally reserved"),
        ("release", "10.1.0.5", False, "IP 10.1.0.5 is not used by an instance"),
        ("reserve", "10.1.1.0", True, "10.1.0.0/28 does not contain 10.1.1.0"),
    ],
)
def test_reserving_and_releasing_say_why_they_cannot(
    action: str, address: str, external: bool, message: str
) -> None:
    pool = AddressPool(net(ext_reservations=["10.1.0.0"]), used=["10.1.0.2"])
    with pytest.raises(AddressPoolError) as err:
        getattr(pool, action)(address, external=external)
    assert str(err.value) == message


def test_a_full_pool_has_no_free_address() -> None:
    pool = AddressPool.initialize(net("10.0.0.0/30"))
    pool.reserve("10.0.0.1")
    pool.reserve("10.0.0.2", external=True)
    assert pool.first_free() is None
    assert pool.map() == "XXXX"


def test_contains_takes_any_text() -> None:
    pool = AddressPool(net())
    assert pool.contains("10.1.0.7")
    assert not pool.contains(None)
    assert not pool.contains("not-an-ip")
    assert not pool.contains("fe80::1")


@given(st.sets(st.integers(0, 63)), st.sets(st.integers(0, 63)))
def test_counts_and_map_agree(external: set[int], used: set[int]) -> None:
    subnet = ipaddress.IPv4Network("10.3.0.0/26")
    network = net(str(subnet), ext_reservations=[str(subnet[i]) for i in sorted(external)])
    pool = AddressPool(network, used=[str(subnet[i]) for i in used])
    reserved = external | used
    assert pool.reserved_count == len(reserved) == pool.map().count("X")
    assert pool.free_count == 64 - len(reserved)
    free = pool.first_free()
    assert free == (None if len(reserved) == 64 else str(subnet[min(set(range(64)) - reserved)]))
    assert pool.external_addresses() == network.ext_reservations
