"""Assembles masterd: configuration, job queue, locks, RPC and the luxi server."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib import intents
from corral.cmdlib.processor import Processor
from corral.config.manager import ConfigManager
from corral.crypto.certs import cert_info
from corral.jobs import records
from corral.jobs.queue import JobQueue
from corral.locking import LockManager
from corral.luxi import protocol
from corral.luxi.server import Handler, LuxiServer
from corral.master import legacy_state, master_ip, resources
from corral.master.luxi_methods import LuxiMethods
from corral.master.mirror_watch import MirrorWatch
from corral.master.standby import HomeChanged, SqliteStandbyMethods, StandbyMethods
from corral.objects import Cluster, Node
from corral.objects.filter_rule import FilterRule
from corral.paths import Paths
from corral.rpc.https import https_client
from corral.rpc.reachability import DEFAULT_MEMORY, DEFAULT_QUERY_DEADLINE
from corral.services import durable_flags
from corral.services.config_export import ConfigExport, ensure_confd_hmac_key
from corral.services.config_follower import ConfigFollower
from corral.services.context import Master
from corral.services.distribution import SsconfDistributor
from corral.services.durable import DurableState
from corral.services.etcd_members import EtcdMembers
from corral.services.mastership import LEASE_TTL, MastershipKeeper
from corral.services.ssconf import MasterSsconf, SsconfWriter
from corral.state import home
from corral.state.backend import Backend, open_backend
from corral.state.ports import Lease
from corral.state.relay import Relays

log = logging.getLogger(__name__)

# Seconds running jobs get to finish when masterd is asked to stop.
SHUTDOWN_GRACE = 10.0


@dataclass(frozen=True)
class Options:
    """masterd's tunables (the luxi limits and group: see LuxiServer; the query
    deadline and the memory of unreachable nodes: see RpcClient; the etcd check
    interval: see EtcdMembers; the mastership lease's time to live: see
    MastershipKeeper)."""

    luxi_max_message: int = protocol.MAX_MESSAGE_SIZE
    luxi_max_buffered: int = protocol.MAX_BUFFERED
    luxi_group: str | None = None
    query_deadline: float = DEFAULT_QUERY_DEADLINE
    unreachable_memory: float = DEFAULT_MEMORY
    etcd_check_interval: float = C.DEFAULT_ETCD_CHECK_INTERVAL
    lease_ttl: float = LEASE_TTL

    def luxi_server(self, paths: Paths, handler: Handler) -> LuxiServer:
        return LuxiServer(
            paths.master_socket,
            handler,
            self.luxi_max_message,
            self.luxi_max_buffered,
            self.luxi_group,
        )


def own_name(paths: Paths) -> str:
    """This node's name, as its certificate names it (blocking: a file read)."""
    name = cert_info(paths.server_pem)["subject"]
    if not isinstance(name, str) or not name:
        raise errors.ConfigurationError(f"{paths.server_pem} names no node")
    return name


async def serve(paths: Paths, ready: Callable[[], None], **options: Any) -> None:
    """Run masterd until cancelled (``options``: see Options).

    On a cluster whose stores live in etcd, masterd stands by until it holds
    the mastership, leads until it loses or hands it over, and stands by
    again; on a one-node cluster (SQLite) it leads until it is stopped.
    """
    opts = Options(**options)
    if not paths.config_db.exists() and not paths.store_home.exists():
        raise errors.NotClusterError(
            f"No cluster configuration at {paths.config_db}; run 'gnt-cluster init' first"
        )
    holder = await asyncio.to_thread(own_name, paths)
    ready_once = _once(ready)
    while True:
        where = await asyncio.to_thread(home.read, paths.store_home)
        if isinstance(where, home.SqliteHome) and where.master != holder:
            await _stand_by_sqlite(paths, SqliteStandbyMethods(holder, where), opts, ready_once)
            continue
        backend = await open_backend(paths, where)
        relays = Relays(backend.stores)  # the stores may move while masterd runs
        keeper = MastershipKeeper(backend.mastership, holder, opts.lease_ttl, backend.handover)
        follower = ConfigFollower(relays.config)  # warm while standing by
        try:
            lease = await _stand_by(paths, where, backend, keeper, follower, opts, ready_once)
        except BaseException as err:
            await relays.stores.close()
            await backend.close_rest()
            if isinstance(err, HomeChanged):
                log.info("corral-masterd opens the stores again: where they live changed")
                continue
            raise
        try:
            await _lead(paths, backend, relays, keeper, lease, follower, opts, ready_once)
        except errors.GenericError as err:
            if backend.handover is None:
                raise
            # The store failed it while it started: another candidate may lead.
            log.error("corral-masterd cannot lead: %s", err.message)
            await keeper.release()
            await relays.stores.close()
            await backend.close_rest()
            continue
        if keeper.handed_to is None and backend.handover is None:
            raise errors.ConfigurationError(keeper.reason)
        log.info("corral-masterd stands by again: %s", keeper.reason)


