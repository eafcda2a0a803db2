"""Corral's RAPI client against a real corral-rapi: HTTPS with the cluster's
rapi.pem, real users, real jobs on the fake hypervisor; the blocking and the
asyncio transports run the same scenarios."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.rapi.client import (
    AsyncRapiClient,
    CertificateError,
    RapiClient,
    RapiConnectionError,
    RapiError,
)
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.noded import free_port
from tests.helpers.osdef import make_os

USERS = "alice {cleartext}pw write\nbob {CLEARTEXT}ro read\n"
Client = RapiClient | AsyncRapiClient


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("rapi-client")) as cluster:
        make_os(cluster.paths, "plain", variants=None)
        users = cluster.paths.rapi_users_file
        users.parent.mkdir(parents=True, exist_ok=True)
        users.write_text(USERS)
        yield cluster


def _client(cl: TestCluster, kind: str, **kwargs: Any) -> Client:
    kwargs.setdefault("ca_file", str(cl.paths.rapi_pem))
    factory = RapiClient if kind == "blocking" else AsyncRapiClient
    return factory(cl.node_ip, **kwargs)


async def _close(client: Client) -> None:
    if isinstance(client, AsyncRapiClient):
        await client.close()
    else:
        client.close()


@pytest.fixture(params=["blocking", "async"])
async def writer(request: pytest.FixtureRequest, cl: TestCluster) -> AsyncIterator[Client]:
    client = _client(cl, request.param, username="alice", password="pw")
    yield client
    await _close(client)


async def do(result: Any) -> Any:
    """The result of a call of either transport (a coroutine's is awaited)."""
    return await result if inspect.isawaitable(result) else result


async def run_job(client: Client, job_id: Any, log: list[Any] | None = None) -> dict[str, Any]:
    assert isinstance(job_id, int)
    feedback = None if log is None else log.append
    status: dict[str, Any] = await do(client.wait_for_job(job_id, timeout=120, feedback=feedback))
    assert status["status"] == "success", status
    return status


async def test_cluster_reads(writer: Client, cl: TestCluster) -> None:
    assert await do(writer.get_version()) == 2
    assert "instance-create-reqv1" in await do(writer.get_features())
    info = await do(writer.get_info())
    assert info["name"] == cl.cluster_name
    assert await do(writer.get_nodes()) == [cl.node_name]
    assert await do(writer.get_node_role(cl.node_name)) == "master"
    assert "default" in await do(writer.get_groups())
    fields = await do(writer.query_fields("instance", ["name", "status"]))
    assert [f["name"] for f in fields["fields"]] == ["name", "status"]


async def test_instance_life_cycle(writer: Client, cl: TestCluster) -> None:
    name = f"inst-{type(writer).__name__.lower()}.example.com"
    log: list[Any] = []
    job_id = await do(
        writer.create_instance(
            "create",
            name,
            "diskless",
            [],
            [],
            os_type="plain",
            pnode=cl.node_name,
            name_check=False,
            ip_check=False,
            start=False,
        )
    )
    status = await run_job(writer, job_id, log)
    assert status["id"] == job_id or int(status["id"]) == job_id
    # the log entries the wait loop saw are those of the job
    assert log
    assert [entry[0] for entry in log] == [entry[0] for entry in status["oplog"][0]]
    assert name in await do(writer.get_instances())
    bulk = {i["name"]: i for i in await do(writer.get_instances(bulk=True))}
    assert bulk[name]["admin_state"] == "down"

    await run_job(writer, await do(writer.startup_instance(name)))
    assert (await do(writer.get_instance(name)))["status"] == "running"
    await run_job(writer, await do(writer.shutdown_instance(name, timeout=0)))
    assert (await do(writer.get_instance(name)))["status"] == "ADMIN_down"

    await run_job(writer, await do(writer.add_instance_tags(name, ["web", "rack/3:a+b"])))
    assert sorted(await do(writer.get_instance_tags(name))) == ["rack/3:a+b", "web"]
    await run_job(writer, await do(writer.delete_instance_tags(name, ["web"])))
    assert await do(writer.get_instance_tags(name)) == ["rack/3:a+b"]

    rows = await do(writer.query("instance", ["name", "status"], ["=", "name", name]))
    assert rows["data"] == [[[0, name], [0, "ADMIN_down"]]]

    await run_job(writer, await do(writer.delete_instance(name)))
    assert name not in await do(writer.get_instances())


async def test_errors_are_decoded(writer: Client, cl: TestCluster) -> None:
    with pytest.raises(RapiError) as err:
        await do(writer.get_instance("no-such-instance.example.com"))
    assert err.value.code == 404
    assert err.value.message and err.value.explain
    # a name with a slash stays one path component (so: not found, not another resource)
    with pytest.raises(RapiError) as err:
        await do(writer.get_instance_tags("a/../../info"))
    assert err.value.code == 404


@pytest.mark.parametrize("kind", ["blocking", "async"])
async def test_access_errors(kind: str, cl: TestCluster) -> None:
    anonymous = _client(cl, kind)
    reader = _client(cl, kind, username="bob", password="ro")
    wrong = _client(cl, kind, username="alice", password="not-pw")
    try:
        # reading is open; writing needs a write user
        assert await do(anonymous.get_cluster_tags()) == await do(reader.get_cluster_tags())
        with pytest.raises(RapiError) as err:
            await do(anonymous.add_cluster_tags(["nope"]))
        assert err.value.code == 401
        with pytest.raises(RapiError) as err:
            await do(reader.add_cluster_tags(["nope"]))
        assert err.value.code == 403
        with pytest.raises(RapiError) as err:
            await do(wrong.add_cluster_tags(["nope"]))
        assert err.value.code == 401
        assert "nope" not in await do(reader.get_cluster_tags())
    finally:
        for client in (anonymous, reader, wrong):
            await _close(client)


@pytest.mark.parametrize("kind", ["blocking", "async"])
async def test_certificate_and_connection_errors(
    kind: str, cl: TestCluster, tmp_path: Path
) -> None:
    # the cluster CA did not sign rapi.pem (it is self-signed)
    other_ca = _client(cl, kind, ca_file=str(cl.paths.ca_cert))
    closed = _client(cl, kind, port=free_port(cl.node_ip))
    try:
        with pytest.raises(CertificateError):
            await do(other_ca.get_version())
        with pytest.raises(RapiConnectionError) as err:
            await do(closed.get_version())
        assert err.value.code is None
    finally:
        await _close(other_ca)
        await _close(closed)


def test_blocking_client_keeps_its_connection(cl: TestCluster) -> None:
    with RapiClient(cl.node_ip, ca_file=str(cl.paths.rapi_pem)) as client:
        client.get_version()
        conn = client._conn
        for _ in range(5):
            client.get_info()
        assert client._conn is conn
