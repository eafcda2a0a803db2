"""gnt-cluster verify: what one node's node_verify answer says about the node.

Each function takes the reporter (the verify unit's ``report``) and one
node's answer, and reports in Ganeti's words (cmdlib/cluster/verify.py):
protocol and release version, clock, node setup (certificates), hypervisors,
out-of-band programs, storage directories and OS definitions (against a reference node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import corral
from corral import constants as C
from corral import storage_names as N
from corral.crypto.cert_check import NODE_MAX_CLOCK_SKEW, WARNING
from corral.objects import Node
from corral.rpc import node_verify as NV
from corral.rpc import versions
from corral.storage import templates

# A storage kind the node lacks → Ganeti's code for it (ENODESETUP for the rest).
_STORAGE_CODES = {
    N.ST_FILE: "ENODEFILESTORAGEPATHUNUSABLE",
    N.ST_SHARED_FILE: "ENODESHAREDFILESTORAGEPATHUNUSABLE",
}


class Reporter(Protocol):
    def __call__(
        self, ecode: str, itype: str, item: str | None, text: str, warning: bool = False
    ) -> None: ...


@dataclass
class NodeImage:
    """One node as verify saw it: its answer (None if it gave none)."""

    node: Node
    answer: dict[str, Any] | None = None
    rpc_fail: bool = False
    fail_msg: str | None = None
    # Running instance names, per hypervisor that answered.
    running: set[str] = field(default_factory=set)
    # Hypervisors that could not list their instances on the node.
    hv_failed: set[str] = field(default_factory=set)
    oses: dict[str, dict[str, Any]] | None = None

    def failed(self, check: str) -> str | None:
        """Why the node could not answer ``check`` (None: it did, or was not asked)."""
        if self.answer is None:
            return None
        why = self.answer.get(NV.FAILURES, {}).get(check)
        return None if why is None else str(why)


def verify_node(report: Reporter, img: NodeImage) -> bool:
    """Ganeti's _VerifyNode: the answer is usable and the versions match."""
    name, data = img.node.name, img.answer
    if not isinstance(data, dict) or not data:
        report("ENODERPC", "node", name, "unable to verify node: no data returned")
        return False
    version = data.get("version")
    if not isinstance(version, int):
        report("ENODERPC", "node", name, "connection to node returned invalid data")
        return False
    if version != C.PROTOCOL_VERSION:
        report(
            "ENODEVERSION",
            "node",
            name,
            f"incompatible protocol versions: master {C.PROTOCOL_VERSION}, node {version}",
        )
        return False
    release = data.get("release")
    # A node from before versioned node calls sends none: 0.
    calls = data.get("node_calls", 0)
    if release != corral.__version__ or calls != versions.NODE_CALLS:
        text = f"software version mismatch: master {corral.__version__}, node {release}"
        if calls != versions.NODE_CALLS:
            text += f" (node calls: master {versions.NODE_CALLS}, node {calls})"
        report("ENODEVERSION", "node", name, text, warning=True)
    for level, msg in data.get(NV.NODESETUP, []):
        report("ENODESETUP", "node", name, f"node setup error: {msg}", warning=level == WARNING)
    if NV.NODESETUP in data.get(NV.FAILURES, {}):
        report("ENODESETUP", "node", name, f"node setup error: {img.failed(NV.NODESETUP)}")
    if img.node.vm_capable:
        for hv, problem in sorted(data.get(NV.HYPERVISOR, {}).items()):
            if problem is not None:
                report("ENODEHV", "node", name, f"hypervisor {hv} verify failure: '{problem}'")
    return True


def verify_time(report: Reporter, img: NodeImage, started: float, finished: float) -> None:
    """Ganeti's _VerifyNodeTime: the node's clock against the call's time window."""
    assert img.answer is not None
    try:
        ntime = float(img.answer["time"])
    except (KeyError, TypeError, ValueError):
        report("ENODETIME", "node", img.node.name, "Node returned invalid time")
        return
    if ntime < started - NODE_MAX_CLOCK_SKEW:
        diff = f"{abs(started - ntime):.1f}s"
    elif ntime > finished + NODE_MAX_CLOCK_SKEW:
        diff = f"{abs(ntime - finished):.1f}s"
    else:
        return
    report(
        "ENODETIME",
        "node",
        img.node.name,
        f"Node time diverges by at least {diff} from master node time",
    )


def verify_oob(report: Reporter, img: NodeImage) -> None:
    """Ganeti's _VerifyOob: the out-of-band programs can run on a node that may
    become the master (the master's noded runs them)."""
    assert img.answer is not None
    node = img.node
    if not (node.master_candidate or node.master_capable):
        return
    failure = img.failed(NV.OOB_PATHS)
    if failure:
        text = f"cannot check the out of band helpers: {failure}"
        report("ENODEOOBPATH", "node", node.name, text)
    for problem in img.answer.get(NV.OOB_PATHS, []):
        if problem:
            report("ENODEOOBPATH", "node", node.name, problem)


