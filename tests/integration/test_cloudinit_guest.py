"""design-os's must-show: a stock Debian 12 cloud image (Debian's ``cloud-init``,
nothing of Corral's inside, tests/helpers/cloud_guest.py) configures itself on
a real kvm cluster: once from its ``cidata`` config drive, once from
corral-metad over its communication NIC.  Checked from the outside: its
hostname, its static address and its network's gateway (an SSH login with the
operator's key at that address, from the cluster's own network namespace),
the datasource it used, and the user-data's marker on its serial console; a
secret parameter of the add is nowhere on disk afterwards (the whole cluster
root searched, and the drive).

Both guests boot once, side by side (TCG), in one module fixture.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.cloud_guest import MARKER, CloudCluster, cloud_cluster, gateway
from tests.helpers.instances import NO_CHECKS, ok
from tests.helpers.leaks import files_holding
from tests.helpers.serial_console import SerialConsole
from tests.helpers.waiting import wait_until

SUBNET = "10.213.23"
SECRET_VALUE = "secret-token-8e1f"
# Two TCG guests booting side by side on a shared machine (~1.5-3 min alone).
BOOT_TIMEOUT = 1200


@dataclass(frozen=True)
class Guest:
    name: str
    hostname: str
    address: str
    osparams: str  # how it learns its configuration: a config drive ...
    options: tuple[str, ...]  # ... or a communication NIC
    cloud_id: str  # the datasource cloud-init found, as its ``cloud-id`` names it


GUESTS = (
    Guest("ci-drive.example.com", "ci-drive", f"{SUBNET}.10", "config-drive=yes", (), "nocloud"),
    Guest("ci-metad.example.com", "ci-metad", f"{SUBNET}.11", "", ("-c", "yes"), "openstack"),
)


@dataclass
class Booted:
    cc: CloudCluster
    consoles: dict[str, SerialConsole]
    drive_image: bytes  # the config drive as the guest saw it


@pytest.fixture(scope="module")
def booted() -> Iterator[Booted]:
    """Both guests added (so started), their consoles followed."""
    with cloud_cluster("cig", SUBNET) as cc:
        consoles: dict[str, SerialConsole] = {}
        layout = Layout(cc.cl.paths.run_dir)
        try:
            for guest in GUESTS:
                secret = ("--os-parameters-secret", f"token={SECRET_VALUE}")
                options = cc.add_options(
                    guest.address, *secret, *guest.options, osparams=guest.osparams
                )
                ok(cc.cl.gnt("instance", "add", *NO_CHECKS, *options, guest.name, timeout=600))
                consoles[guest.name] = SerialConsole(layout.serial(guest.name))
            drive = layout.config_drive(GUESTS[0].name).read_bytes()
            yield Booted(cc, consoles, drive)
        finally:
            for console in consoles.values():
                console.close()


def _ssh(booted: Booted, guest: Guest, command: str) -> subprocess.CompletedProcess[str]:
    argv = ["ssh", "-i", str(booted.cc.key), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            f"debian@{guest.address}", command]  # fmt: skip
    return booted.cc.ns.call(subprocess.run, argv, capture_output=True, text=True, timeout=60)


def _configured_itself(booted: Booted, guest: Guest) -> None:
    found = booted.consoles[guest.name].wait_for(MARKER, timeout=BOOT_TIMEOUT)
    assert found.group(1) == guest.hostname  # user-data ran, after the hostname was set
    # SSH is up before cloud-init's last stage runs the user-data: the login
    # works now, with the key given as a Corral setting, at the static address.
    login = _ssh(booted, guest, "hostname; cloud-id; ip -4 route show default; ip -4 -o addr show")
    assert login.returncode == 0, login.stderr
    name, cloud_id, route, *addresses = login.stdout.splitlines()
    assert (name, cloud_id) == (guest.hostname, guest.cloud_id)
    assert any(f"inet {guest.address}/24 " in line for line in addresses), login.stdout
    assert route.startswith(f"default via {gateway(SUBNET)} "), login.stdout  # the network's


@pytest.mark.slow
@pytest.mark.timeout(BOOT_TIMEOUT + 600)
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_a_stock_image_configures_itself_from_the_config_drive(booted: Booted) -> None:
    _configured_itself(booted, GUESTS[0])
    assert b"CORRAL-CLOUD-INIT" in booted.drive_image  # its user-data
    assert SECRET_VALUE.encode() not in booted.drive_image


@pytest.mark.slow
@pytest.mark.timeout(BOOT_TIMEOUT + 600)
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_a_stock_image_configures_itself_from_metad(booted: Booted) -> None:
    _configured_itself(booted, GUESTS[1])
    # No config drive: metad over the communication NIC was its only source.
    assert not Layout(booted.cc.cl.paths.run_dir).config_drive(GUESTS[1].name).exists()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_the_secret_parameter_is_nowhere_on_disk(booted: Booted) -> None:
    cl = booted.cc.cl
    for guest in GUESTS:
        ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", guest.name))
    wait_until(lambda: not list(Layout(cl.paths.run_dir).names()), 60, "the guests' runtime files")
    assert files_holding(cl.paths.root, SECRET_VALUE) == []  # (the drive: test 1)
