"""Cluster-wide opcodes."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from corral.opcodes.base import OpCode


class OpClusterPostInit(OpCode):
    """Run the cluster-init hooks right after ``gnt-cluster init``."""

    OP_ID = "OP_CLUSTER_POST_INIT"


class OpClusterDestroy(OpCode):
    """Destroy the cluster: only the master may be left in it."""

    OP_ID = "OP_CLUSTER_DESTROY"


class OpClusterQuery(OpCode):
    """Return the cluster's information (as QueryClusterInfo)."""

    OP_ID = "OP_CLUSTER_QUERY"


class _VerifyOptions(OpCode):
    debug_simulate_errors: bool = False
    error_codes: bool = False
    ignore_errors: list[str] = Field(default_factory=list)
    verbose: bool = False


class OpClusterVerify(_VerifyOptions):
    """Verify the cluster: submits one config job and one job per node group."""

    OP_ID = "OP_CLUSTER_VERIFY"

    skip_checks: list[str] = Field(default_factory=list)
    group_name: str | None = None
    verify_clutter: bool = False


class OpClusterVerifyConfig(_VerifyOptions):
    """Verify the configuration and certificates."""

    OP_ID = "OP_CLUSTER_VERIFY_CONFIG"


class OpClusterVerifyGroup(_VerifyOptions):
    """Verify the nodes of one node group."""

    OP_ID = "OP_CLUSTER_VERIFY_GROUP"
    OP_DSC_FIELD = "group_name"

    group_name: str
    skip_checks: list[str] = Field(default_factory=list)
    verify_clutter: bool = False


class OpClusterSetParams(OpCode):
    """Change cluster parameters."""

    OP_ID = "OP_CLUSTER_SET_PARAMS"
    PRIVATE_FIELDS = ("osparams_private_cluster",)

    force: bool = False
    max_running_jobs: int | None = Field(default=None, ge=1)
    max_tracked_jobs: int | None = Field(default=None, ge=1)
    candidate_pool_size: int | None = Field(default=None, ge=1)
    mac_prefix: str | None = None
    master_netdev: str | None = None
    master_netmask: int | None = Field(default=None, ge=0, le=128)
    enabled_hypervisors: list[str] | None = None
    enabled_disk_templates: list[str] | None = None
    hvparams: dict[str, dict[str, Any]] | None = None
    beparams: dict[str, Any] | None = None
    nicparams: dict[str, Any] | None = None
    ndparams: dict[str, Any] | None = None
    file_storage_dir: str | None = None
    modify_etc_hosts: bool | None = None
    maintain_node_health: bool | None = None
    default_iallocator: str | None = None
    hidden_os: list[list[str]] | None = None
    blacklisted_os: list[list[str]] | None = None
    osparams: dict[str, dict[str, Any]] | None = None
    osparams_private_cluster: dict[str, dict[str, Any]] | None = None
