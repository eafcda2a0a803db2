"""confd's answers from a loaded ``config.data``, as Ganeti 3.0.2's server
gives them (``Ganeti.Confd.Server.buildResponse``).

An answer is ``(status, answer, serial)``.  Where Ganeti's server fails a
request inside its result monad (a node it cannot find, a query of the wrong
shape) the answer is ``(ERROR, message, 0)`` with Ganeti's message; its
standard errors are ``(ERROR, UNKNOWN_ENTRY | ARGUMENT, 0)``.  Corral has no
DRBD: a known node has no minors.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from corral.confd.protocol import (
    REQQ_FIELDS,
    REQQ_IP,
    REQQ_IPLIST,
    REQQ_LINK,
    ConfdRequest,
    ErrorCode,
    Field,
    Request,
    Role,
    Status,
)

Answer = tuple[int, Any, int]

UNKNOWN_ENTRY: Answer = (Status.ERROR, ErrorCode.UNKNOWN_ENTRY, 0)
ARGUMENT_ERROR: Answer = (Status.ERROR, ErrorCode.ARGUMENT, 0)


class Failed(Exception):
    """A request Ganeti's server fails: answered (ERROR, message, 0)."""


def _haskell_string(text: str) -> str:
    """``text`` as Haskell's ``show`` prints a string (near enough: JSON's quoting)."""
    return json.dumps(text)


@dataclass
class _NotFound:
    """Ganeti's OpPrereqError of a failed lookup (ECodeNoEnt)."""

    message: str

    def formatted(self) -> str:
        """As ``formatError`` shows it."""
        return (
            "Failure: prerequisites not met for this operation:\n"
            f"error type: ECodeNoEnt, error details:\n{self.message}"
        )

    def shown(self) -> str:
        """As ``show`` shows it."""
        return f"OpPrereqError {_haskell_string(self.message)} ECodeNoEnt"


def _lookup(kind: str, objects: dict[str, dict[str, Any]], key: str) -> dict[str, Any] | _NotFound:
    """An object by uuid, else by name, a unique ``name.`` prefix matching too
    (Ganeti's ``getItem'`` then ``getItem``)."""
    if key in objects:
        return objects[key]
    exact, partial = None, []
    for obj in objects.values():
        name = obj.get("name", "")
        if name == key:
            exact = obj
            break
        if name.startswith(key + "."):
            partial.append(obj)
    if exact is not None:
        return exact
    if len(partial) == 1:
        return partial[0]
    why = "has multiple matches" if partial else "not found"
    return _NotFound(f"{kind} name {key} {why}")


def _query_shape(query: str | dict[str, Any] | None) -> str:
    """A query as Ganeti's error messages show it."""
    if query is None:
        return "EmptyQuery"
    if isinstance(query, str):
        return f"PlainQuery {_haskell_string(query)}"
    return f"DictQuery {json.dumps(query, sort_keys=True)}"


