"""The luxi methods masterd answers, with argument checks."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.cmdlib.cluster import cluster_info
from corral.master import filter_rules, resources
from corral.master.standby import TAKE_MASTERSHIP
from corral.metrics.master import MasterMetrics
from corral.node.join_protocol import pem_fingerprint
from corral.query.filter import simple_filter
from corral.services import durable_flags, join_tokens
from corral.services.watcher_pause import PauseSender

if TYPE_CHECKING:
    from corral.services.context import Master


def _job_id(value: Any) -> int:
    """Job ids arrive as numbers or numeric strings (as from Ganeti's clients)."""
    if isinstance(value, bool):
        raise errors.OpPrereqError(f"Invalid job id {value!r}", C.ECODE_INVAL)
    try:
        job_id = int(value)
    except (TypeError, ValueError):
        raise errors.OpPrereqError(f"Invalid job id {value!r}", C.ECODE_INVAL) from None
    if job_id < 0:
        raise errors.OpPrereqError(f"Invalid job id {value!r}", C.ECODE_INVAL)
    return job_id


def _args(args: Any, method: str, low: int, high: int | None = None) -> list[Any]:
    if not isinstance(args, list):
        raise errors.LuxiError(f"{method}: the arguments must be a JSON list")
    high = low if high is None else high
    if not low <= len(args) <= high:
        want = str(low) if low == high else f"{low} to {high}"
        raise errors.LuxiError(f"{method} takes {want} argument(s), got {len(args)}")
    return list(args) + [None] * (high - len(args))


def _number(value: Any, what: str) -> float:
    """A finite JSON number (NaN and infinities never pass the protocol, but a
    huge integer is finite only as an integer)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise errors.OpPrereqError(f"{what} must be a number, got {value!r}", C.ECODE_INVAL)
    number = float(value)
    if not math.isfinite(number):
        raise errors.OpPrereqError(f"{what} must be a finite number, got {value!r}", C.ECODE_INVAL)
    return number


def _name(value: Any, what: str, optional: bool = False) -> Any:
    """A string argument (or None, if ``optional``)."""
    if (value is None and optional) or isinstance(value, str):
        return value
    raise errors.OpPrereqError(f"{what} must be a string, got {value!r}", C.ECODE_INVAL)


def _str_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise errors.OpPrereqError(f"{what} must be a list of strings", C.ECODE_INVAL)
    return value


class LuxiMethods:
    """Dispatches luxi requests to the queue, config and lock manager."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.metrics = MasterMetrics(master.cfg, master.queue.stats, master.rpc)
        self._pause = PauseSender(master)
        self._table: dict[str, Callable[[Any], Awaitable[Any]]] = {
            "SubmitJob": self.submit_job,
            "SubmitJobToDrainedQueue": self.submit_job_drained,
            "SubmitManyJobs": self.submit_many_jobs,
            "WaitForJobChange": self.wait_for_job_change,
            "PickupJob": self.pickup_job,
            "CancelJob": self.cancel_job,
            "ArchiveJob": self.archive_job,
            "AutoArchiveJobs": self.auto_archive_jobs,
            "ChangeJobPriority": self.change_job_priority,
            "QueryJobs": self.query_jobs,
            "Query": self.query,
            "QueryFields": self.query_fields,
            "QueryClusterInfo": self.query_cluster_info,
            "QueryConfigValues": self.query_config_values,
            "QueryTags": self.query_tags,
            "QueryInstances": self.query_instances,
            "QueryNodes": self.query_nodes,
            "QueryGroups": self.query_groups,
            "QueryNetworks": self.query_networks,
            "QueryExports": self.query_exports,
            "SetDrainFlag": self.set_drain_flag,
            "SetWatcherPause": self.set_watcher_pause,
            # Corral's own: gnt-node join-token (Ganeti adds nodes over SSH).
            "CreateJoinToken": self.create_join_token,
            # Corral's own: gnt-cluster master-failover (see corral.master.standby).
            TAKE_MASTERSHIP: self.take_mastership,
            "QueryFilters": self._filter_call(filter_rules.query_filters),
            "ReplaceFilter": self._filter_call(filter_rules.replace_filter),
            "DeleteFilter": self._filter_call(filter_rules.delete_filter),
            # Corral's own: the metrics in Prometheus's text format (noded's mond
            # serves them on the master as /metrics; see corral.mond).
            "CorralMetrics": self.corral_metrics,
        }

    async def __call__(self, method: str, args: Any) -> Any:
        return await self._table[method](args)

    async def corral_metrics(self, args: Any) -> str:
        """The master's metrics as Prometheus's text format 0.0.4 (a string)."""
        _args(args, "CorralMetrics", 0)
        return self.metrics.render()

    def _filter_call(
        self, method: Callable[[Master, Any], Awaitable[Any]]
    ) -> Callable[[Any], Awaitable[Any]]:
        """A filter-rule call of ``corral.master.filter_rules``, for this master."""

        async def call(args: Any) -> Any:
            return await method(self.master, args)

        return call

    async def take_mastership(self, args: Any) -> Any:
        _args(args, TAKE_MASTERSHIP, 0, 1)
        master = self.master.cfg.master_node
        raise errors.OpPrereqError(
            "This commands must be run on the node where you want the new master to be."
            f" {master.name} is already the master",
            C.ECODE_INVAL,
        )

    async def submit_job(self, args: Any) -> Any:
        (ops,) = _args(args, "SubmitJob", 1)
        return await self.master.queue.submit(ops)

    async def submit_job_drained(self, args: Any) -> Any:
        (ops,) = _args(args, "SubmitJobToDrainedQueue", 1)
        return await self.master.queue.submit(ops, ignore_drain=True)

    async def submit_many_jobs(self, args: Any) -> Any:
        (jobs,) = _args(args, "SubmitManyJobs", 1)
        return [r[:2] for r in await self.master.queue.submit_many(jobs)]

    async def wait_for_job_change(self, args: Any) -> Any:
        job_id, fields, prev_info, prev_serial, timeout = _args(args, "WaitForJobChange", 5)
        fields = _str_list(fields, "fields")
        seconds = _number(timeout, "WaitForJobChange timeout")
        if prev_serial is not None and (
            not isinstance(prev_serial, int) or isinstance(prev_serial, bool)
        ):
            raise errors.OpPrereqError("prev_log_serial must be a number", C.ECODE_INVAL)
        return await self.master.queue.queries.wait_for_change(
            _job_id(job_id), fields, prev_info, prev_serial, seconds
        )

    async def pickup_job(self, args: Any) -> Any:
        # luxid's answer: job processes pick up their jobs themselves.
        raise errors.GenericError("Luxi call 'PickupJob' is for internal use only")

    async def cancel_job(self, args: Any) -> Any:
        job_id, kill = _args(args, "CancelJob", 1, 2)
        return await self.master.queue.cancel(_job_id(job_id), bool(kill))

    async def archive_job(self, args: Any) -> Any:
        (job_id,) = _args(args, "ArchiveJob", 1)
        return await self.master.queue.archive(_job_id(job_id))

    async def auto_archive_jobs(self, args: Any) -> Any:
        age, timeout = _args(args, "AutoArchiveJobs", 2)
        for value, name in ((age, "age"), (timeout, "timeout")):
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise errors.OpPrereqError(
                    f"AutoArchiveJobs {name} must be a number", C.ECODE_INVAL
                )
        return await self.master.queue.auto_archive(float(age), float(timeout))

    async def change_job_priority(self, args: Any) -> Any:
        job_id, priority = _args(args, "ChangeJobPriority", 2)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise errors.OpPrereqError("Priority must be an integer", C.ECODE_INVAL)
        return self.master.queue.change_priority(_job_id(job_id), priority)

    async def query_jobs(self, args: Any) -> Any:
        job_ids, fields = _args(args, "QueryJobs", 2)
        if job_ids is not None and not isinstance(job_ids, list):
            raise errors.OpPrereqError("QueryJobs job ids must be a list", C.ECODE_INVAL)
        ids = [_job_id(j) for j in job_ids] if job_ids else None
        return await self.master.queue.queries.query_jobs(ids, _str_list(fields, "fields"))

    async def query(self, args: Any) -> Any:
        what, fields, qfilter = _args(args, "Query", 2, 3)
        return await resources.query(
            self.master, _name(what, "Query resource"), _str_list(fields, "fields"), qfilter
        )

    async def query_fields(self, args: Any) -> Any:
        what, fields = _args(args, "QueryFields", 1, 2)
        return resources.query_fields(
            _name(what, "QueryFields resource"), _str_list(fields, "fields") or None
        )

    async def query_cluster_info(self, args: Any) -> Any:
        _args(args, "QueryClusterInfo", 0)
        cfg = self.master.cfg
        return cluster_info(cfg.cluster, cfg.master_node.name)

    async def query_config_values(self, args: Any) -> Any:
        (fields,) = _args(args, "QueryConfigValues", 1)
        return [self._config_value(name) for name in _str_list(fields, "fields")]

    def _config_value(self, name: str) -> Any:
        cfg = self.master.cfg
        values: dict[str, Callable[[], Any]] = {
            "cluster_name": lambda: cfg.cluster.name,
            "master_node": lambda: cfg.master_node.name,
            "drain_flag": lambda: durable_flags.drained(self.master.durable),
            "watcher_pause": lambda: durable_flags.watcher_paused_until(self.master.durable),
            "modify_ssh_setup": lambda: cfg.cluster.modify_ssh_setup,
            "ssh_key_type": lambda: cfg.cluster.ssh_key_type,
            "ssh_key_bits": lambda: cfg.cluster.ssh_key_bits,
            # Corral's own: the configuration's serial number, which changes with
            # every write (what "nothing changed" is checked against).
            "config_serial": lambda: cfg.serial,
            # Corral's own: the node daemons' port (gnt-instance console reaches them).
            "noded_port": lambda: cfg.cluster.noded_port,
            # Corral's own: the fence token of this master's node calls, which
            # gnt-cluster command and copyfile send with theirs (corral.rpc.fencing).
            "fence_token": lambda: self.master.rpc.fence,
        }
        # As luxid: a name it does not know gives null, not an error.
        getter = values.get(name)
        return getter() if getter is not None else None

    # The classic queries: rows of plain values, for the named items or all.
    async def _classic(self, what: str, method: str, args: Any) -> list[list[Any]]:
        names, fields, use_locking = _args(args, method, 3)
        return await self._classic_rows(what, _str_list(names, "names"), fields, use_locking)

    async def _classic_rows(
        self, what: str, names: list[str], fields: Any, use_locking: Any, key: str = "name"
    ) -> list[list[Any]]:
        if use_locking:
            raise errors.OpPrereqError("Sync queries are not allowed", C.ECODE_INVAL)
        # As luxid's classic queries: the items named by name or by uuid (a
        # filter that names no item alone: all of them in order, no error for
        # a name unknown); exports have no uuid, so their nodes are named twice.
        qfilter = simple_filter(key, names)
        if qfilter is not None:
            qfilter = ["|", qfilter, simple_filter("uuid" if key == "name" else key, names)]
        result = await resources.query(self.master, what, _str_list(fields, "fields"), qfilter)
        unknown = [d["name"] for d in result["fields"] if d["kind"] == C.QFT_UNKNOWN]
        if unknown:
            raise errors.OpPrereqError(
                f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
            )
        return [[value for _status, value in row] for row in result["data"]]

    async def query_instances(self, args: Any) -> Any:
        return await self._classic(C.QR_INSTANCE, "QueryInstances", args)

    async def query_nodes(self, args: Any) -> Any:
        return await self._classic(C.QR_NODE, "QueryNodes", args)

    async def query_groups(self, args: Any) -> Any:
        return await self._classic(C.QR_GROUP, "QueryGroups", args)

    async def query_networks(self, args: Any) -> Any:
        return await self._classic(C.QR_NETWORK, "QueryNetworks", args)

    async def query_exports(self, args: Any) -> Any:
        nodes, use_locking = _args(args, "QueryExports", 2)
        names = _str_list(nodes, "nodes")
        return await self._classic_rows(
            C.QR_EXPORT, names, ["node", "export"], use_locking, key="node"
        )

    async def query_tags(self, args: Any) -> Any:
        kind, name = _args(args, "QueryTags", 1, 2)
        return resources.tags_of(
            self.master, _name(kind, "Tag kind"), _name(name, "Tag object name", optional=True)
        )

    async def set_drain_flag(self, args: Any) -> Any:
        (flag,) = _args(args, "SetDrainFlag", 1)
        if not isinstance(flag, bool):
            raise errors.OpPrereqError("SetDrainFlag takes true or false", C.ECODE_INVAL)
        await durable_flags.set_drained(self.master.durable, flag)
        return True

    async def create_join_token(self, args: Any) -> Any:
        (ttl,) = _args(args, "CreateJoinToken", 1)
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
            raise errors.OpPrereqError(
                f"Invalid --ttl {ttl}: give the token's lifetime in seconds (> 0)",
                C.ECODE_INVAL,
            )
        ca_pem = await asyncio.to_thread(self.master.paths.ca_cert.read_bytes)
        return await join_tokens.create(self.master.durable, pem_fingerprint(ca_pem), ttl)

    async def set_watcher_pause(self, args: Any) -> Any:
        (until,) = _args(args, "SetWatcherPause", 1)
        result = await durable_flags.set_watcher_pause(self.master.durable, until)
        # Every node's watcher keeps it (Ganeti sends it too): a node's
        # watcher that cannot ask masterd must not restart daemons meanwhile.
        self._pause.send(result)
        return result
