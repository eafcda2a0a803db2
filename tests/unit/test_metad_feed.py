"""noded's feed of corral-metad (corral.node.metad_feed): the metadata a
start's descriptor gives, metad started on the first publication only, and a
publication metad refuses costs the guest its metadata, never its start."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral.metad.model import Nic
from corral.node.hypervisor.spec import InstanceSpec
from corral.node.metad_feed import METAD, MetadFeed, metadata_of
from corral.osdef.spec import Visibility
from corral.paths import Paths
from corral.process.daemons import running_pid, stop_daemon

NAME = "inst1.example.com"
NETWORK: dict[str, Any] = {"name": "commnet", "uuid": "n1", "tags": [], "subnet": "169.254.0.0/16",
           "gateway": None, "subnet6": None, "gateway6": None, "mac_prefix": None}  # fmt: skip
COMM_NIC: dict[str, Any] = {"mac": "aa:00:00:00:00:02", "ip": "169.254.0.7",
            "name": C.INSTANCE_COMMUNICATION_NIC_PREFIX + NAME,
            "mode": C.INSTANCE_COMMUNICATION_NETWORK_MODE,
            "link": C.INSTANCE_COMMUNICATION_NETWORK_LINK, "network": NETWORK}  # fmt: skip
OSSPEC: dict[str, Any] = {"name": "tiny+default",
          "params": {"release": {"value": "bookworm", "visibility": "public"},
                     "token": {"value": "private-value", "visibility": "private"},
                     "password": {"value": "secret-value", "visibility": "secret"}}}  # fmt: skip


@pytest.fixture
def paths() -> Iterator[Paths]:
    """A node root short enough for metad's control socket; metad stopped after."""
    with tempfile.TemporaryDirectory(prefix="mdf", dir="/tmp") as root:
        node = Paths(Path(root))
        try:
            yield node
        finally:
            stop_daemon(node, METAD)


def spec(paths: Paths, **wire: Any) -> InstanceSpec:
    data = {"name": NAME, "uuid": "u-1", "hypervisor": "kvm", "memory": 128, "vcpus": 1, **wire}
    return InstanceSpec.from_wire(paths, data)


def test_metadata_of_a_start_with_a_communication_nic(paths: Paths) -> None:
    meta = metadata_of(spec(paths, nics=[COMM_NIC], osspec=OSSPEC))
    assert meta is not None
    assert (meta.name, meta.uuid, meta.hostname) == (NAME, "u-1", NAME)
    # A start never serves secret parameters, even if some came along.
    assert {k: p.visibility for k, p in meta.os.params.items()} == {
        "release": Visibility.PUBLIC,
        "token": Visibility.PRIVATE,
    }
    assert meta.nics == (
        Nic("aa:00:00:00:00:02", "169.254.0.7", "169.254.0.0/16", None, COMM_NIC["name"]),
    )
    assert metadata_of(spec(paths, nics=[COMM_NIC])) is None  # no OS sent


def test_the_guest_settings_become_user_data_and_keys(paths: Paths) -> None:
    """As on the config drive: served by the datasources, not as OS parameters."""
    settings = {
        "config-drive": {"value": "no", "visibility": "public"},
        "ssh-authorized-keys": {
            "value": "ssh-ed25519 AAAA one\nssh-rsa BBBB",
            "visibility": "public",
        },
        "user-data": {"value": "#cloud-config\n{}\n", "visibility": "private"},
    }
    osspec = {**OSSPEC, "params": {**OSSPEC["params"], **settings}}
    meta = metadata_of(spec(paths, nics=[COMM_NIC], osspec=osspec))
    assert meta is not None
    assert meta.user_data.reveal() == b"#cloud-config\n{}\n"
    assert meta.ssh_keys == ("ssh-ed25519 AAAA one", "ssh-rsa BBBB")
    assert sorted(meta.os.params) == ["release", "token"]


async def test_nothing_to_publish_starts_no_metad(paths: Paths) -> None:
    feed = MetadFeed(paths)
    await feed.publish(spec(paths, osspec=OSSPEC))  # no communication NIC
    await feed.withdraw(NAME)
    assert running_pid(paths.pid_file(METAD)) is None


async def test_a_refused_publication_is_logged_not_raised(
    paths: Paths, caplog: pytest.LogCaptureFixture
) -> None:
    """metad starts on demand; its tap does not exist here, so it refuses: the
    start goes on, the log says why."""
    feed = MetadFeed(paths)
    with caplog.at_level(logging.ERROR, logger="corral.node.metad_feed"):
        await feed.publish(spec(paths, nics=[COMM_NIC], osspec=OSSPEC))
    assert running_pid(paths.pid_file(METAD)) is not None
    [record] = caplog.records
    assert record.getMessage().startswith(f"Cannot publish instance {NAME}'s metadata: Cannot")
    assert "private-value" not in caplog.text
    await feed.withdraw(NAME)  # metad runs: answered, idempotent
