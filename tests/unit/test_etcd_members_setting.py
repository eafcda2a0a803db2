"""The cluster's ``etcd_members`` setting (Corral's own): set by
``gnt-cluster modify --etcd-members``, bad values refused with Ganeti's
error codes, kept out of Ganeti's files, and what verify says once it is on
(against an in-process cluster: no etcd runs there)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral import constants as C
from corral import errors
from corral.cli import cluster_opts, gnt_cluster
from corral.cmdlib import cluster as cluster_lu
from corral.objects import Cluster
from corral.opcodes import from_dict
from corral.services.config_data import render, take_image
from corral.services.etcd_members import EtcdMembers
from tests.helpers.inprocess import InProcessCluster, in_process_cluster

SWITCH_ON = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "etcd_members": True}


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path) as cluster:
        yield cluster


def test_the_command_line_option() -> None:
    def modify(*argv: str) -> object:
        return cluster_opts.modify_opcode(gnt_cluster.build_parser().parse_args(["modify", *argv]))

    assert modify("--etcd-members", "yes") == {**SWITCH_ON, "force": False}
    assert modify("--etcd-members=no") == {**SWITCH_ON, "etcd_members": False, "force": False}
    with pytest.raises(errors.ParameterError, match="Invalid boolean value 'maybe'"):
        modify("--etcd-members=maybe")


@pytest.mark.parametrize("value", ["maybe", 2, [True]])
def test_a_bad_value_is_wrong_input(value: object) -> None:
    with pytest.raises(errors.OpPrereqError) as info:
        from_dict({**SWITCH_ON, "etcd_members": value})
    assert info.value.ecode == C.ECODE_INVAL
    assert "etcd_members" in info.value.args[0]


async def test_switched_on_and_kept_out_of_config_data(cl: InProcessCluster) -> None:
    assert cl.cfg.cluster.etcd_members is False  # off unless asked for
    job = await cl.run(SWITCH_ON)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert cl.cfg.cluster.etcd_members is True
    # Ganeti's tools read config.data: its cluster has no such key.
    assert b"etcd_members" not in render(take_image(cl.cfg))


async def test_refused_without_etcd(cl: InProcessCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_lu, "ETCD", cl.paths.root / "no-etcd")
    job = await cl.run(SWITCH_ON)
    assert job.status == C.JOB_STATUS_ERROR
    assert "etcd is not installed" in job.error
    assert job.result[1][1] == C.ECODE_ENVIRON
    assert cl.cfg.cluster.etcd_members is False


async def test_verify_says_no_member_answers(cl: InProcessCluster) -> None:
    verify = {"OP_ID": "OP_CLUSTER_VERIFY_CONFIG", "error_codes": True}
    job = await cl.run(verify)
    assert not any("etcd" in line for line in job.log), job.log  # off: not looked at
    await cl.run(SWITCH_ON)
    cl.rpc.query_deadline = 0.5  # nothing answers on the in-process node's address
    job = await cl.run(verify)
    assert job.result is False
    assert "* Verifying the etcd members" in job.log
    found = [line for line in job.log if "ECLUSTERETCD" in line]
    assert len(found) == 1 and "ERROR:ECLUSTERETCD:cluster:None:no etcd member answers" in found[0]


async def test_a_change_made_while_a_step_runs_is_acted_on(cl: InProcessCluster) -> None:
    # The service took the members as settled for the configuration as it was
    # after its step, and slept on a change made during it (a candidate
    # promoted while the stores moved: found by test_etcd_members).
    service = EtcdMembers(cl.master, check_interval=3600)
    cl.cfg.add_listener(service.changed)
    plans: list[object] = []
    again = asyncio.Event()

    async def step() -> None:
        plans.append(service._plan())
        if len(plans) == 1:  # the configuration changes while the step runs
            tx = cl.cfg.transaction()
            cluster = cl.cfg.cluster.copy_for_update()
            assert isinstance(cluster, Cluster)
            cluster.etcd_members = True
            tx.update(cluster)
            await tx.commit()
        else:
            again.set()

    service._step = step  # type: ignore[method-assign]
    service.start()
    try:
        await asyncio.wait_for(again.wait(), 10)
    finally:
        await service.stop()
    assert plans[0] != plans[1]
