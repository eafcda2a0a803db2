"""The checks of the node_verify call, by name: shared by the master, which
asks for them (corral.cmdlib.cluster_verify), and noded, which answers
(corral.node.verify_checks).  Ganeti's ``NV_*`` names where Ganeti has the check.

Stdlib only, as the rest of corral.rpc's tables.
"""

from __future__ import annotations

from typing import Final

FILELIST: Final = "filelist"  # [file] → {file: sha1} of those the node has
NODESETUP: Final = "nodesetup"  # None → [[level, message]] about certificates
HYPERVISOR: Final = "hypervisor"  # [hv] → {hv: why it cannot run, or None}
INSTANCELIST: Final = "instancelist"  # [hv] → {hv: [True, names] or [False, why]}
OSLIST: Final = "oslist"  # None → the OS definitions (as os_diagnose)
STORAGE: Final = "storage"  # {template: dir} → {template: why not servable, or None}
DISKS: Final = "disks"  # [disk description] → [[state, why]]
STORAGE_FILES: Final = "storage-files"  # [template] → {template: [file]}
UNFINISHED_EXPORTS: Final = "unfinished-exports"  # None → [instance] of <instance>.new
OOB_PATHS: Final = "oob-paths"  # [program] → [why it cannot run, or None]
# Corral's own: None → [what the running guests' network rules lack]
NETRULES: Final = "netrules"
# The answer's key holding {check: why it failed on the node}.
FAILURES: Final = "failures"

# A disk's state in the DISKS answer.
DISK_OK: Final = "ok"
DISK_MISSING: Final = "missing"
DISK_FAULTY: Final = "faulty"
