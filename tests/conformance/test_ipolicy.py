"""Corral's instance policy logic against Ganeti 3.0.2's own functions.

The same cases go through Ganeti's library (``GetUpdatedIPolicy``,
``ComputeIPolicySpecViolation``, ``ComputeIPolicyDiskSizesViolation``,
``FillIPolicy``) and through ``corral.ipolicy``: the results, error classes,
messages and error codes must be equal.  The cases avoid messages that join
more than one member of a Python set, whose order Ganeti does not fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corral import errors
from corral import ipolicy as IP
from corral import storage_names as N
from tests.conformance.ganeti import ganeti_library

# Ganeti's library knows only Ganeti's templates: the default policy without
# Corral's own (mirrored), whose policy checks are Ganeti's for drbd.
DEFAULT = IP.fill_ipolicy(IP.IPOLICY_DEFAULTS, {"disk-templates": sorted(N.GANETI_DISK_TEMPLATES)})
MIN = DEFAULT["minmax"][0]["min"]
MAX = DEFAULT["minmax"][0]["max"]
TWO_PAIRS = {
    **DEFAULT,
    "minmax": [
        DEFAULT["minmax"][0],
        {"min": {**MIN, "cpu-count": 16}, "max": {**MAX, "cpu-count": 32}},
    ],
}

UPDATES: list[tuple[dict[str, Any], dict[str, Any], bool]] = [
    (DEFAULT, {"vcpu-ratio": "2.5", "spindle-ratio": 8}, False),
    (DEFAULT, {"std": {"memory-size": "256", "cpu-count": 2}}, False),
    (DEFAULT, {"minmax": [{"min": {**MIN, "cpu-count": 2}, "max": MAX}]}, False),
    (DEFAULT, {"minmax": [{"min": {**MIN, "cpu-count": 9}, "max": MAX}]}, False),
    (DEFAULT, {"minmax": [{"min": {**MIN, "disk-size": "x"}, "max": MAX}]}, False),
    (DEFAULT, {"minmax": [{"max": MAX}]}, False),
    (DEFAULT, {"minmax": [{"min": {**MIN, "colour": 1}, "max": MAX}]}, False),
    (DEFAULT, {"std": {"memory-size": 64}}, False),
    (DEFAULT, {"std": {"spindle-use": "many"}}, False),
    (DEFAULT, {"colour": "red"}, False),
    (DEFAULT, {"vcpu-ratio": "fast"}, False),
    (DEFAULT, {"vcpu-ratio": "default"}, False),
    (DEFAULT, {"disk-templates": []}, False),
    (DEFAULT, {"disk-templates": ["floppy"]}, False),
    (DEFAULT, {"disk-templates": ["plain", "file"]}, False),
    ({"vcpu-ratio": 2.0}, {"vcpu-ratio": "default", "disk-templates": ["file"]}, True),
    ({}, {"std": {"cpu-count": 1}}, True),
    ({}, {"minmax": [{"min": MIN, "max": MAX}]}, True),
    ({}, {"minmax": [{"min": {**MIN, "nic-count": 9}, "max": MAX}]}, True),
]
SPECS: list[tuple[dict[str, Any], Any, Any, list[int], Any, Any, list[str]]] = [
    (DEFAULT, 128, 1, [1024], 1, 1, ["file"]),
    (DEFAULT, 64, 9, [512, 2048], 0, None, ["file", "file"]),
    (DEFAULT, 40000, None, [], None, 13, []),
    (DEFAULT, "auto", "auto", [1024] * 17, 9, 0, ["plain"] * 17),
    ({**DEFAULT, "disk-templates": ["file"]}, None, None, [], None, None, []),
    ({**DEFAULT, "disk-templates": ["file"]}, None, None, [1024], None, None, ["plain"]),
    (TWO_PAIRS, 128, 20, [1024], 1, 1, ["file"]),
    (TWO_PAIRS, 64, 12, [1024], 1, 1, ["file"]),
]
DISKS: list[tuple[dict[str, Any], list[int], list[str]]] = [
    (DEFAULT, [1024, 4096], ["file", "file"]),
    (DEFAULT, [1024, 2 * 1048576], ["file", "file"]),
    (DEFAULT, [100], ["plain"]),
]
FILLS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (DEFAULT, {}),
    (DEFAULT, {"std": {"cpu-count": 3}, "vcpu-ratio": 1.5}),
    (TWO_PAIRS, {"disk-templates": ["file"]}),
]

_GANETI = r"""
import json, sys
from ganeti import errors, objects
from ganeti.cmdlib import common

def outcome(fn):
    try:
        return ["ok", fn()]
    except errors.GenericError as err:
        return [type(err).__name__, list(err.args)]

cases = json.load(sys.stdin)
print(json.dumps({
    "updates": [outcome(lambda: common.GetUpdatedIPolicy(o, c, group_policy=g))
                for o, c, g in cases["updates"]],
    "specs": [common.ComputeIPolicySpecViolation(p, m, c, len(d), n, d, s, t)
              for p, m, c, d, n, s, t in cases["specs"]],
    "disks": [common.ComputeIPolicyDiskSizesViolation(
                  p, d, [objects.Disk(dev_type=t) for t in ts])
              for p, d, ts in cases["disks"]],
    "fills": [objects.FillIPolicy(d, c) for d, c in cases["fills"]],
}))
"""


def corral_outcome(old: dict[str, Any], change: dict[str, Any], group: bool) -> list[Any]:
    try:
        return ["ok", IP.updated_ipolicy(old, change, group)]
    except errors.GenericError as err:
        return [type(err).__name__, list(err.args)]


def test_same_results_as_ganeti(ganeti: Path) -> None:
    cases = {"updates": UPDATES, "specs": SPECS, "disks": DISKS, "fills": FILLS}
    result = ganeti_library(_GANETI, stdin=json.dumps(cases))
    assert result.rc == 0, result.stderr
    theirs = json.loads(result.stdout)
    assert [corral_outcome(*case) for case in UPDATES] == theirs["updates"]
    assert [IP.spec_violations(p, m, c, d, n, s, t) for p, m, c, d, n, s, t in SPECS] == (
        theirs["specs"]
    )
    assert [IP.disk_sizes_violations(*case) for case in DISKS] == theirs["disks"]
    assert [IP.fill_ipolicy(*case) for case in FILLS] == theirs["fills"]
