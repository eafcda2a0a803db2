"""Query and QueryFields over masterd's resources.

Each resource has a static ``FieldSet`` and an ``items`` coroutine that
gathers only what the requested fields need (node RPCs for live data).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.gcpause import gc_paused
from corral.jobs.fields import JOB_FIELDS
from corral.master.resources import (
    exports,
    filters,
    instances,
    locks,
    networks,
    node_live,
    nodes,
    oses,
)
from corral.master.resources.common import Names
from corral.nicesort import luxid_key, nice_key
from corral.objects import Instance, Network, Node, NodeGroup
from corral.query.fields import FieldSet
from corral.query.filter import compile_filter, filter_fields, requested_names
from corral.rpc.reachability import query_deadline

if TYPE_CHECKING:
    from corral.services.context import Master

# A resource's items: (master, needs, names) → items; ``needs`` says what the
# fields use, ``names`` (if not None) the only items asked for (a loader may
# still give others: the filter selects).
Items = Callable[["Master", set[str], Names], Awaitable[Iterable[Any]]]

_RESOURCES: dict[str, tuple[FieldSet, Items]] = {
    C.QR_LOCK: (locks.FIELDS, locks.items),
    C.QR_NODE: (nodes.NODE_FIELDS, nodes.node_items),
    C.QR_GROUP: (nodes.GROUP_FIELDS, nodes.group_items),
    C.QR_INSTANCE: (instances.FIELDS, instances.items),
    C.QR_OS: (oses.FIELDS, oses.items),
    C.QR_NETWORK: (networks.FIELDS, networks.items),
    C.QR_EXPORT: (exports.FIELDS, exports.items),
    C.QR_FILTER: (filters.FIELDS, filters.items),
}


def fieldset(what: Any) -> FieldSet:
    if what == C.QR_JOB:
        return JOB_FIELDS
    if what in _RESOURCES:
        return _RESOURCES[what][0]
    raise errors.OpPrereqError(
        f"Resource '{what}' cannot be queried; known: job, {', '.join(sorted(_RESOURCES))}",
        C.ECODE_INVAL,
    )


async def query(master: Master, what: Any, fields: list[str], qfilter: Any) -> Any:
    """Ganeti's Query: field definitions and rows of ``[status, value]`` cells."""
    fset = fieldset(what)
    if what == C.QR_JOB:
        return await master.queue.queries.query(fields, qfilter)
    compile_filter(qfilter, fset.value_getter)  # refuse a bad filter before any RPC
    _check_requested_names(master, what, qfilter)
    filter_needs = fset.needs(filter_fields(qfilter))
    needs = fset.needs(fields) | filter_needs
    names = requested_names(qfilter, _NAMED[what][0]) if what in _NAMED else None
    wanted = None if names is None else frozenset(n for n in names if isinstance(n, str))
    loader = _RESOURCES[what][1]
    # One deadline for every node call of the query (see corral.rpc.reachability).
    with query_deadline(master.rpc.query_deadline):
        live = _LIVE_NEEDS.get(what, frozenset()) & needs
        if qfilter and live and not live & filter_needs:
            # The filter needs no node: it selects the items from the
            # configuration first, so that only their nodes are asked.
            matches = compile_filter(qfilter, fset.value_getter)
            name = fset.value_getter(_NAMED[what][0])
            rows = await loader(master, needs - live, wanted)
            wanted = frozenset(name(row) for row in rows if matches(row))
        items = await loader(master, needs, wanted)
    # Synchronous from here: the rows are fresh, acyclic lists (see gc_paused).
    with gc_paused():
        return fset.query(fields, qfilter, _in_order(what, fset, items, qfilter))


