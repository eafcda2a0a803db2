"""ganeti-watcher's care of mirrored disks (Corral's DRBD), as Ganeti's
watcher cares for DRBD: after a node rebooted (its boot id changed), the
disks of the instances it is secondary for are activated again, which
brings its copies' exports back and resyncs them; and every instance the
group's disk check (OP_GROUP_VERIFY_DISKS) finds with active disks and an
outdated copy gets activate-disks too, which resyncs it (a stopped
instance's copy is copied whole).  Each activation is a job
(OP_INSTANCE_ACTIVATE_DISKS), so hooks and locks apply."""

from __future__ import annotations

from typing import Any, NamedTuple

from corral import errors
from corral.cli import common
from corral.luxi.client import Client
from corral.tools.watcher_common import log, reason
from corral.tools.watcher_state import WatcherState

# An instance whose node is down or offline cannot be helped.
HELPLESS_STATES = frozenset({"ERROR_nodedown", "ERROR_nodeoffline"})


class NodeRow(NamedTuple):
    """What the watcher needs of a node."""

    name: str
    bootid: str | None
    offline: bool


class InstanceRow(NamedTuple):
    """What the watcher needs of an instance."""

    status: str
    admin_state: str
    admin_state_source: str
    disks_active: bool
    snodes: list[str]


def check_boot_ids(
    client: Client,
    state: WatcherState,
    nodes: list[NodeRow],
    instances: dict[str, InstanceRow],
    started: set[str],
) -> None:
    """Activate the disks of the instances a rebooted node is secondary for
    (Ganeti's _CheckDisks), then record the nodes' new boot ids."""
    rebooted = []
    for node in nodes:
        if not node.bootid:
            if not node.offline:
                log.debug("Node '%s' missing boot ID, skipping secondary checks", node.name)
            continue
        if state.boot_id(node.name) != node.bootid:
            log.info("Node '%s' has rebooted (boot id %s)", node.name, node.bootid)
            rebooted.append(node)
    for node in rebooted:
        for name, inst in sorted(instances.items()):
            if node.name not in inst.snodes:
                continue
            if not inst.disks_active:
                log.info(
                    "Skipping disk activation for instance with not activated disks '%s'", name
                )
            elif name in started:
                # Its start activated its disks (if they can be at all).
                log.debug("Skipping disk activation for instance '%s' as it was started", name)
            else:
                activate_disks(client, [name])
    for node in rebooted:
        state.set_boot_id(node.name, node.bootid or "")


def verify_disks(
    client: Client, uuid: str, nodes: list[NodeRow], instances: dict[str, InstanceRow]
) -> None:
    """The group's disk check; activate the disks of the instances it finds
    behind (Ganeti's _VerifyDisks), and log what it reports."""
    op = {
        "OP_ID": "OP_GROUP_VERIFY_DISKS",
        "group_name": uuid,
        "reason": reason(f"Verifying disks of group {uuid}"),
    }
    bad_nodes, behind, missing = common.poll_job(client, client.submit_job([op]), feedback=None)[0]
    for node, text in bad_nodes.items():
        log.warning("Error verifying disks of node %s: %s", node, text)
    for name, volumes in missing.items():
        log.warning("Instance %s has missing disks: %s", name, volumes)
    offline = {node.name for node in nodes if node.offline}
    wanted = []
    for name in behind:
        inst = instances.get(name)
        if inst is None:
            log.info("Can't find instance '%s', maybe it was ignored", name)
        elif inst.status in HELPLESS_STATES or offline & set(inst.snodes):
            log.info(
                "Skipping instance '%s' because it is in a helpless state or has offline"
                " secondaries",
                name,
            )
        else:
            wanted.append(name)
    if wanted:
        activate_disks(client, wanted)


def activate_disks(client: Client, names: list[str]) -> None:
    """One job activating the disks of ``names`` (one opcode each), waited for."""
    ops: list[dict[str, Any]] = []
    for name in names:
        log.info("Activating disks for instance '%s'", name)
        why = f"Activating disks for instance {name}"
        ops.append(
            {"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": name, "reason": reason(why)}
        )
    try:
        common.poll_job(client, client.submit_job(ops), feedback=None)
    except errors.GenericError as err:
        log.error("Error while activating disks of %s: %s", ", ".join(names), err)
