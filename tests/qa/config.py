"""The QA configuration (Ganeti's ``qa-sample.json`` format) of the throw-away cluster.

Every test group the suite has is enabled, except those that need what a
two-node cluster of fake-hypervisor nodes without LVM cannot have; those are
listed with their reason in :data:`DISABLED` (the driver reports the ones that
need LVM, DRBD, RBD, Gluster or Xen as N/A).  ``fast`` is a subset for the
default test run.
"""

from __future__ import annotations

import secrets
from typing import Any

from corral import testbed

OS_NAME = "qa-os"
RAPI_USER = "ganeti-qa"
RAPI_SECRET = secrets.token_hex(16)
TEMPLATES = ("file", "sharedfile", "diskless")
FILE_DIR = "/srv/ganeti/file-storage"
SHARED_DIR = "/srv/ganeti/shared-file-storage"
RENAMED_CLUSTER = "cluster-renamed.example.com"
INSTANCES = tuple(f"inst{k}.example.com" for k in range(1, 7))
RENAMED_INSTANCE = "inst-renamed.example.com"
# Instance policy bounds, as in Ganeti's qa-sample.json (the suite adds 512 MiB disks).
ISPECS = {"ispec_disk_size_min": 512, "ispec_mem_size_max": 1024}
# What the cluster is initialised with: what the suite's TestClusterInit passes
# for this config (hypervisor, templates, their directories, ispecs).
INIT_ARGS = (
    "--enabled-hypervisors=fake",
    f"--enabled-disk-templates={','.join(TEMPLATES)}",
    f"--file-storage-dir={FILE_DIR}",
    f"--shared-file-storage-dir={SHARED_DIR}",
    "--specs-disk-size=min=512",
    "--specs-mem-size=max=1024",
)
# Test groups off, and why.
DISABLED = {
    # The harness builds the cluster (nodes join Corral with a token, not SSH)
    # and leaves it to be thrown away.
    "create-cluster": "the harness creates the cluster",
    "node-evacuate": "needs three nodes",
    "node-migrate": "needs three nodes",
    "cluster-upgrade": "needs two installed Ganeti versions",
    "instance-device-hotplug": "needs KVM (hotplug)",
    # Off in Ganeti's qa-sample.json: with a diskless instance move-instance waits
    # for ever against Ganeti too (a remote import of no disks never sends its
    # ELOG_REMOTE_IMPORT: lib/masterd/instance.py 1459-1480), and ganeti-qa.py says
    # it crashes on file-based instances (Ganeti issue 414).  Corral's conformance
    # tests run Ganeti's move-instance (tests/conformance/test_move_instance_ganeti.py).
    "inter-cluster-instance-move": "waits for ever with a diskless instance",
    # Needs what this machine has not (reported N/A by the driver).
    "instance-add-plain-disk": "LVM",
    "instance-add-drbd-disk": "DRBD",
    "instance-add-rbd": "RBD",
    "instance-add-gluster": "GlusterFS",
    "cluster-reserved-lvs": "LVM",
    "cluster-exclusive-storage": "LVM",
    "exclusive-storage-instance-tests": "LVM",
    "node-volumes": "LVM",
    "instance-remove-drbd-offline": "DRBD",
    "group-custom-ssh-port": "LVM",
    "parallel-performance": "LVM, DRBD",
}
# Test groups of the fast subset (everything else off).
FAST = (
    "env",
    "cluster-info",
    "cluster-verify",
    "node-list",
    "node-info",
    "instance-list",
    "job-list",
    "group-list",
    "tags",
    "rapi",
    "os",
    "default-instance-tests",
    "instance-add-diskless",
    "instance-info",
    "instance-shutdown",
    "cluster-burnin",
)
# Ganeti's burnin alone (the suite's TestClusterBurnin).
BURNIN = ("cluster-burnin",)
SUBSETS = ("fast", "burnin", "full")


def hosts_file(nodes: int) -> str:
    """``/etc/hosts`` of the namespace: nodes, cluster and instance names."""
    lines = ["127.0.0.1 localhost"]
    lines += [f"127.0.0.{k} {testbed.node_name(k)}" for k in range(1, nodes + 1)]
    # The renamed cluster's address must not answer (Ganeti's rename refuses an
    # address in use, and every 127/8 address answers on the namespace's lo):
    # one the namespace has no route to, so that nothing is sent.
    lines += [f"127.0.0.100 {testbed.CLUSTER_NAME}", f"198.51.100.254 {RENAMED_CLUSTER}"]
    names = (*INSTANCES, RENAMED_INSTANCE)
    lines += [f"198.51.100.{k} {name}" for k, name in enumerate(names, start=1)]
    return "\n".join(lines) + "\n"


def _tests(subset: str) -> dict[str, bool]:
    if subset in ("fast", "burnin"):
        return {"default": False, **dict.fromkeys(FAST if subset == "fast" else BURNIN, True)}
    return {"default": True, **dict.fromkeys(DISABLED, False)}


def qa_config(subset: str, nodes: int = 2) -> dict[str, Any]:
    """The QA JSON for the throw-away cluster, with the tests of ``subset``."""
    return {
        "name": testbed.CLUSTER_NAME,
        "rename": RENAMED_CLUSTER,
        "enabled-hypervisors": "fake",
        "hypervisor-parameters": {},
        "primary_ip_version": 4,
        "enabled-disk-templates": list(TEMPLATES),
        "convert-disk-templates": list(TEMPLATES),
        "default-file-storage-dir": FILE_DIR,
        "default-shared-file-storage-dir": SHARED_DIR,
        "os": OS_NAME,
        "maxmem": "256M",
        "minmem": "128M",
        "disks": [
            {"size": "1G", "name": "disk0", "growth": "2G"},
            {"size": "1G", "name": "disk1", "growth": "1G"},
        ],
        "nodes": [
            {"primary": testbed.node_name(k), "secondary": f"127.0.0.{k}"}
            for k in range(1, nodes + 1)
        ],
        "instances": [{"name": name} for name in INSTANCES],
        "rapi-user": RAPI_USER,
        **ISPECS,
        "tests": _tests(subset),
        "options": {
            "burnin-instances": 2,
            "burnin-disk-template": "file",
            "burnin-in-parallel": False,
            "burnin-check-instances": False,
            "burnin-rename": RENAMED_INSTANCE,
            "burnin-reboot": True,
            "reboot-types": ["soft", "hard", "full"],
            "use-iallocators": False,
        },
    }
