"""The opcodes Corral serves, and values for their required fields."""

from __future__ import annotations

from typing import Any

from corral.opcodes import registry
from corral.opcodes.types import NOT_BUILT_KEY

# Opcodes Corral serves; tests register throwaway ones of their own.
SERVED = {op_id: cls for op_id, cls in registry().items() if cls.__module__.startswith("corral.")}

# Values for the required fields, so that a test can vary one field alone.
REQUIRED: dict[str, Any] = {
    "instance_name": "inst1.example.com",
    "mode": "create",
    "disks": [],
    "nics": [],
    "reboot_type": "hard",
    "new_name": "inst2.example.com",
    "disk": 0,
    "amount": 1,
    "kind": "cluster",
    "tags": [],
    "pattern": "x",
    "group_name": "default",
    "duration": 1.0,
    "output_fields": ["name"],
    "node_name": "node1.example.com",
    "storage_type": "file",
    "changes": {},
    "nodes": [],
    "name": "cluster2.example.com",
    "command": "power-status",
    "network_name": "net1",
    "network": "10.1.0.0/24",
    "network_mode": "bridged",
    "network_link": "br0",
}
# Where one field name means different things in different opcodes.
REQUIRED_FOR: dict[str, dict[str, Any]] = {
    "OP_NODE_EVACUATE": {"mode": "all"},
    "OP_NODE_MIGRATE": {"mode": "live"},
    "OP_INSTANCE_MIGRATE": {"mode": "live"},
    "OP_INSTANCE_REPLACE_DISKS": {"mode": "replace_auto"},
    "OP_INSTANCE_MOVE": {"target_node": "node2.example.com"},
    "OP_BACKUP_PREPARE": {"mode": "local"},
    "OP_BACKUP_EXPORT": {"target_node": "node2.example.com", "mode": "local"},
}


def required_values(op_id: str) -> dict[str, Any]:
    """The values of REQUIRED, with ``op_id``'s own where it has some."""
    return {**REQUIRED, **REQUIRED_FOR.get(op_id, {})}


def with_required(op_id: str, **fields: Any) -> dict[str, Any]:
    """A wire opcode with every field it requires set, and then ``fields``."""
    model = SERVED[op_id].model_fields
    values = required_values(op_id)
    base = {name: values[name] for name, info in model.items() if info.is_required()}
    return {"OP_ID": op_id, **base, **fields}


def not_built_fields() -> list[tuple[str, str]]:
    """``(OP_ID, field)`` of every field Corral accepts only unset or at Ganeti's default."""
    return [
        (op_id, name)
        for op_id, cls in sorted(SERVED.items())
        for name, info in cls.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and NOT_BUILT_KEY in info.json_schema_extra
    ]


def required_fields() -> list[tuple[str, str]]:
    """``(OP_ID, field)`` of every required field."""
    return [
        (op_id, name)
        for op_id, cls in sorted(SERVED.items())
        for name, info in cls.model_fields.items()
        if info.is_required()
    ]
