"""The config drive's settings (``config-drive``, ``user-data``,
``ssh-authorized-keys``) against real
nodes in-process: accepted at their visibility only, refused otherwise with
nothing stored, kept out of the OS scripts' environment, and carried to the
node in the instance's wire data (never a secret)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.cmdlib import instance_utils as U
from corral.metad.model import InstanceMetadata
from tests.helpers.inprocess import InProcessCluster, create_op, in_process_cluster
from tests.helpers.osdef import make_os

INST = "inst1.example.com"
OS = "envdump"
USER_DATA = "#cloud-config\nruncmd: [echo config-drive-marker-41c7]\n"
SECRET = "secret-token-9d0e"
MAC = "aa:00:00:11:22:33"
KEYS = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7k operator@one\n\nssh-rsa AAAAB3NzaC1yc2E two"


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path / "cluster", nodes=1) as cluster:
        # The create script leaves its environment where the test reads it.
        script = f"#!/bin/sh\nenv > {tmp_path}/create.env\n"
        make_os(
            cluster.node(1).paths,
            OS,
            variants=None,
            parameters={"token": "a secret the install needs"},
            scripts={"create": script},
        )
        yield cluster


def create(**fields: Any) -> dict[str, Any]:
    op = create_op(INST, testbed.node_name(1), "file", [{"size": 16}])
    return {**op, "os_type": OS, "nics": [{"mac": MAC, "ip": "10.20.0.5"}], **fields}


def modify(**fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": INST, **fields}


def drive_of(cl: InProcessCluster) -> dict[str, Any] | None:
    inst = cl.instance(INST)
    assert inst is not None
    return U.instance_descriptor(cl.cfg, inst).get("config_drive")


WITH_DRIVE = {
    "osparams": {"config-drive": "yes", "ssh-authorized-keys": KEYS},
    "osparams_private": {"user-data": USER_DATA},
}


async def test_the_settings_are_stored_and_reach_the_node_but_not_the_scripts(
    cl: InProcessCluster, tmp_path: Path
) -> None:
    job = await cl.run(create(**WITH_DRIVE, osparams_secret={"token": SECRET}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None
    assert inst.osparams == {"config-drive": "yes", "ssh-authorized-keys": KEYS}
    assert inst.osparams_private == {"user-data": USER_DATA}
    env = (tmp_path / "create.env").read_text()
    assert f"OSP_TOKEN={SECRET}" in env  # the scripts get their own parameters...
    assert "OSP_USER_DATA" not in env and "OSP_CONFIG_DRIVE" not in env  # ...not the guest's
    assert "OSP_SSH_AUTHORIZED_KEYS" not in env
    record = drive_of(cl)
    assert record is not None and SECRET not in json.dumps(record)
    meta = InstanceMetadata.from_record(record)
    assert (meta.name, meta.hostname, meta.uuid) == (INST, INST, inst.uuid)
    assert meta.user_data.reveal() == USER_DATA.encode()
    assert [(n.mac, n.ip) for n in meta.nics] == [(MAC, "10.20.0.5")]
    assert "user-data" not in meta.os.params and "config-drive" not in meta.os.params
    # One key a line, blank lines dropped: the datasources' own key fields.
    assert meta.ssh_keys == tuple(line for line in KEYS.split("\n") if line)
    assert "ssh-authorized-keys" not in meta.os.params


async def test_no_drive_unless_asked_and_the_id_follows_the_data(cl: InProcessCluster) -> None:
    job = await cl.run(create(osparams_private={"user-data": USER_DATA}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert drive_of(cl) is None  # user-data alone attaches nothing
    job = await cl.run(modify(osparams={"config-drive": "yes"}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    first = drive_of(cl)
    assert first is not None
    job = await cl.run(modify(osparams_private={"user-data": "#cloud-config\n{}\n"}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    second = drive_of(cl)
    assert second is not None
    ids = {InstanceMetadata.from_record(r).instance_id for r in (first, second)}
    assert len(ids) == 2
    job = await cl.run(modify(osparams={"config-drive": "no"}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert drive_of(cl) is None


REFUSALS = [
    (
        {"osparams": {"user-data": USER_DATA}},
        "The OS parameter 'user-data' cannot be public; give it with --os-parameters-private",
    ),
    (
        {"osparams_secret": {"user-data": USER_DATA}},
        "The OS parameter 'user-data' cannot be secret (it is never stored, and the drive"
        " is rebuilt at each start); give it with --os-parameters-private",
    ),
    (
        {"osparams_private": {"config-drive": "yes"}},
        "The OS parameter 'config-drive' cannot be private; give it with --os-parameters",
    ),
    (
        {"osparams": {"config-drive": "maybe"}},
        "The OS parameter 'config-drive' must be one of yes, no (got 'maybe')",
    ),
    (
        {"osparams_private": {"ssh-authorized-keys": KEYS}},
        "The OS parameter 'ssh-authorized-keys' cannot be private; give it with --os-parameters",
    ),
    (
        {"osparams": {"ssh-authorized-keys": "ssh-ed25519 AAAAC3 ok\nnot-a-key"}},
        "The OS parameter 'ssh-authorized-keys' holds 'not-a-key', which is not an OpenSSH"
        " public key ('TYPE BASE64 [COMMENT]', one a line)",
    ),
    (
        {"osparams_private": {"user-data": "x" * (64 * 1024 + 1)}},
        "The OS parameter 'user-data' is 65537 bytes long; at most 65536 are allowed",
    ),
]


@pytest.mark.parametrize(("fields", "message"), REFUSALS)
async def test_a_create_with_a_misplaced_setting_creates_nothing(
    cl: InProcessCluster, fields: dict[str, Any], message: str
) -> None:
    job = await cl.run(create(**fields))
    assert job.status == C.JOB_STATUS_ERROR
    assert message in job.error, job.error
    assert job.result[1][1] == C.ECODE_INVAL
    assert cl.instance(INST) is None and cl.disk_files(1) == []


async def test_a_modify_or_reinstall_with_a_misplaced_setting_changes_nothing(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create(**WITH_DRIVE))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    before = cl.instance(INST)
    for op in (
        modify(osparams={"user-data": "#cloud-config\n{}\n"}),
        modify(osparams={"config-drive": "on"}),
        {
            "OP_ID": "OP_INSTANCE_REINSTALL",
            "instance_name": INST,
            "osparams_secret": {"user-data": "#cloud-config\n{}\n"},
        },
    ):
        job = await cl.run(op)
        assert job.status == C.JOB_STATUS_ERROR, op
        assert "The OS parameter" in job.error and job.result[1][1] == C.ECODE_INVAL
        after = cl.instance(INST)
        assert after is not None and before is not None
        assert (after.osparams, after.osparams_private) == (
            before.osparams,
            before.osparams_private,
        )


async def test_cluster_defaults_follow_the_same_rules(cl: InProcessCluster) -> None:
    job = await cl.run(
        {"OP_ID": "OP_CLUSTER_SET_PARAMS", "osparams": {OS: {"user-data": USER_DATA}}}
    )
    assert job.status == C.JOB_STATUS_ERROR
    assert "'user-data' cannot be public; give it with --os-parameters-private" in job.error
    assert cl.cfg.cluster.osparams.get(OS) is None
    job = await cl.run(
        {"OP_ID": "OP_CLUSTER_SET_PARAMS", "osparams": {OS: {"config-drive": "yes"}}}
    )
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    job = await cl.run(create())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert drive_of(cl) is not None  # the cluster's default asks for a drive