def verify_storage(report: Reporter, img: NodeImage) -> None:
    """Each enabled disk template's storage must be usable on the node."""
    assert img.answer is not None
    name = img.node.name
    failure = img.failed(NV.STORAGE)
    if failure:
        report("ENODESETUP", "node", name, f"cannot check the storage directories: {failure}")
    for template_name, problem in sorted(img.answer.get(NV.STORAGE, {}).items()):
        template = templates.DISK_TEMPLATES.get(template_name)
        if problem is None or template is None:
            continue
        code = _STORAGE_CODES.get(template.storage_type)
        if code is None:
            text = f"cannot serve disk template {template_name}: {problem}"
        else:
            text = f"The configured {template_name} storage path is unusable: {problem}"
        report(code or "ENODESETUP", "node", name, text)


def verify_netrules(report: Reporter, img: NodeImage) -> None:
    """The network rules of the node's ruled kvm guests are in place
    (Corral's own check; ENODENET, Ganeti's code for a node's network)."""
    assert img.answer is not None
    name = img.node.name
    failure = img.failed(NV.NETRULES)
    if failure:
        report("ENODENET", "node", name, f"cannot check the network rules: {failure}")
    for problem in img.answer.get(NV.NETRULES, []):
        report("ENODENET", "node", name, f"{problem}; restart corral-noded to restore them")


def update_instances(report: Reporter, img: NodeImage) -> None:
    """Record the node's running instances (ENODEHV for a hypervisor that failed)."""
    assert img.answer is not None
    name = img.node.name
    failure = img.failed(NV.INSTANCELIST)
    if failure:
        report("ENODEHV", "node", name, f"node hasn't returned valid instance list: {failure}")
    for hv, (ok, payload) in sorted(img.answer.get(NV.INSTANCELIST, {}).items()):
        if ok:
            img.running.update(payload)
        else:
            img.hv_failed.add(hv)
            report("ENODEHV", "node", name, f"hypervisor {hv} failed to list instances: {payload}")


def update_oses(report: Reporter, img: NodeImage) -> None:
    """Ganeti's _UpdateNodeOS: the node's OS list, by name."""
    assert img.answer is not None
    entries = img.answer.get(NV.OSLIST)
    if not isinstance(entries, list):
        why = img.failed(NV.OSLIST)
        text = "node hasn't returned valid OS data" + (f": {why}" if why else "")
        report("ENODEOS", "node", img.node.name, text)
        return
    img.oses = {entry["name"]: entry for entry in entries}


def _joined(values: Any) -> str:
    return ", ".join(sorted(str(v) for v in values))


def verify_oses(report: Reporter, img: NodeImage, base: NodeImage) -> None:
    """Ganeti's _VerifyNodeOS: every OS valid, and as on the reference node
    (API versions, variants, parameters, trust, and Corral's os_version)."""
    assert img.oses is not None and base.oses is not None
    ref = base.node.name

    def error(text: str) -> None:
        report("ENODEOS", "node", img.node.name, text)

    for os_name, entry in sorted(img.oses.items()):
        if not entry["valid"]:
            error(f"Invalid OS {os_name} (located at {entry['path']}): {entry['error']}")
        if entry.get("shadowed"):
            where = ", ".join([entry["path"], *entry["shadowed"]])
            error(f"OS '{os_name}' has multiple entries (first one shadows the rest): {where}")
        other = base.oses.get(os_name)
        if other is None:
            error(f"Extra OS {os_name} not present on reference node ({ref})")
        elif other["valid"]:  # an invalid reference OS is nothing to compare with
            for kind, mine, theirs in _os_differences(entry, other):
                error(
                    f"OS {kind} for {os_name} differs from reference node {ref}:"
                    f" [{_joined(mine)}] vs. [{_joined(theirs)}]"
                )
            if entry["trusted"] != other["trusted"]:
                error(
                    f"OS trusted for {os_name} differs from reference node {ref}:"
                    f" {entry['trusted']} vs. {other['trusted']}"
                )
    missing = set(base.oses) - set(img.oses)
    if missing:
        error(f"OSes present on reference node {ref} but missing on this node: {_joined(missing)}")


# What is compared with the reference node: (Ganeti's name of it, the key).
_OS_FIELDS = (
    ("API version", "api_versions"),
    ("variants list", "variants"),
    ("parameters", "parameters"),
    ("os_version", "os_version"),
)


def _os_differences(
    entry: dict[str, Any], other: dict[str, Any]
) -> list[tuple[str, set[str], set[str]]]:
    out = []
    for kind, key in _OS_FIELDS:
        mine, theirs = _as_set(entry[key]), _as_set(other[key])
        if mine != theirs:
            out.append((kind, mine, theirs))
    return out


def _as_set(value: Any) -> set[str]:
    """A compared field as a set of strings (parameters as Ganeti shows them)."""
    if isinstance(value, list):
        return {f"{v[0]}: {v[1]}" if isinstance(v, list) else str(v) for v in value}
    return {str(value)} if value else set()