@dataclass
class ConfdView:
    """One ``config.data``, indexed for the answers."""

    config: dict[str, Any]
    nodes: dict[str, dict[str, Any]] = field(init=False)
    instances: dict[str, dict[str, Any]] = field(init=False)
    disks: dict[str, dict[str, Any]] = field(init=False)
    # NIC link → IP → instance name (Ganeti's LinkIpMap).
    link_ips: dict[str, dict[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = dict(self.config.get("nodes") or {})
        self.instances = dict(self.config.get("instances") or {})
        self.disks = dict(self.config.get("disks") or {})
        self.link_ips = {}
        default = self._default_nicparams()
        for uuid, inst in self.instances.items():
            for nic in inst.get("nics") or []:
                link = {**default, **(nic.get("nicparams") or {})}.get("link", "")
                if nic.get("ip"):
                    self.link_ips.setdefault(link, {})[nic["ip"]] = inst.get("name") or uuid

    @property
    def cluster(self) -> dict[str, Any]:
        cluster: dict[str, Any] = self.config["cluster"]
        return cluster

    @property
    def serial(self) -> int:
        """The cluster object's serial number (what most answers carry)."""
        return int(self.cluster.get("serial_no", 0))

    def _default_nicparams(self) -> dict[str, Any]:
        params: dict[str, Any] = (self.cluster.get("nicparams") or {}).get("default") or {}
        return params

    def _node(self, key: str) -> dict[str, Any] | _NotFound:
        return _lookup("Node", self.nodes, key)

    def _master(self) -> dict[str, Any]:
        master = self.nodes.get(self.cluster.get("master_node", ""))
        if master is None:
            raise Failed("Master node not found in the configuration")
        return master

    def _plain(self, request: ConfdRequest) -> str:
        if not isinstance(request.query, str):
            raise Failed(f"Invalid query type {_query_shape(request.query)}")
        return request.query

    def answer(self, request: ConfdRequest) -> Answer:
        """The answer to ``request``."""
        try:
            return _HANDLERS[request.type](self, request)
        except Failed as err:
            return (Status.ERROR, str(err), 0)

    # One method per request type
    def ping(self, _: ConfdRequest) -> Answer:
        return (Status.OK, self.config.get("version"), 0)

    def cluster_master(self, request: ConfdRequest) -> Answer:
        query = request.query
        if isinstance(query, str):
            return ARGUMENT_ERROR
        master = self._master()
        if query is None:
            return (Status.OK, master["name"], self.serial)
        values = {
            Field.NAME: master["name"],
            Field.IP: self.cluster.get("master_ip"),
            Field.MNODE_PIP: master.get("primary_ip"),
        }
        return (Status.OK, [values[Field(f)] for f in query.get(REQQ_FIELDS) or []], self.serial)

    def node_role(self, request: ConfdRequest) -> Answer:
        name = self._plain(request)
        master = self._master()
        node = self._node(name)
        if isinstance(node, _NotFound):
            raise Failed(node.formatted())
        # As Ganeti: the master only when asked by its exact name.
        if name == master["name"]:
            role = Role.MASTER
        elif node.get("drained"):
            role = Role.DRAINED
        elif node.get("offline"):
            role = Role.OFFLINE
        elif node.get("master_candidate"):
            role = Role.CANDIDATE
        else:
            role = Role.REGULAR
        return (Status.OK, role, self.serial)

    def node_pips(self, _: ConfdRequest) -> Answer:
        # Ganeti folds its uuid-ordered map onto a list: reverse uuid order.
        nodes = [self.nodes[uuid] for uuid in sorted(self.nodes, reverse=True)]
        return (Status.OK, [n.get("primary_ip") for n in nodes], self.serial)

    def mc_pips(self, _: ConfdRequest) -> Answer:
        nodes = [self.nodes[uuid] for uuid in sorted(self.nodes, reverse=True)]
        ips = [n.get("primary_ip") for n in nodes if n.get("master_candidate")]
        return (Status.OK, ips, self.serial)

    def _default_link(self) -> str:
        return str(self._default_nicparams().get("link", ""))

    def instance_ips(self, request: ConfdRequest) -> Answer:
        query = request.query
        if isinstance(query, dict):
            raise Failed("Invalid query type")
        link = self._default_link() if query is None else query
        return (Status.OK, sorted(self.link_ips.get(link, {})), self.serial)

    def _node_pip_of(self, link: str, ip: str) -> Answer:
        name = self.link_ips.get(link, {}).get(ip)
        inst = None if name is None else _lookup("Instance", self.instances, name)
        if not isinstance(inst, dict):
            return UNKNOWN_ENTRY
        node = self.nodes.get(inst.get("primary_node") or "")
        if node is None:
            return UNKNOWN_ENTRY
        return (Status.OK, node.get("primary_ip"), self.serial)

    def node_pip_by_instance_ip(self, request: ConfdRequest) -> Answer:
        query = request.query
        if not isinstance(query, dict):
            return ARGUMENT_ERROR
        link = query.get(REQQ_LINK) or self._default_link()
        if query.get(REQQ_IP) is not None:
            return self._node_pip_of(link, query[REQQ_IP])
        answers = [list(self._node_pip_of(link, ip)) for ip in query.get(REQQ_IPLIST) or []]
        return (Status.OK, answers, self.serial)

    def node_drbd(self, request: ConfdRequest) -> Answer:
        node = self._node(self._plain(request))
        if isinstance(node, _NotFound):
            raise Failed(node.shown())
        return (Status.OK, [], int(node.get("serial_no", 0)))

    def node_instances(self, request: ConfdRequest) -> Answer:
        node = self._node(self._plain(request))
        if isinstance(node, _NotFound):
            raise Failed(f"Node not found in the configuration: {node.shown()}")
        uuid = node.get("uuid")
        primary = [i for _, i in sorted(self.instances.items()) if i.get("primary_node") == uuid]
        # Corral's templates have no secondary nodes.
        return (Status.OK, [primary, []], int(node.get("serial_no", 0)))

    def instance_disks(self, request: ConfdRequest) -> Answer:
        inst = _lookup("Instance", self.instances, self._plain(request))
        if isinstance(inst, _NotFound):
            raise Failed(f"Instance not found in the configuration: {inst.shown()}")
        disks = []
        for uuid in inst.get("disks") or []:
            if uuid not in self.disks:
                missing = _haskell_string(f"Disk uuid {uuid} not found")
                raise Failed(f"Could not retrieve disks: OpPrereqError {missing} ECodeNoEnt")
            disks.append(self.disks[uuid])
        return (Status.OK, disks, int(inst.get("serial_no", 0)))

    def config_query(self, request: ConfdRequest) -> Answer:
        value = json_pointer(self.config, self._plain(request))
        if value is MISSING:
            return ARGUMENT_ERROR
        return (Status.OK, value, self.serial)

    def data_collectors(self, _: ConfdRequest) -> Answer:
        # Corral runs no monitoring data collectors (its cluster info says
        # the same: no enabled_data_collectors).
        return (Status.OK, {}, self.serial)


_HANDLERS: dict[Request, Callable[[ConfdView, ConfdRequest], Answer]] = {
    Request.PING: ConfdView.ping,
    Request.NODE_ROLE_BYNAME: ConfdView.node_role,
    Request.NODE_PIP_BY_INSTANCE_IP: ConfdView.node_pip_by_instance_ip,
    Request.CLUSTER_MASTER: ConfdView.cluster_master,
    Request.NODE_PIP_LIST: ConfdView.node_pips,
    Request.MC_PIP_LIST: ConfdView.mc_pips,
    Request.INSTANCES_IPS_LIST: ConfdView.instance_ips,
    Request.NODE_DRBD: ConfdView.node_drbd,
    Request.NODE_INSTANCES: ConfdView.node_instances,
    Request.INSTANCE_DISKS: ConfdView.instance_disks,
    Request.CONFIG_QUERY: ConfdView.config_query,
    Request.DATA_COLLECTORS: ConfdView.data_collectors,
}

MISSING = object()


def _pointer_tokens(path: str) -> list[str] | None:
    """The tokens of an RFC 6901 pointer as Ganeti's parser reads them (it
    stops at the first character it cannot take); None if there are none."""
    if not path.startswith("/"):
        return None
    tokens, pos = [], 1
    while True:
        token, pos = _pointer_token(path, pos)
        if token is None:
            break
        tokens.append(token)
        if pos >= len(path) or path[pos] != "/":
            break
        pos += 1
    return tokens or None


def _pointer_token(path: str, pos: int) -> tuple[str | None, int]:
    """One token from ``pos``: escaped or plain characters, or "" at the end."""
    chars: list[str] = []
    while pos < len(path):
        if path.startswith("~1", pos) or path.startswith("~0", pos):
            chars.append("/" if path[pos + 1] == "1" else "~")
            pos += 2
        elif path[pos] not in "~/":
            chars.append(path[pos])
            pos += 1
        else:
            break
    if chars:
        return "".join(chars), pos
    return ("", pos) if pos >= len(path) else (None, pos)


def json_pointer(document: Any, path: str) -> Any:
    """The value at ``path`` in ``document`` (Ganeti's extractJSONPath), or MISSING."""
    tokens = _pointer_tokens(path)
    if tokens is None:
        return MISSING
    value = document
    for token in tokens:
        if isinstance(value, dict):
            if token not in value:
                return MISSING
            value = value[token]
        elif isinstance(value, list):
            digits = len(token) - len(token.lstrip("0123456789"))
            if not digits or int(token[:digits]) >= len(value):
                return MISSING
            value = value[int(token[:digits])]
        else:
            return MISSING
    return value