def _once(ready: Callable[[], None]) -> Callable[[], None]:
    """``ready`` called at most once (masterd is ready standing by or leading)."""
    called = False

    def call() -> None:
        nonlocal called
        if not called:
            called = True
            ready()

    return call


async def _stand_by(
    paths: Paths,
    where: home.Home | None,
    backend: Backend,
    keeper: MastershipKeeper,
    follower: ConfigFollower,
    opts: Options,
    ready: Callable[[], None],
) -> Lease:
    """The mastership: at once on a one-node cluster; else once it is free,
    answering luxi and following the configuration meanwhile (see
    corral.master.standby, corral.services.config_follower)."""
    if backend.handover is None:
        return await keeper.acquire()
    methods = StandbyMethods(paths, keeper, backend.mastership, backend.handover)

    async def eligible() -> bool:
        now = await asyncio.to_thread(home.read, paths.store_home)
        # No home: the node is no candidate any more (it stands by as before).
        if now is not None and now != where:
            raise HomeChanged
        return await methods.eligible()

    server = opts.luxi_server(paths, methods)
    await server.start()
    follower.start()
    ready()
    try:
        return await keeper.acquire(
            lambda why: log.info("corral-masterd stands by: %s", why), eligible
        )
    except BaseException:
        await follower.stop()
        raise
    finally:
        await server.close()


async def _stand_by_sqlite(
    paths: Paths, methods: SqliteStandbyMethods, opts: Options, ready: Callable[[], None]
) -> None:
    """Say why this node cannot be the master until the stores move again."""
    log.warning("corral-masterd cannot take the mastership over: %s", methods.why)
    server = opts.luxi_server(paths, methods)
    await server.start()
    ready()
    try:
        # No home: the node is no candidate any more; it keeps saying so.
        while (now := await asyncio.to_thread(home.read, paths.store_home)) in (
            None,
            methods.where,
        ):
            await asyncio.sleep(opts.lease_ttl / 3)  # the stores move rarely
        log.info("The master's stores moved: %s", now)
    finally:
        await server.close()


def _ip_deadline(keeper: MastershipKeeper) -> float:
    """Seconds the master IP gets to go down: well within what is left of the
    lease when it could not be renewed (a third of its time)."""
    return min(master_ip.FORMER_DEADLINE, keeper.ttl / 6)


def _while_leading(keeper: MastershipKeeper, handler: Handler) -> Handler:
    """``handler`` while this masterd holds the mastership.  A master frozen
    past its lease (SIGSTOP, a VM paused) may find, once it runs again, that
    another leads: until it notices, it answers nothing from its memory, which
    may be stale, and no answer made while the lease ran out is given."""

    def check() -> None:
        if not keeper.contested:
            return  # one node: nobody else can lead
        lease = keeper.lease
        if keeper.lost.is_set() or lease is None or lease.expires <= time.time():
            raise errors.OpPrereqError(
                "This master daemon's mastership lease ran out: another node may be the"
                " master now; try again",
                C.ECODE_STATE,
            )

    async def handle(method: str, args: Any) -> Any:
        check()
        result = await handler(method, args)
        check()
        return result

    return handle


async def _take_the_master_role(cfg: ConfigManager, holder: str) -> Node | None:
    """The configuration names this node the master (after a failover); the
    node it named before (None: none is known)."""
    node = cfg.find(Node, holder)
    if node is None:
        raise errors.ConfigurationError(f"This node ({holder}) is not in the configuration")
    former = cfg.get(Node, cfg.cluster.master_node)
    if cfg.cluster.master_node == node.uuid:
        return former
    tx = cfg.transaction()
    cluster = cfg.cluster.copy_for_update()
    assert isinstance(cluster, Cluster)
    cluster.master_node = node.uuid
    tx.update(cluster)
    await tx.commit()
    log.info("%s took the master role over from %s", holder, former.name if former else "?")
    return former


