"""Query and QueryFields over masterd's resources: jobs, locks, nodes, groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.jobs.fields import JOB_FIELDS
from corral.objects import Node, NodeGroup
from corral.query.fields import Field, FieldSet

if TYPE_CHECKING:
    from corral.cmdlib.base import Master

LOCK_FIELDS = FieldSet(
    [
        Field("name", "Name", C.QFT_TEXT, "Lock name", lambda r: r["name"]),
        Field(
            "mode",
            "Mode",
            C.QFT_OTHER,
            "Mode in which the lock is currently acquired (exclusive or shared)",
            lambda r: r["mode"],
        ),
        Field("owner", "Owner", C.QFT_OTHER, "Current lock owner(s)", lambda r: r["owner"]),
        Field(
            "pending", "Pending", C.QFT_OTHER, "Jobs waiting for the lock", lambda r: r["pending"]
        ),
    ]
)


def _common(fields: list[Field]) -> FieldSet:
    return FieldSet(
        [
            *fields,
            Field("uuid", "UUID", C.QFT_TEXT, "Object UUID", lambda o: o.uuid),
            Field("ctime", "CTime", C.QFT_TIMESTAMP, "Creation timestamp", lambda o: o.ctime),
            Field("mtime", "MTime", C.QFT_TIMESTAMP, "Modification timestamp", lambda o: o.mtime),
            Field(
                "serial_no", "SerialNo", C.QFT_NUMBER, "Object serial number", lambda o: o.serial_no
            ),
            Field("tags", "Tags", C.QFT_OTHER, "Tags", lambda o: sorted(o.tags)),
        ]
    )


def _node_role(master: Master, node: Node) -> str:
    if node.uuid == master.cfg.cluster.master_node:
        return "M"
    if node.offline:
        return "O"
    if node.drained:
        return "D"
    return "C" if node.master_candidate else "R"


def _node_fields(master: Master) -> FieldSet:
    return _common(
        [
            Field("name", "Node", C.QFT_TEXT, "Node name", lambda n: n.name),
            Field("pip", "PrimaryIP", C.QFT_TEXT, "Primary IP address", lambda n: n.primary_ip),
            Field(
                "sip", "SecondaryIP", C.QFT_TEXT, "Secondary IP address", lambda n: n.secondary_ip
            ),
            Field(
                "master_candidate",
                "MasterC",
                C.QFT_BOOL,
                "Whether node is a master candidate",
                lambda n: n.master_candidate,
            ),
            Field(
                "offline",
                "Offline",
                C.QFT_BOOL,
                "Whether node is marked offline",
                lambda n: n.offline,
            ),
            Field("drained", "Drained", C.QFT_BOOL, "Whether node is drained", lambda n: n.drained),
            Field(
                "master_capable",
                "MasterCapable",
                C.QFT_BOOL,
                "Whether node can become a master candidate",
                lambda n: n.master_capable,
            ),
            Field(
                "vm_capable",
                "VMCapable",
                C.QFT_BOOL,
                "Whether node can host instances",
                lambda n: n.vm_capable,
            ),
            Field(
                "master",
                "IsMaster",
                C.QFT_BOOL,
                "Whether node is master",
                lambda n: n.uuid == master.cfg.cluster.master_node,
            ),
            Field(
                "role",
                "Role",
                C.QFT_TEXT,
                "Node role (M, C, R, D, O)",
                lambda n: _node_role(master, n),
            ),
            Field("group", "Group", C.QFT_TEXT, "Node group", lambda n: _group_name(master, n)),
            Field("group.uuid", "GroupUUID", C.QFT_TEXT, "UUID of node group", lambda n: n.group),
        ]
    )


def _group_name(master: Master, node: Node) -> str:
    group = master.cfg.get(NodeGroup, node.group)
    return group.name if group is not None else node.group


def _group_fields(master: Master) -> FieldSet:
    def members(group: NodeGroup) -> list[str]:
        return sorted(n.name for n in master.cfg.nodes() if n.group == group.uuid)

    return _common(
        [
            Field("name", "Group", C.QFT_TEXT, "Group name", lambda g: g.name),
            Field(
                "alloc_policy",
                "AllocPolicy",
                C.QFT_TEXT,
                "Allocation policy for group",
                lambda g: g.alloc_policy,
            ),
            Field("node_cnt", "Nodes", C.QFT_NUMBER, "Number of nodes", lambda g: len(members(g))),
            Field("node_list", "NodeList", C.QFT_OTHER, "List of nodes", members),
            Field("ndparams", "NDParams", C.QFT_OTHER, "Node parameters", lambda g: g.ndparams),
        ]
    )


def _resource(master: Master | None, what: Any) -> FieldSet:
    if what == C.QR_JOB:
        return JOB_FIELDS
    if what == C.QR_LOCK:
        return LOCK_FIELDS
    if master is not None and what == C.QR_NODE:
        return _node_fields(master)
    if master is not None and what == C.QR_GROUP:
        return _group_fields(master)
    raise errors.OpPrereqError(f"Resource '{what}' cannot be queried here", C.ECODE_INVAL)


def query(master: Master, what: Any, fields: list[str], qfilter: Any) -> dict[str, Any]:
    fieldset = _resource(master, what)
    if what == C.QR_JOB:
        return master.queue.query(fields, qfilter)
    if what == C.QR_LOCK:
        items: list[Any] = master.locks.info()
    elif what == C.QR_NODE:
        items = master.cfg.nodes()
    else:
        items = master.cfg.groups()
    return fieldset.query(fields, qfilter, items)


def query_fields(what: Any, fields: list[str] | None) -> dict[str, Any]:
    if what in (C.QR_NODE, C.QR_GROUP):
        fieldset = _node_fields(None) if what == C.QR_NODE else _group_fields(None)  # type: ignore[arg-type]
    else:
        fieldset = _resource(None, what)
    return {"fields": fieldset.definitions(fields)}


def tags_of(master: Master, kind: Any, name: Any) -> list[str]:
    cfg = master.cfg
    if kind == C.TAG_CLUSTER:
        return sorted(cfg.cluster.tags)
    classes: dict[str, type[Node] | type[NodeGroup]] = {
        C.TAG_NODE: Node,
        C.TAG_NODEGROUP: NodeGroup,
    }
    if kind not in C.VALID_TAG_TYPES:
        raise errors.OpPrereqError(f"Invalid tag kind '{kind}'", C.ECODE_INVAL)
    cls = classes.get(kind)
    if cls is None or not isinstance(name, str):
        raise errors.OpPrereqError(f"{str(kind).capitalize()} '{name}' is unknown", C.ECODE_NOENT)
    return sorted(cfg.lookup(cls, name).tags)
