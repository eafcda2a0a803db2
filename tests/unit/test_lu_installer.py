"""The installer behind instance create and reinstall, against real nodes
in-process: the OS scripts get every parameter in clear, and nothing the job
or the node keeps shows a private or secret one (tests/helpers/inprocess.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from tests.helpers.inprocess import OS_NAME, InProcessCluster, in_process_cluster
from tests.helpers.leaks import files_holding
from tests.helpers.osdef import make_os

INST = "inst1.example.com"
PARAMS = {"mirror": "public mirror", "note": "private note", "token": "secret token"}
PRIVATE_VALUE, SECRET_VALUE = "n0te-1f2e3d", "t0ken-9a8b7c"


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=1) as cluster:
        yield cluster


def install_os(cl: InProcessCluster, exit_code: int = 0) -> Path:
    """The OS with a create script that records its parameters, echoes the
    secret (as a careless script might) and exits with ``exit_code``."""
    seen = cl.root / "create-env"
    script = (
        "#!/bin/sh\n"
        f"env | grep -E '^(OSP_|INSTANCE_REINSTALL=)' | sort >> {seen}\n"
        'echo "the token is $OSP_TOKEN, the note $OSP_NOTE"\n'
        f"exit {exit_code}\n"
    )
    make_os(cl.node(1).paths, OS_NAME, variants=None, parameters=PARAMS, scripts={"create": script})
    return seen


def create(**fields: Any) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": INST,
        "mode": "create",
        "disk_template": "file",
        "disks": [{"size": 4}],
        "nics": [],
        "os_type": OS_NAME,
        "pnode": testbed.node_name(1),
        "name_check": False,
        "ip_check": False,
        "start": False,
        "osparams": {"mirror": "http://m"},
        "osparams_private": {"note": PRIVATE_VALUE},
        "osparams_secret": {"token": SECRET_VALUE},
        **fields,
    }


async def test_create_gives_the_script_every_parameter_and_shows_none_hidden(
    cl: InProcessCluster,
) -> None:
    seen = install_os(cl)
    job = await cl.run(create())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert seen.read_text().splitlines() == [
        "OSP_MIRROR=http://m",
        f"OSP_NOTE={PRIVATE_VALUE}",
        f"OSP_TOKEN={SECRET_VALUE}",
    ]
    assert PRIVATE_VALUE not in repr((job.log, job.result))
    assert SECRET_VALUE not in repr((job.log, job.result))
    # The private value is kept (in the configuration); the secret one nowhere.
    assert files_holding(cl.root, SECRET_VALUE) == ["create-env"]
    inst = cl.instance(INST)
    assert inst is not None and inst.osparams_private == {"note": PRIVATE_VALUE}


async def test_a_failed_script_reports_its_output_with_hidden_values_redacted(
    cl: InProcessCluster,
) -> None:
    install_os(cl, exit_code=5)
    job = await cl.run(create())
    assert job.status == C.JOB_STATUS_ERROR
    assert "(exit code 5)" in job.error
    assert "the token is <redacted>, the note <redacted>" in job.error
    assert files_holding(cl.root, SECRET_VALUE) == ["create-env"]
    assert cl.instance(INST) is None


async def test_reinstall_runs_the_same_installer_with_its_own_secret(
    cl: InProcessCluster,
) -> None:
    seen = install_os(cl)
    job = await cl.run(create(osparams_secret={}))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    seen.unlink()
    other = "an0ther-t0ken"
    job = await cl.run(
        {
            "OP_ID": "OP_INSTANCE_REINSTALL",
            "instance_name": INST,
            "osparams_secret": {"token": other},
        }
    )
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert "Running the instance OS create scripts..." in job.log
    assert seen.read_text().splitlines() == [
        "INSTANCE_REINSTALL=1",
        "OSP_MIRROR=http://m",
        f"OSP_NOTE={PRIVATE_VALUE}",
        f"OSP_TOKEN={other}",
    ]
    assert files_holding(cl.root, other) == ["create-env"]


async def test_a_parameter_given_at_two_visibilities_is_refused_and_changes_nothing(
    cl: InProcessCluster,
) -> None:
    seen = install_os(cl)
    serial = cl.cfg.serial
    job = await cl.run(create(osparams={"token": "shown"}))
    assert job.status == C.JOB_STATUS_ERROR
    assert job.error == (
        "Cannot assign multiple values to OS parameters: 'token' at public and secret"
        " visibility; give each parameter at one visibility only"
    )
    assert cl.cfg.serial == serial and cl.instance(INST) is None and not seen.exists()
