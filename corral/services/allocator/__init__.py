"""Instance allocators: where instances go.

Logical units ask :func:`run` with a request (see ``requests``); the
allocator is the built-in one (``hail``, also the default) or an external
script with Ganeti's iallocator protocol.  Both get the same input, built
from the configuration and the nodes' live data (``model``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.services.allocator import hail, script
from corral.services.allocator.model import build_input
from corral.services.allocator.requests import Request

if TYPE_CHECKING:
    from corral.objects import Cluster
    from corral.paths import Paths
    from corral.services.context import Master

BUILTIN = hail.NAME
# Ganeti's DEFAULT_IALLOCATOR_SHORTCUT: "the cluster's default allocator".
DEFAULT_SHORTCUT = "."


@dataclass
class Answer:
    """An allocator's answer, checked."""

    success: bool
    info: str
    result: Any


def default_name(cluster: Cluster, given: str | None) -> str:
    """The allocator to run: ``given``, else the cluster's default, else hail."""
    if given and given != DEFAULT_SHORTCUT:
        return given
    return cluster.default_iallocator or BUILTIN


def check_exists(paths: Paths, name: str) -> None:
    """Refuse an allocator name that is neither hail nor a script in the search path."""
    if name != BUILTIN and script.find_script(paths, name) is None:
        raise errors.OpPrereqError(
            f"Invalid default iallocator script '{name}' specified", C.ECODE_INVAL
        )


async def run(
    master: Master, name: str, request: Request, *, hypervisor: str, disk_template: str
) -> Answer:
    """Ask the allocator ``name`` (hail: the built-in one) about ``request``."""
    data = await build_input(master, request, hypervisor, disk_template)
    if name == BUILTIN:
        answer = hail.run(data)
    else:
        out_text = await script.run_script(
            master.paths, name, json.dumps(data), dict(master.cfg.cluster.default_iallocator_params)
        )
        answer = script.parse_answer(out_text)
    if answer["success"]:
        request.check_result(answer["result"])
    return Answer(bool(answer["success"]), str(answer["info"]), answer["result"])