# The field a resource's rows are sorted by, and how.  luxid sorts with Haskell's
# niceSort, unless the filter asks for items by name alone: then they come in
# the order asked, once each time asked.  OSes are Python's (LUQuery): NiceSort,
# and each name asked for once.
_ORDER: dict[str, tuple[str, Callable[[str], Any]]] = {
    C.QR_INSTANCE: ("name", luxid_key),
    C.QR_NODE: ("name", luxid_key),
    C.QR_GROUP: ("name", luxid_key),
    C.QR_NETWORK: ("name", luxid_key),
    C.QR_EXPORT: ("node", luxid_key),
    C.QR_FILTER: ("uuid", luxid_key),
    C.QR_LOCK: ("name", luxid_key),
    C.QR_OS: ("name", nice_key),
}
# Resources whose queries by name Ganeti's Python code answers (no repetitions).
_ASKED_ONCE = frozenset({C.QR_OS})


def _in_order(what: str, fset: FieldSet, items: Iterable[Any], qfilter: Any) -> list[Any]:
    """``items`` in the order Ganeti answers them (see _ORDER)."""
    field, key = _ORDER[what]
    value = fset.value_getter(field)
    rows = sorted(items, key=lambda item: key(value(item)))
    names = requested_names(qfilter, field) if what in _NAMED or what in _ASKED_ONCE else None
    if not names:
        return rows
    names = [name for name in names if isinstance(name, str)]  # others name nothing
    if what in _ASKED_ONCE:
        names = list(dict.fromkeys(names))
    by_name: dict[Any, list[Any]] = {}
    for row in rows:
        by_name.setdefault(value(row), []).append(row)
    return [row for name in names for row in by_name.get(name, [])]


# The needs (see FieldSet.needs) of a resource that its nodes answer.
_LIVE_NEEDS: dict[str, frozenset[str]] = {
    C.QR_INSTANCE: frozenset({instances.LIVE, instances.CONSOLE}),
    C.QR_NODE: frozenset({node_live.NODE_INFO, node_live.STORAGE, node_live.HV_INFO}),
}


# Resources whose items are asked for by a name of the configuration: the
# field holding it, what the name is called in errors, and whether a name exists.
_NAMED: dict[str, tuple[str, str, Callable[[Master, str], bool]]] = {
    C.QR_INSTANCE: ("name", "Instance", lambda m, name: m.cfg.find(Instance, name) is not None),
    C.QR_NODE: ("name", "Node", lambda m, name: m.cfg.find(Node, name) is not None),
    C.QR_GROUP: ("name", "Group", lambda m, name: m.cfg.find(NodeGroup, name) is not None),
    C.QR_NETWORK: ("name", "Network", lambda m, name: m.cfg.find(Network, name) is not None),
    C.QR_EXPORT: ("node", "Node", lambda m, name: m.cfg.find(Node, name) is not None),
}


def _check_requested_names(master: Master, what: Any, qfilter: Any) -> None:
    """A filter that only lists names (``gnt-instance list a b``) must name
    existing objects, as in Ganeti: an unknown name is an error, not an empty row."""
    if what not in _NAMED:
        return
    key, label, exists = _NAMED[what]
    names = requested_names(qfilter, key)
    if names is None:
        return
    for name in names:
        if not (isinstance(name, str) and exists(master, name)):
            raise errors.OpPrereqError(f"{label} name {name} not found", C.ECODE_NOENT)


def query_fields(what: Any, fields: list[str] | None) -> dict[str, Any]:
    return {"fields": fieldset(what).definitions(fields)}


def tags_of(master: Master, kind: Any, name: Any) -> list[str]:
    cfg = master.cfg
    if kind == C.TAG_CLUSTER:
        return sorted(cfg.cluster.tags)
    if kind not in C.VALID_TAG_TYPES:
        raise errors.OpPrereqError(f"Invalid tag kind '{kind}'", C.ECODE_INVAL)
    classes: dict[str, type[Node] | type[NodeGroup] | type[Instance] | type[Network]] = {
        C.TAG_NODE: Node,
        C.TAG_NODEGROUP: NodeGroup,
        C.TAG_INSTANCE: Instance,
        C.TAG_NETWORK: Network,
    }
    cls = classes.get(kind)
    if cls is None or not isinstance(name, str):
        raise errors.OpPrereqError(f"{str(kind).capitalize()} '{name}' is unknown", C.ECODE_NOENT)
    return sorted(cfg.lookup(cls, name).tags)
