"""The taps of instances' NICs: bridged, routed, refused modes, QEMU holding them.

Everything runs in a network namespace of the test's own (a thread that
entered it, see tests/helpers/netns_thread.py): the bridges, taps, routes and
rules made here exist nowhere else and go away with the namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import IPRoute  # type: ignore[import-untyped]

from corral import errors
from corral.node import netdev
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.waiting import wait_until

IFF_UP = 0x1
MAC = "aa:00:00:12:34:56"
TABLE = 1234
QEMU = "qemu-system-x86_64"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


@pytest.fixture
def ns() -> Iterator[NamespaceThread]:
    with NamespaceThread() as space:
        yield space


def _link(name: str) -> Any:
    """The link ``name`` of the calling thread's namespace, or None."""
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=name)
        return ipr.get_links(found[0])[0] if found else None


def _add_link(name: str, kind: str, mtu: int = 1500) -> int:
    with IPRoute() as ipr:
        ipr.link("add", ifname=name, kind=kind)
        index = int(ipr.link_lookup(ifname=name)[0])
        ipr.link("set", index=index, mtu=mtu, state="up")
        return index


def _rules(name: str) -> list[tuple[int, int]]:
    """(table, priority) of the rules for packets coming in through ``name``."""
    with IPRoute() as ipr:
        return [
            (rule.get_attr("FRA_TABLE"), rule.get_attr("FRA_PRIORITY"))
            for rule in ipr.get_rules()
            if rule.get_attr("FRA_IIFNAME") == name
        ]


def _routes(table: int, family: int = 2) -> list[tuple[str, int, int, int]]:
    """(destination, prefix length, out interface, protocol) of ``table``'s routes."""
    with IPRoute() as ipr:
        return [
            (r.get_attr("RTA_DST"), r["dst_len"], r.get_attr("RTA_OIF"), r["proto"])
            for r in ipr.get_routes(family=family, table=table)
            if r.get_attr("RTA_DST") and r["type"] == 1  # unicast, not local
        ]


def _sysctl(version: str, name: str, key: str) -> str:
    return Path(f"/proc/sys/net/{version}/conf/{name}/{key}").read_text().strip()


def test_tap_names_are_short_stable_and_distinct() -> None:
    names = {netdev.tap_name(f"uuid-{i}", 0) for i in range(5000)}
    names |= {netdev.tap_name("uuid-1", index) for index in range(8)}
    assert len(names) == 5007
    assert all(len(name) <= 15 and name.startswith(netdev.TAP_PREFIX) for name in names)
    # Stable across calls (a restarted noded finds them); never a test bed's
    # device (crl…, br…, v…) nor Ganeti's tapN.
    assert netdev.tap_name("uuid-1", 3) == netdev.tap_name("uuid-1", 3)
    # Two nodes on one machine (their roots differ) give one guest two taps.
    assert netdev.tap_name("uuid-1", 0, "/tmp/a") != netdev.tap_name("uuid-1", 0, "/tmp/b")
    assert not any(name.startswith(("crl", "br", "v", "tap")) for name in names)
    with pytest.raises(ValueError):
        netdev.tap_name("uuid-1", 10)


def test_bridged_nic_joins_the_bridge_and_leaves_with_remove(ns: NamespaceThread) -> None:
    bridge = ns.call(_add_link, "brtest", "bridge", 1400)
    name = netdev.tap_name("inst-a", 0)
    with ns.call(netdev.create_tap, name):
        assert ns.call(netdev.bridge_problem, "brtest") is None
        ns.call(netdev.configure_nic, name, "bridged", "brtest", None, MAC)
        link = ns.call(_link, name)
        assert link.get_attr("IFLA_MASTER") == bridge
        assert link["flags"] & IFF_UP
        assert link.get_attr("IFLA_MTU") == 1400  # the bridge's
        assert link.get_attr("IFLA_ADDRESS") == "fe:00:00:12:34:56"
        assert link.get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND") == "tun"
        assert ns.call(netdev.list_taps) == [name]
        ns.call(netdev.remove_tap, name)
        assert ns.call(_link, name) is None
        assert ns.call(netdev.list_taps) == []
        assert ns.call(_link, "brtest") is not None


