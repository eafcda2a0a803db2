"""Assembles masterd: configuration, job queue, locks, RPC and the luxi server."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable

from corral import constants as C
from corral.cmdlib import intents
from corral.cmdlib.processor import Processor
from corral.config.manager import ConfigManager
from corral.jobs.queue import JobQueue
from corral.locking import LockManager
from corral.luxi import protocol
from corral.luxi.server import LuxiServer
from corral.master import legacy_state, resources
from corral.master.luxi_methods import LuxiMethods
from corral.objects.filter_rule import FilterRule
from corral.paths import Paths
from corral.rpc.https import https_client
from corral.rpc.reachability import DEFAULT_MEMORY, DEFAULT_QUERY_DEADLINE
from corral.services import durable_flags
from corral.services.config_export import ConfigExport, ensure_confd_hmac_key
from corral.services.context import Master
from corral.services.distribution import SsconfDistributor
from corral.services.durable import DurableState
from corral.services.etcd_members import EtcdMembers
from corral.services.mastership import LEASE_TTL, MastershipKeeper
from corral.services.ssconf import MasterSsconf, SsconfWriter
from corral.state.backend import open_backend
from corral.state.relay import Relays

log = logging.getLogger(__name__)

# Seconds running jobs get to finish when masterd is asked to stop.
SHUTDOWN_GRACE = 10.0


async def serve(
    paths: Paths,
    ready: Callable[[], None],
    luxi_max_message: int = protocol.MAX_MESSAGE_SIZE,
    luxi_max_buffered: int = protocol.MAX_BUFFERED,
    luxi_group: str | None = None,
    query_deadline: float = DEFAULT_QUERY_DEADLINE,
    unreachable_memory: float = DEFAULT_MEMORY,
    etcd_check_interval: float = C.DEFAULT_ETCD_CHECK_INTERVAL,
    lease_ttl: float = LEASE_TTL,
) -> None:
    """Run masterd until cancelled (the luxi limits and group: see LuxiServer;
    the query deadline and the memory of unreachable nodes: see RpcClient;
    the etcd check interval: see EtcdMembers; the mastership lease's time to
    live: see MastershipKeeper)."""
    from corral import errors

    if not paths.config_db.exists():
        raise errors.NotClusterError(
            f"No cluster configuration at {paths.config_db}; run 'gnt-cluster init' first"
        )
    backend = await open_backend(paths)
    relays = Relays(backend.stores)  # the stores may move while masterd runs
    keeper = MastershipKeeper(backend.mastership, lease_ttl)
    lease = await keeper.acquire()
    cfg = await ConfigManager.open(relays.config)
    cfg.fence = lease.token
    durable = await DurableState.open(relays.kv, lease.token)
    await legacy_state.move_into(durable, paths)
    ssconf = MasterSsconf(cfg, SsconfWriter(paths))  # the master's own ssconf files
    await ssconf.start()
    cfg.add_listener(ssconf.changed)
    rpc = https_client(
        paths,
        cfg.cluster.noded_port,
        query_deadline=query_deadline,
        unreachable_memory=unreachable_memory,
    )
    rpc.fence = lease.token  # a node refuses its calls once a newer master called it
    store = relays.jobs
    processor = Processor()
    locks = LockManager()
    queue = JobQueue(
        store,
        processor,
        lambda: cfg.cluster.max_running_jobs,
        locks.set_priority,
        cfg.filter_rules(),
        drained=lambda: durable_flags.drained(durable),
    )
    # As luxid: a change of the filter rules re-filters the queue at once.
    cfg.add_listener(
        lambda c, tables: (
            queue.set_filter_rules(c.filter_rules()) if FilterRule.TABLE in tables else None
        )
    )
    master = Master(
        paths=paths,
        cfg=cfg,
        durable=durable,
        rpc=rpc,
        locks=locks,
        queue=queue,
        query=lambda what, fields, qfilter: resources.query(master, what, fields, qfilter),
        ssconf=ssconf,
        backend=backend,
        relays=relays,
        keeper=keeper,
    )
    processor.bind(master)
    distributor = SsconfDistributor(master)  # ssconf files on the other nodes
    cfg.add_listener(distributor.changed)
    await asyncio.to_thread(ensure_confd_hmac_key, paths)
    export = master.config_export = ConfigExport(master)  # config.data here and on candidates
    await export.start()
    cfg.add_listener(export.changed)
    members = master.etcd_members = EtcdMembers(master, etcd_check_interval)
    cfg.add_listener(members.changed)
    queue.fence = lease.token
    await queue.recover()
    server = LuxiServer(
        paths.master_socket, LuxiMethods(master), luxi_max_message, luxi_max_buffered, luxi_group
    )
    await server.start()
    # Everything so far (modules, pydantic schemas, configuration) lives as long
    # as masterd: keep it out of the cyclic collector's full collections, which
    # otherwise walk it again and again while a big query allocates its rows.
    gc.freeze()
    queue.start()
    # What interrupted operations left on the nodes (see recover_job).
    intents.resolve_in_background(master)
    members.start()
    log.info("corral-masterd ready on %s (config serial %s)", paths.master_socket, cfg.serial)
    ready()
    try:
        await keeper.lost.wait()
    finally:
        log.info("corral-masterd stopping")
        await server.close()
        await queue.shutdown(SHUTDOWN_GRACE)
        await intents.stop_background(master)
        await members.stop()
        await distributor.stop()
        await export.stop()
        await ssconf.stop()
        await rpc.close()
        await store.close()
        await cfg.close()
        await durable.close()
        await keeper.release()
        await (master.backend or backend).close_rest()  # the stores may have moved
    raise errors.ConfigurationError(keeper.reason)
