"""Corral's query fields against Ganeti 3.0.2's definitions.

Ganeti's Python library (``ganeti.query.ALL_FIELDS``) gives every field's
title, kind and description; Corral's masterd answers ``QueryFields``.  Every
field Corral serves must be Ganeti's, defined alike.  In Ganeti 3.0.2 these
queries are answered by luxid, whose definitions (in Ganeti's Haskell
sources, ``src/Ganeti/Query/*.hs``) differ from the Python library's in a few
places; there Corral gives luxid's, listed in ``LUXID_DEFINITIONS``.  (OS
queries run through the Python code, whose definitions are the ones used.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from tests.conformance.ganeti import ganeti_library, run_ganeti
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import NO_CHECKS, ok
from tests.helpers.osdef import make_os

RESOURCES = ("instance", "node", "group", "os", "lock", "job", "network", "export", "filter")

Definition = tuple[str, str, str]  # title, kind, description

# Where luxid defines a field otherwise than ganeti/query.py, luxid's
# definition: it is what Ganeti 3.0.2 sends, so it is what Corral sends.
LUXID_DEFINITIONS: dict[tuple[str, str], Definition] = {
    # Query/Instance.hs says "of instance" where query.py says "of the instance".
    ("instance", "admin_state"): ("InstanceState", "text", "Desired state of instance"),
    ("instance", "admin_up"): ("Autostart", "bool", "Desired state of instance"),
    ("instance", "disks_active"): ("DisksActive", "bool", "Desired state of instance disks"),
    # Query/Common.hs's forthcomingFields starts the description in lower case.
    ("instance", "forthcoming"): ("Forthcoming", "bool", "whether the Instance is forthcoming"),
    # Query/Instance.hs's statusDocText has no USER_down, and ends its last
    # sentence where query.py puts USER_down's in the middle of it.
    ("instance", "status"): (
        "Status",
        "text",
        'Instance status; "running" if instance is set to be running and actually is,'
        ' "ADMIN_down" if instance is stopped and is not running, "ERROR_wrongnode" if'
        ' instance running, but not on its designated primary node, "ERROR_up" if'
        ' instance should be stopped, but is actually running, "ERROR_down" if instance'
        " should run, but doesn't, \"ERROR_nodedown\" if instance's primary node is down,"
        ' "ERROR_nodeoffline" if instance\'s primary node is marked offline,'
        ' "ADMIN_offline" if instance is offline and does not use dynamic resources',
    ),
    # Query/Node.hs: space "on" the storage unit (query.py: "in", "used for").
    ("node", "dfree"): ("DFree", "unit", "Available storage space on storage unit"),
    ("node", "dtotal"): (
        "DTotal",
        "unit",
        "Total storage space on storage unit for instance disk allocation",
    ),
    # Query/Locks.hs: a lock's name is of kind "other", and jobs (not
    # threads, as in Ganeti 2's masterd) wait for locks.
    ("lock", "name"): ("Name", "other", "Lock name"),
    ("lock", "pending"): ("Pending", "other", "Jobs waiting for the lock"),
    # Query/FilterRules.hs: query.py's filter fields are placeholders (the
    # uuid's description is even the network's); luxid's are these.
    ("filter", "action"): ("Action", "other", "Filter action"),
    ("filter", "predicates"): ("Predicates", "other", "List of filter predicates"),
    ("filter", "priority"): ("Priority", "other", "Filter priority"),
    ("filter", "reason_trail"): ("ReasonTrail", "other", "Reason why this filter was added"),
    ("filter", "uuid"): ("UUID", "other", "Filter ID"),
    ("filter", "watermark"): (
        "Watermark",
        "other",
        "Highest job ID used at the time when the filter was added",
    ),
}

# Corral's own fields (see "os_version" in README.md): not in Ganeti.
CORRAL_ONLY = {("os", "os_version"), ("os", "os_version_consistent")}

_GANETI_FIELDS = r"""
import json
from ganeti import query
print(json.dumps({
    resource: {name: [fdef.title, fdef.kind, fdef.doc] for name, (fdef, _, _, _) in fields.items()}
    for resource, fields in query.ALL_FIELDS.items()
}))
"""


@pytest.fixture(scope="module")
def ganeti_fields(ganeti: Path) -> dict[str, dict[str, Definition]]:
    """resource → field → (title, kind, description), as Ganeti's query.py has them."""
    result = ganeti_library(_GANETI_FIELDS)
    assert result.rc == 0, result.stderr
    raw: dict[str, dict[str, list[str]]] = json.loads(result.stdout)
    return {
        res: {name: (d[0], d[1], d[2]) for name, d in fields.items()} for res, fields in raw.items()
    }


