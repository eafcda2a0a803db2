"""The RAPI client's calls of the cluster, its jobs, nodes, groups, networks
and filters, each written once for both transports (see client_core).

Calls that submit a job return its id as an int (the wire has a JSON string).
"""

from __future__ import annotations

import time

from corral.rapi import client_core as core
from corral.rapi.client_core import (
    API,
    Request,
    args,
    call,
    given,
    ids,
    job,
    path,
    steps,
    tag_args,
)

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from corral.rapi.client_core import Steps

    Dict = dict[str, Any]

NODE = API + "/nodes/{}"
GROUP = API + "/groups/{}"
NETWORK = API + "/networks/{}"
FILTER = API + "/filters/{}"
JOB = API + "/jobs/{}"


def _bulk_list(target: str, bulk: bool, key: str, reason: str | None = None) -> Request[list[Any]]:
    """A collection: its items' ``key`` (names, ids), or with ``bulk`` the full items."""
    query = args(("bulk", bulk or None), reason=reason)
    return Request("GET", target, query, decode=None if bulk else ids(key))


def _wait_change(
    job_id: int | str,
    fields: Sequence[str],
    prev_job_info: list[Any] | None,
    prev_serial: int | None,
) -> Request[Dict | None]:
    body = {
        "fields": list(fields),
        "previous_job_info": prev_job_info,
        "previous_log_serial": prev_serial,
    }
    return Request("GET", path(JOB + "/wait", job_id), body=body)


def _newer_serial(serial: int | None, entries: list[list[Any]]) -> int | None:
    return max([serial or 0, *(entry[0] for entry in entries)]) if entries else serial


def _reason_trail(trail: list[Any] | None) -> list[Any]:
    # Ganeti's client adds its own entry to a filter's reason trail.
    return [*(trail or []), ["gnt:client", "", time.time_ns()]]