def test_two_nics_of_one_instance(ns: NamespaceThread) -> None:
    bridge = ns.call(_add_link, "brtest", "bridge")
    first, second = netdev.tap_name("inst-b", 0), netdev.tap_name("inst-b", 1)
    with ns.call(netdev.create_tap, first), ns.call(netdev.create_tap, second):
        ns.call(netdev.configure_nic, first, "bridged", "brtest", None, MAC)
        ns.call(netdev.configure_nic, second, "routed", str(TABLE), "10.213.0.7", MAC)
        assert ns.call(netdev.list_taps) == sorted([first, second])
        assert ns.call(_link, first).get_attr("IFLA_MASTER") == bridge
        ns.call(netdev.remove_tap, first)
        assert ns.call(netdev.list_taps) == [second]
        assert ns.call(_link, second)["flags"] & IFF_UP


def test_missing_bridge_is_refused_by_name_and_the_tap_removed(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-c", 0)
    with ns.call(netdev.create_tap, name):
        with pytest.raises(errors.OpExecError) as caught:
            ns.call(netdev.configure_nic, name, "bridged", "br-x", None, MAC, node="node9")
        assert str(caught.value) == (
            "Bridge 'br-x' does not exist on node node9; create it or change the NIC's link"
        )
        assert ns.call(_link, name) is None
    assert "br-x" in (ns.call(netdev.bridge_problem, "br-x") or "")


def test_a_link_that_is_no_bridge(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-d", 0)
    with ns.call(netdev.create_tap, name):
        with pytest.raises(errors.OpExecError, match="'lo' on node n1 is not a bridge"):
            ns.call(netdev.configure_nic, name, "bridged", "lo", None, MAC, node="n1")
        assert ns.call(_link, name) is None


@pytest.mark.parametrize(
    ("mode", "vlan", "message"),
    [
        ("openvswitch", "", "NIC mode 'openvswitch' is not implemented by Corral yet"),
        ("bridged", ".100", "VLANs on bridged NICs .* are not implemented by Corral yet"),
        ("routed", "", "A routed NIC needs an IP address"),
    ],
)
def test_unsupported_nics_are_refused_and_the_tap_removed(
    ns: NamespaceThread, mode: str, vlan: str, message: str
) -> None:
    ns.call(_add_link, "brtest", "bridge")
    name = netdev.tap_name("inst-e", 0)
    with ns.call(netdev.create_tap, name):
        with pytest.raises(errors.OpExecError, match=message):
            ns.call(netdev.configure_nic, name, mode, "brtest", None, MAC, vlan)
        assert ns.call(_link, name) is None
        assert ns.call(_rules, name) == []


def test_routed_nic_in_a_table_of_its_own(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-f", 0)
    with ns.call(netdev.create_tap, name):
        ns.call(netdev.configure_nic, name, "routed", str(TABLE), "10.213.0.5", MAC)
        index = ns.call(_link, name)["index"]
        assert ns.call(_link, name)["flags"] & IFF_UP
        assert ns.call(_routes, TABLE) == [("10.213.0.5", 32, index, 4)]  # proto static
        assert ns.call(_routes, 254) == []  # nothing in main
        assert [table for table, _ in ns.call(_rules, name)] == [TABLE]
        assert ns.call(_sysctl, "ipv4", name, "proxy_arp") == "1"
        assert ns.call(_sysctl, "ipv4", name, "forwarding") == "1"
        # Configured again (after a migration): still one rule, one route.
        ns.call(netdev.configure_nic, name, "routed", str(TABLE), "10.213.0.5", MAC)
        assert len(ns.call(_rules, name)) == 1
        assert len(ns.call(_routes, TABLE)) == 1
        ns.call(netdev.remove_tap, name)
        assert ns.call(_rules, name) == []
        assert ns.call(_routes, TABLE) == []
        assert ns.call(_link, name) is None


def test_routed_ipv6_nic_in_the_main_table(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-g", 0)
    with ns.call(netdev.create_tap, name):
        ns.call(netdev.configure_nic, name, "routed", "", "2001:db8::5", MAC)
        index = ns.call(_link, name)["index"]
        assert ("2001:db8::5", 128, index, 4) in ns.call(_routes, 254, 10)
        assert ns.call(_rules, name) == []  # main needs no rule
        assert ns.call(_sysctl, "ipv6", name, "proxy_ndp") == "1"


def test_unknown_routing_table_is_refused(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-h", 0)
    with ns.call(netdev.create_tap, name):
        with pytest.raises(errors.OpExecError, match="Routing table 'nosuch' is not known"):
            ns.call(netdev.configure_nic, name, "routed", "nosuch", "10.213.0.5", MAC)
        assert ns.call(_link, name) is None


def test_remove_is_idempotent(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-i", 0)
    ns.call(netdev.remove_tap, name)  # never existed
    with ns.call(netdev.create_tap, name):
        ns.call(netdev.configure_nic, name, "routed", str(TABLE), "10.213.0.9", MAC)
        ns.call(netdev.remove_tap, name)
        ns.call(netdev.remove_tap, name)
        assert ns.call(_link, name) is None
        assert ns.call(_rules, name) == []


def test_a_tap_name_in_use_is_refused(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-j", 0)
    refused = pytest.raises(errors.OpExecError, match="a device of that name exists")
    with ns.call(netdev.create_tap, name, True, 2), refused:
        ns.call(netdev.create_tap, name, True, 2)


class _Qmp:
    """QEMU's monitor on its stdin/stdout (``-qmp stdio``)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert "QMP" in self._read()
        self.execute("qmp_capabilities")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "QEMU exited"
        return dict(json.loads(line))

    def execute(self, command: str, **arguments: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"execute": command, "arguments": arguments}).encode())
        self.proc.stdin.flush()
        while "event" in (reply := self._read()):
            pass
        return reply["return"]


def _qemu(fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """A QEMU stopped before its first instruction (-S, no guest needed),
    run as nobody, with a multi-queue virtio NIC on the tap ``fds``."""
    argv = [QEMU, "-nodefaults", "-display", "none", "-S", "-accel", "tcg", "-m", "32"]
    argv += ["-runas", "nobody", "-qmp", "stdio"]
    argv += ["-netdev", f"tap,id=n0,fds={':'.join(map(str, fds))}"]
    argv += ["-device", f"virtio-net-pci,netdev=n0,mq=on,vectors=6,mac={MAC}"]
    return subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def _tap_files(pid: int) -> list[str]:
    """The taps whose files process ``pid`` holds."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
            if line.startswith("iff:"):
                found.append(line.split()[1])
    return found


def test_qemu_holds_the_tap_and_takes_it_along_when_it_dies(ns: NamespaceThread) -> None:
    name = netdev.tap_name("inst-q", 0)
    with ns.call(netdev.create_tap, name, True, 2) as tap:
        ns.call(netdev.configure_nic, name, "routed", str(TABLE), "10.213.0.8", MAC)
        # Started from the namespace's thread: QEMU lives in the namespace.
        qemu = ns.call(_qemu, tap.fds)
    try:
        monitor = _Qmp(qemu)
        network = monitor.execute("human-monitor-command", **{"command-line": "info network"})
        assert "n0: index=0,type=tap,fd=" in network
        assert _tap_files(qemu.pid) == [name, name]  # both queues, ours closed
        status = Path(f"/proc/{qemu.pid}/status").read_text()
        assert "\nUid:\t65534\t65534" in status  # unprivileged, yet on its tap
        link = ns.call(_link, name)
        assert link.get_attr("IFLA_CARRIER") == 1 and link["flags"] & IFF_UP
        assert link.get_nested("IFLA_LINKINFO", "IFLA_INFO_DATA").get_attr("IFLA_TUN_MULTI_QUEUE")
    finally:
        qemu.kill()
        qemu.communicate()
    # The tap and its route go with QEMU; the rule is left for remove_tap,
    # and list_taps shows it so that a restarted noded cleans it up.
    wait_until(lambda: ns.call(_link, name) is None, what="the tap gone with QEMU")
    assert ns.call(_routes, TABLE) == []
    assert ns.call(netdev.list_taps) == [name]
    ns.call(netdev.remove_tap, name)
    assert ns.call(netdev.list_taps) == []