@pytest.fixture(scope="module")
def corral_fields(gcluster: TestCluster) -> dict[str, dict[str, Definition]]:
    """resource → field → (title, kind, description), from masterd's QueryFields."""
    out: dict[str, dict[str, Definition]] = {}
    with gcluster.client() as client:
        for resource in RESOURCES:
            answer: dict[str, Any] = client.query_fields(resource)
            out[resource] = {f["name"]: (f["title"], f["kind"], f["doc"]) for f in answer["fields"]}
    return out


@pytest.mark.parametrize("resource", RESOURCES)
def test_every_field_is_defined_as_ganeti_does(
    resource: str,
    ganeti_fields: dict[str, dict[str, Definition]],
    corral_fields: dict[str, dict[str, Definition]],
) -> None:
    theirs = ganeti_fields[resource]
    wrong = []
    for name, ours in sorted(corral_fields[resource].items()):
        if (resource, name) in CORRAL_ONLY:
            continue
        if name not in theirs:
            wrong.append(f"{name}: not a Ganeti field")
            continue
        expected = LUXID_DEFINITIONS.get((resource, name), theirs[name])
        if ours != expected:
            wrong.append(f"{name}: {ours} instead of {expected}")
    assert not wrong, "\n".join(wrong)


def test_luxid_table_lists_real_differences(
    ganeti_fields: dict[str, dict[str, Definition]],
    corral_fields: dict[str, dict[str, Definition]],
) -> None:
    """Each entry differs from query.py (else it does not belong in the table),
    and is a field Corral serves."""
    for (resource, name), luxid in LUXID_DEFINITIONS.items():
        assert ganeti_fields[resource][name] != luxid, (resource, name)
        assert name in corral_fields[resource], (resource, name)


@pytest.mark.parametrize("resource", RESOURCES)
def test_no_field_is_left_out(
    resource: str,
    ganeti_fields: dict[str, dict[str, Definition]],
    corral_fields: dict[str, dict[str, Definition]],
) -> None:
    """Every field of Ganeti's, those of every hypervisor's parameters (hv/...)
    included, though Corral runs only some hypervisors."""
    missing = {name for name in ganeti_fields[resource] if name not in corral_fields[resource]}
    assert missing == set()


def test_corral_only_fields_are_not_ganetis(
    ganeti_fields: dict[str, dict[str, Definition]],
    corral_fields: dict[str, dict[str, Definition]],
) -> None:
    for resource, name in CORRAL_ONLY:
        assert name in corral_fields[resource]
        assert name not in ganeti_fields[resource]


def test_hv_fields_of_every_hypervisor(ganeti: Path, tmp_path: Path) -> None:
    """Ganeti's gnt-instance lists any hypervisor's parameter: the instance's
    own value where its hypervisor has the parameter, unavailable ("-") where
    not (chroot's init_script, kvm's cpu_type on a fake instance); the
    cluster-wide ones (migration_mode) are no fields."""
    with running_cluster(tmp_path, "--enabled-hypervisors=fake,kvm") as cl:
        make_os(cl.paths, "os1", variants=None)
        common = [*NO_CHECKS, "-t", "diskless", "-o", "os1", "--no-start", "-n", cl.node_name]
        ok(cl.gnt("instance", "add", *common, "-H", "kvm:kernel_path=,cpu_type=host", "kvm1"))
        ok(cl.gnt("instance", "add", *common, "fake1"))
        fields = "name,hypervisor,hv/acpi,hv/cpu_type,hv/init_script,hv/kernel_path"
        argv = ["gnt-instance", "list", "--no-headers", "--separator=|", "-o", fields]
        listed = run_ganeti(cl.paths.root, argv)
        assert (listed.rc, listed.stdout) == (0, "fake1|fake|-|-|-|-\nkvm1|kvm|Y|host|-|\n")
        argv = ["gnt-instance", "list", "--no-headers", "-o", "name,hv/migration_mode"]
        unknown = run_ganeti(cl.paths.root, argv)
        assert unknown.rc == C.EXIT_UNKNOWN_FIELD, unknown.stderr
