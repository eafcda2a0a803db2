"""Cluster-wide opcodes (Ganeti 3.0.2's fields, types and defaults)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from corral.opcodes.base import OpCode
from corral.opcodes.types import (
    DiskParamsTemplate,
    DiskTemplate,
    Hypervisor,
    IntPair,
    NestedParams,
    NicParams,
    NonEmptyStr,
    NonNegInt,
    OsNestedParams,
    Params,
    PositiveInt,
    VerifyErrorCode,
    VerifySkipCheck,
    check_os_name,
    not_built,
)

_OS_LIST_ACTIONS = ("add", "remove", "attach", "detach")


def _check_os_list_changes(changes: list[list[str]]) -> list[list[str]]:
    for change in changes:
        if len(change) != 2 or change[0] not in _OS_LIST_ACTIONS or not change[1]:
            raise ValueError(f'each change is ["add" or "remove", OS name]; got {change!r}')
        check_os_name(change[1])
    return changes


# ``[["add" | "remove", os_name], ...]`` (Ganeti's type also allows attach/detach).
OsListChanges = Annotated[list[list[str]], AfterValidator(_check_os_list_changes)]


class OpClusterPostInit(OpCode):
    """Run the cluster-init hooks right after ``gnt-cluster init``."""

    OP_ID = "OP_CLUSTER_POST_INIT"


class OpClusterDestroy(OpCode):
    """Destroy the cluster: only the master may be left in it."""

    OP_ID = "OP_CLUSTER_DESTROY"


class OpClusterRedistConf(OpCode):
    """Send the cluster's files (ssconf, certificates, secrets) to every node again."""

    OP_ID = "OP_CLUSTER_REDIST_CONF"


class OpClusterActivateMasterIp(OpCode):
    """Bring the master IP up on the master node."""

    OP_ID = "OP_CLUSTER_ACTIVATE_MASTER_IP"


class OpClusterDeactivateMasterIp(OpCode):
    """Bring the master IP down on the master node."""

    OP_ID = "OP_CLUSTER_DEACTIVATE_MASTER_IP"


class OpClusterRename(OpCode):
    """Rename the cluster (its master IP follows the new name)."""

    OP_ID = "OP_CLUSTER_RENAME"
    OP_DSC_FIELD = "name"

    name: NonEmptyStr


class OpClusterRenewCrypto(OpCode):
    """New node certificates (all of the cluster's: ``node_certificates``);
    ``renew_ssh_keys`` only where the cluster manages SSH, as Ganeti."""

    OP_ID = "OP_CLUSTER_RENEW_CRYPTO"

    node_certificates: bool = False
    renew_ssh_keys: bool = False
    ssh_key_type: Literal["rsa", "dsa", "ecdsa"] | None = None
    ssh_key_bits: PositiveInt | None = None
    verbose: bool = False
    debug: bool = False


class OpClusterQuery(OpCode):
    """Return the cluster's information (as QueryClusterInfo)."""

    OP_ID = "OP_CLUSTER_QUERY"


class _VerifyOptions(OpCode):
    debug_simulate_errors: bool = False
    error_codes: bool = False
    ignore_errors: list[VerifyErrorCode] = Field(default_factory=list)
    verbose: bool = False


class OpClusterVerify(_VerifyOptions):
    """Verify the cluster: submits one config job and one job per node group."""

    OP_ID = "OP_CLUSTER_VERIFY"

    skip_checks: list[VerifySkipCheck] = Field(default_factory=list)
    group_name: NonEmptyStr | None = None
    verify_clutter: bool = False


class OpClusterVerifyDisks(OpCode):
    """Verify the disks: submits one OP_GROUP_VERIFY_DISKS job per node group."""

    OP_ID = "OP_CLUSTER_VERIFY_DISKS"

    group_name: NonEmptyStr | None = None


class OpClusterRepairDiskSizes(OpCode):
    """Record the disks' sizes as their nodes measure them (all instances' by default)."""

    OP_ID = "OP_CLUSTER_REPAIR_DISK_SIZES"

    instances: list[NonEmptyStr] = Field(default_factory=list)


class OpClusterVerifyConfig(_VerifyOptions):
    """Verify the configuration and certificates."""

    OP_ID = "OP_CLUSTER_VERIFY_CONFIG"


class OpClusterVerifyGroup(_VerifyOptions):
    """Verify the nodes of one node group."""

    OP_ID = "OP_CLUSTER_VERIFY_GROUP"
    OP_DSC_FIELD = "group_name"

    group_name: NonEmptyStr
    skip_checks: list[VerifySkipCheck] = Field(default_factory=list)
    verify_clutter: bool = False


class OpClusterSetParams(OpCode):
    """Change cluster parameters."""

    OP_ID = "OP_CLUSTER_SET_PARAMS"
    PRIVATE_FIELDS = ("osparams_private_cluster",)

    force: bool = False
    hv_state: Params | None = not_built(None, {})
    disk_state: Params | None = not_built(None, {})
    vg_name: str | None = not_built()
    enabled_hypervisors: list[Hypervisor] | None = None
    hvparams: NestedParams | None = None
    beparams: Params | None = None
    os_hvp: OsNestedParams | None = None
    osparams: OsNestedParams | None = None
    osparams_private_cluster: OsNestedParams | None = None
    diskparams: dict[DiskParamsTemplate, Params] | None = None
    candidate_pool_size: PositiveInt | None = None
    max_running_jobs: PositiveInt | None = None
    max_tracked_jobs: PositiveInt | None = None
    uid_pool: list[IntPair] | None = None
    add_uids: list[IntPair] | None = None
    remove_uids: list[IntPair] | None = None
    maintain_node_health: bool | None = None
    prealloc_wipe_disks: bool | None = not_built(None, False)
    nicparams: NicParams | None = None
    ndparams: Params | None = None
    ipolicy: Params | None = None
    drbd_helper: str | None = not_built()
    default_iallocator: str | None = None
    default_iallocator_params: Params | None = None
    mac_prefix: NonEmptyStr | None = None
    master_netdev: str | None = None
    master_netmask: NonNegInt | None = None
    reserved_lvs: list[NonEmptyStr] | None = not_built(None, [])
    hidden_os: OsListChanges | None = None
    blacklisted_os: OsListChanges | None = None
    use_external_mip_script: bool | None = None
    enabled_disk_templates: list[DiskTemplate] | None = None
    modify_etc_hosts: bool | None = None
    file_storage_dir: str | None = None
    shared_file_storage_dir: str | None = None
    gluster_storage_dir: str | None = not_built(None, "")
    install_image: str | None = None
    instance_communication_network: str | None = None
    zeroing_image: str | None = not_built(None, "")
    compression_tools: list[NonEmptyStr] | None = not_built()
    enabled_user_shutdown: bool | None = None
    # Corral's own (Ganeti has no etcd): run etcd members on the master candidates.
    etcd_members: bool | None = None
    enabled_data_collectors: dict[str, bool] | None = not_built(None, {})
    data_collector_interval: dict[str, int] | None = not_built(None, {})
