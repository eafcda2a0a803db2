"""RAPI's replace-disks inputs, as Ganeti's rlib2 reads them: the body, or
(the legacy interface Ganeti's RAPI client uses) query arguments, the disks
as a list or a comma-separated string."""

from __future__ import annotations

from typing import Any

import pytest

from corral.rapi.call import Call
from corral.rapi.errors import HttpError
from corral.rapi.instance_resources import replace_disks_inputs


def call(query: dict[str, list[str]] | None = None, body: Any = None) -> Call:
    return Call("instances_name_replace_disks", ("db",), query or {}, body, None)  # type: ignore[arg-type]


def test_the_body_or_the_query_arguments() -> None:
    assert replace_disks_inputs(call(body={"mode": "replace_on_secondary", "disks": [0, 1]})) == (
        {"mode": "replace_on_secondary", "disks": [0, 1]},
        {"instance_name": "db"},
    )
    query = {"mode": ["replace_new_secondary"], "remote_node": ["node3"], "disks": ["0, 1"]}
    assert replace_disks_inputs(call(query)) == (
        {"mode": "replace_new_secondary", "remote_node": "node3", "iallocator": None,
         "disks": [0, 1]},
        {"instance_name": "db"},
    )  # fmt: skip
    assert replace_disks_inputs(call()) == ({}, {"instance_name": "db"})


def test_a_bad_disk_index_is_a_bad_request() -> None:
    with pytest.raises(HttpError) as info:
        replace_disks_inputs(call({"mode": ["replace_auto"], "disks": ["0,x"]}))
    assert info.value.status == 400
    assert str(info.value).startswith("Invalid disk index passed: invalid literal for int()")