class ClusterCalls:
    """The calls of the cluster, jobs, queries, nodes, groups, networks and filters."""

    # --- cluster ---

    @call
    def get_version(self) -> Request[int]:
        """The RAPI version (2)."""
        return Request("GET", "/version")

    @call
    def get_features(self) -> Request[list[str]]:
        """The optional features the server implements (e.g. ``instance-create-reqv1``)."""
        return Request("GET", API + "/features")

    @call
    def get_info(self, reason: str | None = None) -> Request[Dict]:
        """The cluster's information (as ``gnt-cluster info``)."""
        return Request("GET", API + "/info", args(reason=reason))

    @call
    def get_operating_systems(self, bulk: bool = False, reason: str | None = None) -> Request[Any]:
        """The valid ``os+variant`` names, or with ``bulk`` a dict per OS."""
        return Request("GET", API + "/os", args(("bulk", bulk or None), reason=reason))

    @call
    def modify_cluster(self, /, reason: str | None = None, **kwargs: Any) -> Request[int]:
        """Change cluster parameters (OpClusterSetParams's fields); a job."""
        return job("PUT", API + "/modify", args(reason=reason), kwargs)

    @call
    def redistribute_config(self, reason: str | None = None) -> Request[int]:
        """Copy the configuration to all nodes again; a job."""
        return job("PUT", API + "/redistribute-config", args(reason=reason))

    @call
    def get_cluster_tags(self, reason: str | None = None) -> Request[list[str]]:
        """The cluster's tags."""
        return Request("GET", API + "/tags", args(reason=reason))

    @call
    def add_cluster_tags(
        self, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Add tags to the cluster; a job."""
        return job("PUT", API + "/tags", tag_args(tags, dry_run, reason))

    @call
    def delete_cluster_tags(
        self, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Remove tags from the cluster; a job."""
        return job("DELETE", API + "/tags", tag_args(tags, dry_run, reason))

    @call
    def query(
        self, what: str, fields: Sequence[str], qfilter: Any = None, reason: str | None = None
    ) -> Request[Dict]:
        """A query of ``what`` (instance, node, job, ...): ``fields`` and ``data``."""
        body: Dict = {"fields": list(fields)}
        if qfilter is not None:
            body["qfilter"] = qfilter
        return Request("PUT", path(API + "/query/{}", what), args(reason=reason), body)

    @call
    def query_fields(
        self, what: str, fields: Sequence[str] | None = None, reason: str | None = None
    ) -> Request[Dict]:
        """The descriptions of ``what``'s fields (all, or those named)."""
        listed = None if fields is None else ",".join(fields)
        query = args(("fields", listed), reason=reason)
        return Request("GET", path(API + "/query/{}/fields", what), query)

    # --- jobs ---

    @call
    def get_jobs(self, bulk: bool = False) -> Request[list[Any]]:
        """The job ids (ints), or with ``bulk`` a dict per job."""
        query = args(("bulk", bulk or None))
        decode = None if bulk else (lambda jobs: [int(j["id"]) for j in jobs])
        return Request("GET", API + "/jobs", query, decode=decode)

    @call
    def get_job_status(self, job_id: int | str) -> Request[Dict]:
        """A job's status, operations, results and log (``oplog``, ``opresult``)."""
        return Request("GET", path(JOB, job_id))

    @call
    def cancel_job(
        self, job_id: int | str, dry_run: bool = False, kill: bool = False
    ) -> Request[list[Any]]:
        """Cancel a job: ``[success, message]``. ``kill`` (Corral's extension,
        ``gnt-job cancel --kill``) cancels a running job too; Ganeti's server
        ignores it and cancels only jobs not yet running."""
        query = args(("dry-run", dry_run or None), ("kill", kill or None))
        return Request("DELETE", path(JOB, job_id), query)

    @call
    def wait_for_job_change(
        self,
        job_id: int | str,
        fields: Sequence[str],
        prev_job_info: list[Any] | None,
        prev_log_serial: int | None,
    ) -> Request[Dict | None]:
        """One long poll: None if nothing changed in the server's wait (~10 s),
        else ``{"job_info": [field values], "log_entries": [...]}``."""
        return _wait_change(job_id, fields, prev_job_info, prev_log_serial)

    @steps
    def wait_for_job(
        self,
        job_id: int | str,
        timeout: float | None = None,
        feedback: Callable[[list[Any]], None] | None = None,
    ) -> Steps[Dict]:
        """Wait until a job is finalized; returns its final status (see
        :meth:`get_job_status`: check its ``status``).

        ``feedback`` is called with each new log entry ``[serial, timestamp,
        type, message]``. ``timeout`` (seconds) is checked between long polls;
        TimeoutError when it passes first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        info: list[Any] | None = None
        serial: int | None = None
        while info is None or info[0] not in core.JOB_STATUS_FINALIZED:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"Job {job_id} not finished after {timeout} s")
            change = yield _wait_change(job_id, ["status"], info, serial)
            if change is None:
                continue
            info, entries = change["job_info"], change["log_entries"]
            if feedback is not None:
                for entry in entries:
                    feedback(entry)
            serial = _newer_serial(serial, entries)
        status: Dict = yield Request("GET", path(JOB, job_id))
        return status

    # --- nodes ---

    @call
    def get_nodes(self, bulk: bool = False, reason: str | None = None) -> Request[list[Any]]:
        """The node names, or with ``bulk`` a dict per node."""
        return _bulk_list(API + "/nodes", bulk, "id", reason)

    @call
    def get_node(self, node: str, reason: str | None = None) -> Request[Dict]:
        """One node's dict."""
        return Request("GET", path(NODE, node), args(reason=reason))

    @call
    def get_node_role(self, node: str, reason: str | None = None) -> Request[str]:
        """The node's role: master, master-candidate, regular, drained or offline."""
        return Request("GET", path(NODE + "/role", node), args(reason=reason))

    @call
    def set_node_role(
        self,
        node: str,
        role: str,
        force: bool = False,
        auto_promote: bool | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Set the role (master-candidate, regular, drained, offline); a job."""
        query = args(("force", force or None), ("auto-promote", auto_promote), reason=reason)
        return job("PUT", path(NODE + "/role", node), query, role)

    @call
    def modify_node(self, /, node: str, reason: str | None = None, **kwargs: Any) -> Request[int]:
        """Change node parameters (OpNodeSetParams's fields); a job."""
        return job("POST", path(NODE + "/modify", node), args(reason=reason), kwargs)

    @call
    def powercycle_node(
        self, node: str, force: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Power-cycle a node; a job."""
        query = args(("force", force or None), reason=reason)
        return job("POST", path(NODE + "/powercycle", node), query)

    @call
    def evacuate_node(
        self,
        node: str,
        iallocator: str | None = None,
        remote_node: str | None = None,
        dry_run: bool = False,
        early_release: bool | None = None,
        mode: str | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Move the instances off a node (``mode``: primary-only, secondary-only, all); a job."""
        if iallocator is not None and remote_node is not None:
            raise ValueError("Give iallocator or remote_node, not both")
        body = given(
            iallocator=iallocator, remote_node=remote_node, early_release=early_release, mode=mode
        )
        query = args(("dry-run", dry_run or None), reason=reason)
        return job("POST", path(NODE + "/evacuate", node), query, body)

    @call
    def migrate_node(
        self,
        node: str,
        mode: str | None = None,
        dry_run: bool = False,
        iallocator: str | None = None,
        target_node: str | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Migrate a node's primary instances; a job."""
        body = given(mode=mode, iallocator=iallocator, target_node=target_node)
        query = args(("dry-run", dry_run or None), reason=reason)
        return job("POST", path(NODE + "/migrate", node), query, body)

    @call
    def get_node_storage_units(
        self, node: str, storage_type: str, output_fields: Sequence[str], reason: str | None = None
    ) -> Request[int]:
        """Query a node's storage units; a job (its result holds the rows)."""
        query = args(
            ("storage_type", storage_type),
            ("output_fields", ",".join(output_fields)),
            reason=reason,
        )
        return job("GET", path(NODE + "/storage", node), query)

    @call
    def modify_node_storage_units(
        self,
        node: str,
        storage_type: str,
        name: str,
        allocatable: bool | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Change a storage unit; a job."""
        query = args(
            ("storage_type", storage_type),
            ("name", name),
            ("allocatable", allocatable),
            reason=reason,
        )
        return job("PUT", path(NODE + "/storage/modify", node), query)

    @call
    def repair_node_storage_units(
        self, node: str, storage_type: str, name: str, reason: str | None = None
    ) -> Request[int]:
        """Repair a storage unit; a job."""
        query = args(("storage_type", storage_type), ("name", name), reason=reason)
        return job("PUT", path(NODE + "/storage/repair", node), query)

    @call
    def get_node_tags(self, node: str, reason: str | None = None) -> Request[list[str]]:
        """A node's tags."""
        return Request("GET", path(NODE + "/tags", node), args(reason=reason))

    @call
    def add_node_tags(
        self, node: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Add tags to a node; a job."""
        return job("PUT", path(NODE + "/tags", node), tag_args(tags, dry_run, reason))

    @call
    def delete_node_tags(
        self, node: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Remove tags from a node; a job."""
        return job("DELETE", path(NODE + "/tags", node), tag_args(tags, dry_run, reason))

    # --- node groups ---

    @call
    def get_groups(self, bulk: bool = False, reason: str | None = None) -> Request[list[Any]]:
        """The node group names, or with ``bulk`` a dict per group."""
        return _bulk_list(API + "/groups", bulk, "name", reason)

    @call
    def get_group(self, group: str, reason: str | None = None) -> Request[Dict]:
        """One node group's dict."""
        return Request("GET", path(GROUP, group), args(reason=reason))

    @call
    def create_group(
        self,
        name: str,
        alloc_policy: str | None = None,
        dry_run: bool = False,
        reason: str | None = None,
    ) -> Request[int]:
        """Add a node group; a job."""
        query = args(("dry-run", dry_run or None), reason=reason)
        return job("POST", API + "/groups", query, {"name": name, "alloc_policy": alloc_policy})

    @call
    def modify_group(self, /, group: str, reason: str | None = None, **kwargs: Any) -> Request[int]:
        """Change node group parameters (OpGroupSetParams's fields); a job."""
        return job("PUT", path(GROUP + "/modify", group), args(reason=reason), kwargs)

    @call
    def delete_group(
        self, group: str, dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Remove an empty node group; a job."""
        query = args(("dry-run", dry_run or None), reason=reason)
        return job("DELETE", path(GROUP, group), query)

    @call
    def rename_group(self, group: str, new_name: str, reason: str | None = None) -> Request[int]:
        """Rename a node group; a job."""
        body = {"new_name": new_name}
        return job("PUT", path(GROUP + "/rename", group), args(reason=reason), body)

    @call
    def assign_group_nodes(
        self,
        group: str,
        nodes: Sequence[str],
        force: bool = False,
        dry_run: bool = False,
        reason: str | None = None,
    ) -> Request[int]:
        """Move nodes into a node group; a job."""
        query = args(("force", force or None), ("dry-run", dry_run or None), reason=reason)
        return job("PUT", path(GROUP + "/assign-nodes", group), query, {"nodes": list(nodes)})

    @call
    def get_group_tags(self, group: str, reason: str | None = None) -> Request[list[str]]:
        """A node group's tags."""
        return Request("GET", path(GROUP + "/tags", group), args(reason=reason))

    @call
    def add_group_tags(
        self, group: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Add tags to a node group; a job."""
        return job("PUT", path(GROUP + "/tags", group), tag_args(tags, dry_run, reason))

    @call
    def delete_group_tags(
        self, group: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Remove tags from a node group; a job."""
        return job("DELETE", path(GROUP + "/tags", group), tag_args(tags, dry_run, reason))

    # --- networks ---

    @call
    def get_networks(self, bulk: bool = False, reason: str | None = None) -> Request[list[Any]]:
        """The network names, or with ``bulk`` a dict per network."""
        return _bulk_list(API + "/networks", bulk, "name", reason)

    @call
    def get_network(self, network: str, reason: str | None = None) -> Request[Dict]:
        """One network's dict."""
        return Request("GET", path(NETWORK, network), args(reason=reason))

    @call
    def create_network(
        self,
        network_name: str,
        network: str,
        gateway: str | None = None,
        network6: str | None = None,
        gateway6: str | None = None,
        mac_prefix: str | None = None,
        add_reserved_ips: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        dry_run: bool = False,
        reason: str | None = None,
    ) -> Request[int]:
        """Add a network; a job."""
        body = {
            "network_name": network_name,
            "network": network,
            "gateway": gateway,
            "network6": network6,
            "gateway6": gateway6,
            "mac_prefix": mac_prefix,
            "add_reserved_ips": None if add_reserved_ips is None else list(add_reserved_ips),
            "tags": None if tags is None else list(tags),
        }
        query = args(("dry-run", dry_run or None), reason=reason)
        return job("POST", API + "/networks", query, body)

    @call
    def connect_network(
        self,
        network_name: str,
        group_name: str,
        mode: str,
        link: str,
        vlan: str = "",
        dry_run: bool = False,
        reason: str | None = None,
    ) -> Request[int]:
        """Connect a network to a node group; a job."""
        body = {
            "group_name": group_name,
            "network_mode": mode,
            "network_link": link,
            "network_vlan": vlan,
        }
        query = args(("dry-run", dry_run or None), reason=reason)
        return job("PUT", path(NETWORK + "/connect", network_name), query, body)

    @call
    def disconnect_network(
        self, network_name: str, group_name: str, dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Disconnect a network from a node group; a job."""
        query = args(("dry-run", dry_run or None), reason=reason)
        body = {"group_name": group_name}
        return job("PUT", path(NETWORK + "/disconnect", network_name), query, body)

    @call
    def modify_network(
        self, /, network: str, reason: str | None = None, **kwargs: Any
    ) -> Request[int]:
        """Change network parameters (OpNetworkSetParams's fields); a job."""
        return job("PUT", path(NETWORK + "/modify", network), args(reason=reason), kwargs)

    @call
    def delete_network(
        self, network: str, dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Remove a network; a job."""
        query = args(("dry-run", dry_run or None), reason=reason)
        return job("DELETE", path(NETWORK, network), query)

    @call
    def get_network_tags(self, network: str, reason: str | None = None) -> Request[list[str]]:
        """A network's tags."""
        return Request("GET", path(NETWORK + "/tags", network), args(reason=reason))

    @call
    def add_network_tags(
        self, network: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Add tags to a network; a job."""
        return job("PUT", path(NETWORK + "/tags", network), tag_args(tags, dry_run, reason))

    @call
    def delete_network_tags(
        self, network: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Remove tags from a network; a job."""
        return job("DELETE", path(NETWORK + "/tags", network), tag_args(tags, dry_run, reason))

    # --- job filters ---

    @call
    def get_filters(self, bulk: bool = False) -> Request[list[Any]]:
        """The filter rules' uuids, or with ``bulk`` a dict per rule."""
        return _bulk_list(API + "/filters", bulk, "uuid")

    @call
    def get_filter(self, filter_uuid: str) -> Request[Dict]:
        """One filter rule (watermark, priority, predicates, action, reason_trail, uuid)."""
        return Request("GET", path(FILTER, filter_uuid))

    @call
    def add_filter(
        self,
        priority: int,
        predicates: list[Any],
        action: Any,
        reason_trail: list[Any] | None = None,
    ) -> Request[str]:
        """Add a filter rule; returns its uuid."""
        body = {
            "priority": priority,
            "predicates": predicates,
            "action": action,
            "reason": _reason_trail(reason_trail),
        }
        return Request("POST", API + "/filters", body=body)

    @call
    def replace_filter(
        self,
        uuid: str,
        priority: int,
        predicates: list[Any],
        action: Any,
        reason_trail: list[Any] | None = None,
    ) -> Request[str]:
        """Replace a filter rule (or add it under ``uuid``); returns its uuid."""
        body = {
            "priority": priority,
            "predicates": predicates,
            "action": action,
            "reason": _reason_trail(reason_trail),
        }
        return Request("PUT", path(FILTER, uuid), body=body)

    @call
    def delete_filter(self, uuid: str) -> Request[Any]:
        """Delete a filter rule."""
        return Request("DELETE", path(FILTER, uuid))
