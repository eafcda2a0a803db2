"""Names and numbers shared by every part of Corral (Ganeti's values)."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Final


# Versions reported by ``gnt-cluster version`` and QueryClusterInfo.
PROTOCOL_VERSION: Final = 3000000
CONFIG_VERSION: Final = 3000000
OS_API_VERSION: Final = 20
EXPORT_VERSION: Final = 0
LUXI_VERSION: Final = 3000000
HOOKS_VERSION: Final = 2

# Job and opcode statuses.
JOB_STATUS_QUEUED: Final = "queued"
JOB_STATUS_WAITING: Final = "waiting"
JOB_STATUS_CANCELING: Final = "canceling"
JOB_STATUS_RUNNING: Final = "running"
JOB_STATUS_CANCELED: Final = "canceled"
JOB_STATUS_SUCCESS: Final = "success"
JOB_STATUS_ERROR: Final = "error"
JOB_STATUS_FINALIZED: Final = frozenset({JOB_STATUS_CANCELED, JOB_STATUS_SUCCESS, JOB_STATUS_ERROR})
JOB_STATUS_ALL: Final = frozenset(
    {
        JOB_STATUS_QUEUED,
        JOB_STATUS_WAITING,
        JOB_STATUS_CANCELING,
        JOB_STATUS_RUNNING,
        JOB_STATUS_CANCELED,
        JOB_STATUS_SUCCESS,
        JOB_STATUS_ERROR,
    }
)
OP_STATUS_QUEUED: Final = "queued"
OP_STATUS_WAITING: Final = "waiting"
OP_STATUS_CANCELING: Final = "canceling"
OP_STATUS_RUNNING: Final = "running"
OP_STATUS_CANCELED: Final = "canceled"
OP_STATUS_SUCCESS: Final = "success"
OP_STATUS_ERROR: Final = "error"

# Priorities: lower number runs first.
OP_PRIO_LOWEST: Final = 19
OP_PRIO_HIGHEST: Final = -20
OP_PRIO_LOW: Final = 10
OP_PRIO_NORMAL: Final = 0
OP_PRIO_HIGH: Final = -10
# The priorities a job may be submitted with (any in the range after a change).
OP_PRIO_SUBMIT_VALID: Final = frozenset({OP_PRIO_LOW, OP_PRIO_NORMAL, OP_PRIO_HIGH})
PRIORITY_NAMES: Final = {"low": OP_PRIO_LOW, "normal": OP_PRIO_NORMAL, "high": OP_PRIO_HIGH}

# Job log entry types.
ELOG_MESSAGE: Final = "message"
ELOG_MESSAGE_LIST: Final = "message-list"
ELOG_REMOTE_IMPORT: Final = "remote-import"
ELOG_JQUEUE_TEST: Final = "jqueue-test"
ELOG_DELAY_TEST: Final = "delay-test"

# OP_TEST_JQUEUE's notifications and the prefix of its test messages.
JQT_EXPANDNAMES: Final = "expandnames"
JQT_EXEC: Final = "exec"
JQT_STARTMSG: Final = "startmsg"
JQT_LOGMSG: Final = "logmsg"
JQT_ALL: Final = frozenset({JQT_EXPANDNAMES, JQT_EXEC, JQT_STARTMSG, JQT_LOGMSG})
JQT_MSGPREFIX: Final = "TESTMSG="

# Queue limits and timeouts.
DEFAULT_MAX_RUNNING_JOBS: Final = 20
DEFAULT_MAX_TRACKED_JOBS: Final = 25
JOB_QUEUE_SIZE_HARD_LIMIT: Final = 5000
LUXI_WFJC_TIMEOUT: Final = 89.0
# How long the command-line tools wait for a change of the job they follow.
DEFAULT_WFJC_TIMEOUT: Final = 60.0
DEFAULT_SHUTDOWN_TIMEOUT: Final = 120
# How long CancelJob waits for a cancelled job to end (luxid's luxiCancelJobTimeout).
LUXI_CANCEL_JOB_TIMEOUT: Final = 44.0

# Lock levels, in acquisition order.
LEVEL_CLUSTER: Final = "cluster"
LEVEL_INSTANCE: Final = "instance"
LEVEL_NODEGROUP: Final = "nodegroup"
LEVEL_NODE: Final = "node"
LEVEL_NODE_RES: Final = "node-res"
LEVEL_NETWORK: Final = "network"
LOCK_LEVELS: Final = (
    LEVEL_CLUSTER,
    LEVEL_INSTANCE,
    LEVEL_NODEGROUP,
    LEVEL_NODE,
    LEVEL_NODE_RES,
    LEVEL_NETWORK,
)
BGL: Final = "BGL"

# Error codes carried by OpPrereqError and friends.
ECODE_RESOLVER: Final = "resolver_error"
ECODE_NORES: Final = "insufficient_resources"
ECODE_TEMP_NORES: Final = "temp_insufficient_resources"
ECODE_INVAL: Final = "wrong_input"
ECODE_STATE: Final = "wrong_state"
ECODE_NOENT: Final = "unknown_entity"
ECODE_EXISTS: Final = "already_exists"
ECODE_NOTUNIQUE: Final = "resource_not_unique"
ECODE_FAULT: Final = "internal_error"
ECODE_ENVIRON: Final = "environment_error"

# CLI exit codes.
EXIT_SUCCESS: Final = 0
EXIT_FAILURE: Final = 1
EXIT_NOTCLUSTER: Final = 5
EXIT_NOTMASTER: Final = 11
EXIT_NODESETUP_ERROR: Final = 12
EXIT_CONFIRMATION: Final = 13
EXIT_UNKNOWN_FIELD: Final = 14

# Hooks.
HOOKS_PHASE_PRE: Final = "pre"
HOOKS_PHASE_POST: Final = "post"
HOOKS_PATH: Final = "/sbin:/bin:/usr/sbin:/usr/bin"
# The umask OS scripts and hooks run with (Ganeti's daemons run with 077).
SCRIPT_UMASK: Final = 0o077
HKR_SKIP: Final = 0
HKR_FAIL: Final = 1
HKR_SUCCESS: Final = 2
HOOKS_NAME_CFGUPDATE: Final = "config-update"
HOOKS_NAME_WATCHER: Final = "watcher"
HTYPE_CLUSTER: Final = "CLUSTER"
HTYPE_NODE: Final = "NODE"
HTYPE_GROUP: Final = "GROUP"
HTYPE_INSTANCE: Final = "INSTANCE"
HTYPE_NETWORK: Final = "NETWORK"

# What a private or secret value is shown as (Ganeti's serializer.Private).
REDACTED: Final = "<redacted>"

# Parameter values with a meaning of their own: unset a value, and a NIC's
# IP taken from its network's pool.
VALUE_NONE: Final = "none"
NIC_IP_POOL: Final = "pool"
VALUE_GENERATE: Final = "generate"

# Instance communication (Ganeti's): an extra routed NIC named after the
# instance, on the cluster's communication network, whose tap has the
# metadata address on the node's side.
INSTANCE_COMMUNICATION_NIC_PREFIX: Final = "ganeti:communication:"
INSTANCE_COMMUNICATION_NETWORK4: Final = "169.254.0.0/16"
INSTANCE_COMMUNICATION_NETWORK6: Final = "fe80::/10"
INSTANCE_COMMUNICATION_MAC_PREFIX: Final = "52:54:00"
INSTANCE_COMMUNICATION_NETWORK_MODE: Final = "routed"
INSTANCE_COMMUNICATION_NETWORK_LINK: Final = "communication_rt"
INSTANCE_COMMUNICATION_HOST_IP: Final = "169.254.169.254"

# Tags.
TAG_CLUSTER: Final = "cluster"
TAG_NODEGROUP: Final = "nodegroup"
TAG_NODE: Final = "node"
TAG_INSTANCE: Final = "instance"
TAG_NETWORK: Final = "network"
VALID_TAG_TYPES: Final = frozenset(
    {TAG_CLUSTER, TAG_NODEGROUP, TAG_NODE, TAG_INSTANCE, TAG_NETWORK}
)
MAX_TAG_LEN: Final = 128
MAX_TAGS_PER_OBJ: Final = 4096

# Network defaults.
DEFAULT_NODED_PORT: Final = 1811
# Ganeti's monitoring daemon's TCP port (mond; Corral serves it from noded).
DEFAULT_MOND_PORT: Final = 1815
# Seconds between masterd's looks at settled etcd members (--etcd-check-interval).
DEFAULT_ETCD_CHECK_INTERVAL: Final = 15.0
DEFAULT_RAPI_PORT: Final = 5080
DEFAULT_MAC_PREFIX: Final = "aa:00:00"
DEFAULT_NODEGROUP: Final = "default"

# RPC timeout classes, seconds.
RPC_TMO_URGENT: Final = 60
RPC_TMO_FAST: Final = 5 * 60
RPC_TMO_NORMAL: Final = 15 * 60
RPC_TMO_SLOW: Final = 3600
RPC_TMO_1DAY: Final = 86400  # OS installation (debootstrap over a slow mirror)

# gnt-cluster command and copyfile, carried out by noded for the master's root.
# A command's whole process group is killed after this many seconds (Ganeti's
# ssh waits forever; an hour covers a package upgrade).
CLUSTER_COMMAND_TIMEOUT: Final = 3600
# The node call's own timeout: the answer of a killed command still arrives.
CLUSTER_COMMAND_CALL_TIMEOUT: Final = CLUSTER_COMMAND_TIMEOUT + 60
# Bytes kept of each of a command's output streams (the rest is counted).
CLUSTER_COMMAND_MAX_OUTPUT: Final = 1 << 20
# The largest file copyfile copies: it travels in one node call, and noded
# takes requests of up to 64 MiB (base64 makes 4 bytes of 3).
CLUSTER_COPY_MAX_SIZE: Final = 32 << 20

# Query result statuses (per cell).
RS_NORMAL: Final = 0
RS_UNKNOWN: Final = 1
RS_NODATA: Final = 2
RS_UNAVAIL: Final = 3
RS_OFFLINE: Final = 4

# Query field kinds.
QFT_UNKNOWN: Final = "unknown"
QFT_TEXT: Final = "text"
QFT_BOOL: Final = "bool"
QFT_NUMBER: Final = "number"
QFT_NUMBER_FLOAT: Final = "float"
QFT_UNIT: Final = "unit"
QFT_TIMESTAMP: Final = "timestamp"
QFT_OTHER: Final = "other"

# Query resources.
QR_CLUSTER: Final = "cluster"
QR_INSTANCE: Final = "instance"
QR_NODE: Final = "node"
QR_LOCK: Final = "lock"
QR_GROUP: Final = "group"
QR_OS: Final = "os"
QR_JOB: Final = "job"
QR_EXPORT: Final = "export"
QR_NETWORK: Final = "network"
QR_FILTER: Final = "filter"

# Certificates.
CERT_VALIDITY_DAYS: Final = 5 * 365
CERT_EXPIRY_WARN_DAYS: Final = 30
CERT_EXPIRY_ERROR_DAYS: Final = 7

# Console kinds (Ganeti's CONS_*: what objects.InstanceConsole describes).
CONS_SSH: Final = "ssh"
CONS_VNC: Final = "vnc"
CONS_SPICE: Final = "spice"
CONS_MESSAGE: Final = "msg"
# Ganeti's default of the ssh_port node parameter (an ssh console's port).
DEFAULT_SSH_PORT: Final = 22

# Migrations: modes and the statuses a hypervisor reports (Ganeti's).
HT_MIGRATION_LIVE: Final = "live"
HT_MIGRATION_NONLIVE: Final = "non-live"
# The state a hypervisor reports for an instance its guest stopped itself
# (Ganeti's HvInstanceState.SHUTDOWN; the others are "running" and "paused").
HV_STATE_SHUTDOWN: Final = "shutdown"
HV_MIGRATION_ACTIVE: Final = "active"
HV_MIGRATION_COMPLETED: Final = "completed"
HV_MIGRATION_FAILED_STATUSES: Final = frozenset(("cancelled", "failed"))

# replace-disks' modes (Ganeti's REPLACE_DISK_*).
REPLACE_DISK_PRI: Final = "replace_on_primary"
REPLACE_DISK_SEC: Final = "replace_on_secondary"
REPLACE_DISK_CHG: Final = "replace_new_secondary"
REPLACE_DISK_AUTO: Final = "replace_auto"
REPLACE_MODES: Final = (REPLACE_DISK_PRI, REPLACE_DISK_SEC, REPLACE_DISK_CHG, REPLACE_DISK_AUTO)

# Exports and inter-cluster moves (Ganeti's EXPORT_MODE_*, IEC_*, RIE_*).
EXPORT_MODE_LOCAL: Final = "local"
EXPORT_MODE_REMOTE: Final = "remote"
EXPORT_MODES: Final = frozenset((EXPORT_MODE_LOCAL, EXPORT_MODE_REMOTE))
IEC_NONE: Final = "none"
# Ganeti's default compression tools, plus zstd which Corral's nodes also run.
IEC_DEFAULT_TOOLS: Final = ("gzip", "gzip-fast", "gzip-slow", "zstd")
RIE_VERSION: Final = 0
RIE_HANDSHAKE: Final = "Hi, I'm Ganeti"
RIE_CERT_VALIDITY: Final = 24 * 3600  # s: a move's X509 certificate
RIE_CONNECT_TIMEOUT: Final = 180  # s: an inter-cluster export to connect
DISK_TRANSFER_CONNECT_TIMEOUT: Final = 60  # s: a transfer between a cluster's nodes
X509_CERT_SIGNATURE_HEADER: Final = "X-Ganeti-Signature"

# Out-of-band management (Ganeti's OOB_*): the commands of a node's oob_program,
# the statuses of its health items, the key of its power-status answer.
OOB_POWER_ON: Final = "power-on"
OOB_POWER_OFF: Final = "power-off"
OOB_POWER_CYCLE: Final = "power-cycle"
OOB_POWER_STATUS: Final = "power-status"
OOB_HEALTH: Final = "health"
OOB_COMMANDS: Final = (OOB_HEALTH, OOB_POWER_CYCLE, OOB_POWER_OFF, OOB_POWER_ON, OOB_POWER_STATUS)
OOB_STATUSES: Final = ("CRITICAL", "OK", "UNKNOWN", "WARNING")
OOB_STATUS_WARNING: Final = "WARNING"
OOB_STATUS_CRITICAL: Final = "CRITICAL"
OOB_POWER_STATUS_POWERED: Final = "powered"
OOB_TIMEOUT: Final = 60  # s: Ganeti's default before the program is killed
OOB_POWER_DELAY: Final = 2.0  # s: Ganeti's default pause between power-ons
# Bytes kept of each output stream of the program: its answer is a small JSON.
OOB_MAX_OUTPUT: Final = 64 * 1024
