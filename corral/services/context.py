"""masterd's parts as everything inside masterd sees them: logical units,
query resources, the luxi methods and the hooks runner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.jobs.queue import JobQueue
    from corral.locking import LockManager
    from corral.paths import Paths
    from corral.rpc.client import RpcClient
    from corral.services.config_export import ConfigExport
    from corral.services.durable import DurableState
    from corral.services.etcd_members import EtcdMembers
    from corral.services.mastership import MastershipKeeper
    from corral.services.ssconf import MasterSsconf
    from corral.state.backend import Backend
    from corral.state.relay import Relays

# Ganeti's Query (resource, fields, filter) → {"fields": ..., "data": ...}:
# how a logical unit asks a query resource without importing it.
QueryFn = Callable[[Any, list[str], Any], Awaitable[dict[str, Any]]]


@dataclass
class Master:
    """masterd's configuration, durable state, RPC client, locks, job queue
    and queries."""

    paths: Paths
    cfg: ConfigManager
    durable: DurableState
    rpc: RpcClient
    locks: LockManager
    queue: JobQueue
    query: QueryFn
    # config.data's writer (None where no masterd runs: in-process tests).
    config_export: ConfigExport | None = None
    # The master's ssconf files, which a job waits for (masterd sets it).
    ssconf: MasterSsconf | None = None
    # The etcd membership service (None where no masterd runs).
    etcd_members: EtcdMembers | None = None
    # The stores in force, the relays that pass calls to them and the
    # mastership's keeper (None where no masterd runs).
    backend: Backend | None = None
    relays: Relays | None = None
    keeper: MastershipKeeper | None = None
