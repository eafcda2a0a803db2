"""confd's service over real UDP on loopback: a configuration that arrives
between two looks at the files is answered from at once, not as missing
(Ganeti's burnin asks every candidate right after a change)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corral.confd import client, server
from corral.confd import protocol as P
from corral.fileio import atomic_write
from corral.paths import Paths
from tests.unit.test_confd_answers import CONFIG, KEY


async def _ask(paths: Paths, kind: P.Request) -> client.Reply:
    endpoint = client.local_endpoint(str(paths.root))
    return await asyncio.to_thread(client.ask, KEY, endpoint, kind, None, 5)


async def _serving(paths: Paths) -> asyncio.Task[None]:
    service = server.ConfdService(paths, "127.0.0.1", 0)
    task = asyncio.create_task(service.run())
    while not paths.confd_endpoint.exists():  # written once it listens
        await asyncio.sleep(0)
        if task.done():
            task.result()
    return task


async def test_a_configuration_arriving_is_answered_from_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "RELOAD_INTERVAL", 3600.0)  # no periodic look helps
    paths = Paths(tmp_path)
    paths.confd_hmac_key.parent.mkdir(parents=True, exist_ok=True)
    paths.confd_hmac_key.write_bytes(KEY)
    task = await _serving(paths)
    try:
        missing = await _ask(paths, P.Request.PING)
        assert (missing.status, missing.answer) == (P.Status.ERROR, server.NO_CONFIG)
        atomic_write(paths.config_data, json.dumps(CONFIG).encode())
        found = await _ask(paths, P.Request.CLUSTER_MASTER)
        assert (found.status, found.answer) == (P.Status.OK, "node1.example.com")
        changed = {**CONFIG, "cluster": {**CONFIG["cluster"], "serial_no": 7000}}
        atomic_write(paths.config_data, json.dumps(changed).encode())
        assert (await _ask(paths, P.Request.CLUSTER_MASTER)).serial == 7000
        paths.config_data.unlink()
        gone = await _ask(paths, P.Request.PING)
        assert (gone.status, gone.answer) == (P.Status.ERROR, server.NO_CONFIG)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