def _lease_end(keeper: MastershipKeeper) -> float | None:
    """When the lease ends (0: it was taken over or released): no other master
    leads before.  A master that stops leading before it ends (its renewals
    fail, it hands over) may still call its nodes until then: it takes the
    master IP down.  None where no other node can lead (the stores in SQLite
    on this node): a node whose clock is off must not refuse its only master."""
    if not keeper.contested:
        return None
    lease = keeper.lease
    return 0.0 if lease is None else lease.expires


async def _master_of(
    paths: Paths,
    backend: Backend,
    relays: Relays,
    keeper: MastershipKeeper,
    lease: Lease,
    cfg: ConfigManager,
    opts: Options,
) -> tuple[Master, MasterSsconf]:
    """The master's parts (durable state, its ssconf files, node calls, the
    queue) around ``cfg``, acting with ``lease``'s token; its ssconf files."""
    durable = await DurableState.open(relays.kv, lease.token)
    await legacy_state.move_into(durable, paths)
    ssconf = MasterSsconf(cfg, SsconfWriter(paths))  # the master's own ssconf files
    await ssconf.start()
    cfg.add_listener(ssconf.changed)
    rpc = https_client(
        paths,
        cfg.cluster.noded_port,
        query_deadline=opts.query_deadline,
        unreachable_memory=opts.unreachable_memory,
    )
    rpc.fence = lease.token  # a node refuses its calls once a newer master called it
    rpc.fence_until = functools.partial(_lease_end, keeper)
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
    return master, ssconf


async def _lead(
    paths: Paths,
    backend: Backend,
    relays: Relays,
    keeper: MastershipKeeper,
    lease: Lease,
    follower: ConfigFollower,
    opts: Options,
    ready: Callable[[], None],
) -> None:
    """Act as the master until the mastership is lost or handed over."""
    cfg = await follower.take()
    cfg.fence = lease.token
    former = await _take_the_master_role(cfg, keeper.holder)
    master, ssconf = await _master_of(paths, backend, relays, keeper, lease, cfg, opts)
    queue = master.queue
    distributor = SsconfDistributor(master)  # ssconf files on the other nodes
    cfg.add_listener(distributor.changed)
    await asyncio.to_thread(ensure_confd_hmac_key, paths)
    export = master.config_export = ConfigExport(master)  # config.data here and on candidates
    await export.start()
    cfg.add_listener(export.changed)
    members = master.etcd_members = EtcdMembers(master, opts.etcd_check_interval)
    cfg.add_listener(members.changed)
    mirrors = MirrorWatch(master)  # mirrored disks whose secondary failed
    cfg.add_listener(mirrors.changed)
    queue.fence = lease.token
    await queue.recover(
        records.moved_away(former.name, keeper.holder)
        if former is not None and former.name != keeper.holder
        else records.UNCLEAN_SHUTDOWN
    )
    server = opts.luxi_server(paths, _while_leading(keeper, LuxiMethods(master)))
    await server.start()
    # Everything so far (modules, pydantic schemas, configuration) lives as long
    # as masterd: keep it out of the cyclic collector's full collections, which
    # otherwise walk it again and again while a big query allocates its rows.
    gc.freeze()
    queue.start()
    # What interrupted operations left on the nodes (see recover_job).
    intents.resolve_in_background(master)
    members.start()
    mirrors.follow()
    taking_ip = asyncio.get_running_loop().create_task(master_ip.take(master, former))
    log.info("corral-masterd ready on %s (config serial %s)", paths.master_socket, cfg.serial)
    ready()
    try:
        await keeper.lost.wait()
    finally:
        log.info("corral-masterd stopping")
        await server.close()
        # Stopped or handing over, the lease still runs: running jobs may end.
        # Lost, this master must stop acting at once (its writes are refused).
        deposed = keeper.lost.is_set() and keeper.handed_to is None
        await queue.shutdown(0.0 if deposed else SHUTDOWN_GRACE)
        taking_ip.cancel()
        await asyncio.gather(taking_ip, return_exceptions=True)
        await master_ip.drop(master, _ip_deadline(keeper))
        await intents.stop_background(master)
        await mirrors.stop()
        await members.stop()
        await distributor.stop()
        await export.stop()
        await ssconf.stop()
        await master.rpc.close()
        await relays.jobs.close()
        await cfg.close()
        await master.durable.close()
        await keeper.release()
        await (master.backend or backend).close_rest()  # the stores may have moved
