"""mond inside corral-noded: Ganeti's monitoring paths over plain HTTP.

Paths (GET only; any other method gets 405):

- ``/``: the API versions, ``[1]``; ``/1``: ``null`` (as Ganeti's)
- ``/1/list/collectors``: ``[[name, category, kind], ...]``
- ``/1/report/all``: every collector's report
- ``/1/report/<category>/<collector>``: one report; an unknown one is 404
  ``Unable to produce a report for the requested resource`` (Ganeti's text)
- ``/metrics``: on the master node (by its ssconf files) masterd's metrics
  in Prometheus's text format 0.0.4; on any other node 404 saying where they are
- anything else: 404 ``Resource not found`` (Ganeti's text)

Read-only: nothing here changes the node or the cluster.  If the port is
taken, mond is off on the node (logged) and noded runs on, as with confd.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web

from corral import errors
from corral.metrics.registry import CONTENT_TYPE
from corral.mond import collectors as dc
from corral.mond.master import master_metrics, master_of
from corral.paths import Paths

log = logging.getLogger(__name__)

API_VERSION = 1
NOT_FOUND = "Resource not found"
NO_REPORT = "Unable to produce a report for the requested resource"
NOT_ALLOWED = "Method not allowed: the monitoring daemon answers GET only"
CATEGORIES = frozenset({"instance", "storage", "daemon", "hypervisor", dc.DEFAULT_CATEGORY})
# Seconds an idle keep-alive connection stays open.
KEEPALIVE = 15.0


def _json(value: Any) -> web.Response:
    return web.Response(text=json.dumps(value), content_type="application/json")


def _text(status: int, text: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", headers=headers)


class Mond:
    """The monitoring daemon of one node (its root, its noded address)."""

    def __init__(self, paths: Paths, address: str) -> None:
        self.paths = paths
        self.address = address
        self.cpu = dc.CpuAvgLoad()
        self.collectors: list[dc.Collector] = [self.cpu, dc.DiskStats()]

    def app(self) -> web.Application:
        """The aiohttp application: one handler routes every request."""
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        """Answer one request (see the module's paths)."""
        if request.method != "GET":
            return _text(405, NOT_ALLOWED, Allow="GET")
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return _json([API_VERSION])
        if parts == ["metrics"]:
            return await self._metrics()
        if parts[0] != str(API_VERSION):
            return _text(404, NOT_FOUND)
        rest = parts[1:]
        if not rest:
            return _json(None)
        if rest == ["list", "collectors"]:
            return _json(dc.listing(self.collectors))
        if rest[0] == "report":
            return await self._report(rest[1:])
        return _text(404, NOT_FOUND)

    async def _report(self, rest: list[str]) -> web.Response:
        if rest == ["all"]:
            return _json([await c.report() for c in self.collectors])
        if len(rest) == 2 and rest[0] in CATEGORIES:
            category = None if rest[0] == dc.DEFAULT_CATEGORY else rest[0]
            for collector in self.collectors:
                if collector.name == rest[1] and collector.category == category:
                    return _json(await collector.report())
        return _text(404, NO_REPORT)

    async def _metrics(self) -> web.Response:
        is_master, master = await asyncio.to_thread(master_of, self.paths, self.address)
        if not is_master:
            where = f"the master node, {master}" if master else "the master node"
            return _text(
                404,
                f"Not the master node: /metrics is served on {where} only; this node's"
                " data is at /1/report/all",
            )
        try:
            text = await master_metrics(self.paths)
        except errors.GenericError as err:
            return _text(503, f"Cannot get the master's metrics: {err.message}")
        return web.Response(text=text, headers={"Content-Type": CONTENT_TYPE})

    async def run(self, port: int) -> None:
        """Serve on ``address:port`` and sample until cancelled."""
        runner = web.AppRunner(self.app(), access_log=None, keepalive_timeout=KEEPALIVE)
        await runner.setup()
        sampler = asyncio.create_task(self.cpu.run())
        try:
            site = web.TCPSite(runner, self.address, port)
            try:
                await site.start()
            except OSError as err:
                log.error(
                    "mond: cannot listen on TCP %s:%d: %s; mond is off on this node",
                    self.address,
                    port,
                    err.strerror or err,
                )
                return
            log.info("mond: listening on TCP %s:%d", self.address, port)
            await asyncio.Event().wait()
        finally:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
            await runner.cleanup()
