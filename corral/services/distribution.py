"""The cluster's files on every node: the ssconf files after each change that
touches them, and everything (``gnt-cluster redist-conf``) on demand.
``config.data`` is kept on master candidates by its exporter
(:mod:`corral.services.config_export`); here it follows the candidates' roles
and ``redist-conf``.

The master writes its own ssconf files (:mod:`corral.services.ssconf`); the other
online nodes get theirs from :class:`SsconfDistributor` in the background: a
burst of changes costs one push, and an unreachable node only a warning in
the log (``redist-conf`` or the next change repairs it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from corral.objects import Node
from corral.rpc.calls_membership import node_demote_from_mc, write_ssconf_files
from corral.rpc.calls_node import upload_file
from corral.services.ssconf import affects_ssconf, ssconf_values

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.paths import Paths
    from corral.rpc.result import RpcResult
    from corral.services.context import Master

log = logging.getLogger(__name__)


def other_online_nodes(cfg: ConfigManager) -> list[Node]:
    """The nodes that get files from the master: online, not the master itself."""
    master = cfg.cluster.master_node
    return [n for n in cfg.nodes() if not n.offline and n.uuid != master]


def ancillary_files(paths: Paths, node: Node) -> list[tuple[Path, int]]:
    """``(file, mode)`` a node keeps a copy of (some for master candidates only)."""
    files = [
        (paths.ca_cert, 0o644),
        (paths.cluster_domain_secret, 0o600),
        (paths.confd_hmac_key, 0o600),
    ]
    if node.master_candidate:
        files += [(path, 0o600) for path in paths.candidate_files]
    return files


async def push_ssconf(
    master: Master, nodes: list[Node], values: dict[str, str] | None = None
) -> dict[str, RpcResult[None]]:
    """Send the ssconf ``values`` (default: the current ones) to ``nodes``;
    their results by uuid."""
    if not nodes:
        return {}
    values = ssconf_values(master.cfg) if values is None else values
    return await master.rpc.results(nodes, write_ssconf_files(values))


async def _upload(master: Master, node: Node) -> list[str]:
    """Upload the ancillary files to one node, and take the candidates' files
    from it if it is not one; the failures' messages."""
    problems: list[str] = []
    for path, mode in ancillary_files(master.paths, node):
        if path == master.paths.config_data:
            continue  # the exporter's to send (see _send_config)
        data = base64.b64encode(await asyncio.to_thread(path.read_bytes)).decode("ascii")
        request = upload_file(master.paths.to_wire(path), data, mode, None, None, None, None)
        what = f"Copy of file {master.paths.to_wire(path)} to node {node.name} failed"
        result = await master.rpc.attempt(node, request, problems.append, what)
        if result.offline:
            return problems
    if not node.master_candidate:
        what = f"Node {node.name} failed to demote itself"
        await master.rpc.attempt(node, node_demote_from_mc(), problems.append, what)
    return problems


async def candidate_roles_changed(master: Master, nodes: list[Node]) -> list[str]:
    """After ``nodes`` became master candidates or stopped being ones (as
    committed): the candidates' files reach the new ones and leave the others
    (offline nodes are left alone, as Ganeti does); the failures' messages."""
    export = master.config_export
    async with export.lock if export else contextlib.nullcontext():
        uploads = await asyncio.gather(*(_upload(master, n) for n in nodes if not n.offline))
        problems = [text for texts in uploads for text in texts]
        if export is not None:
            export.forget([n for n in nodes if not n.master_candidate])
            problems += await _send_config(master, nodes)
    return problems


async def _send_config(master: Master, nodes: list[Node]) -> list[str]:
    """config.data to the online candidates among ``nodes`` (with the
    exporter's lock held); the failures."""
    assert master.config_export is not None
    candidates = [n for n in nodes if n.master_candidate and not n.offline]
    return await master.config_export.send(candidates, force=True)


async def redistribute(master: Master, nodes: list[Node]) -> list[str]:
    """Send every distributed file and the ssconf files to ``nodes``; the failures."""
    uploads = await asyncio.gather(*(_upload(master, n) for n in nodes))
    problems = [text for texts in uploads for text in texts]
    export = master.config_export
    if export is not None:
        await export.settled()
        async with export.lock:
            problems += await _send_config(master, nodes)
    results = await push_ssconf(master, nodes)
    for node in nodes:
        results[node.uuid].report(
            problems.append, f"Cannot write the ssconf files on node {node.name}"
        )
    return problems


class SsconfDistributor:
    """Keeps the other nodes' ssconf files current: a config listener plus one task."""

    def __init__(self, master: Master) -> None:
        self._master = master
        self._loop = asyncio.get_running_loop()
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # What every node got at the last push (None: some did not): a change
        # that leaves the values as they were (an instance started) sends nothing.
        self._pushed: tuple[frozenset[str], dict[str, str]] | None = None

    def changed(self, cfg: ConfigManager, tables: set[str]) -> None:
        """The config listener: schedule a push if the ssconf files changed
        (from any thread: a commit may run in a worker thread)."""
        if affects_ssconf(tables):
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self._dirty.set()
        if self._task is None:
            self._task = self._loop.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            nodes = other_online_nodes(self._master.cfg)
            wanted = (frozenset(n.uuid for n in nodes), ssconf_values(self._master.cfg))
            if wanted == self._pushed:
                continue
            self._pushed = None
            try:
                results = await push_ssconf(self._master, nodes, wanted[1])
            except Exception:
                log.exception("Pushing the ssconf files failed")
                continue
            for uuid, result in results.items():
                result.report(log.warning, f"ssconf files not written on node {uuid}")
            if not any(result.failed for result in results.values()):
                self._pushed = wanted

    async def stop(self) -> None:
        """Stop the background task (at masterd's shutdown)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
