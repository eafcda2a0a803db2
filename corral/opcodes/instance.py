"""Instance opcodes (Ganeti 3.0.2's fields, types and defaults)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from corral.opcodes.base import OpCode
from corral.opcodes.types import (
    DiskIndex,
    DiskMods,
    DiskParams,
    DiskTemplate,
    FileDriver,
    Hypervisor,
    NicMods,
    NicParams,
    NonEmptyStr,
    NonNegInt,
    Params,
    PositiveInt,
    RecreateDisks,
    not_built,
)


class _InstanceOp(OpCode):
    OP_DSC_FIELD: ClassVar[str | None] = "instance_name"

    instance_name: str
    instance_uuid: NonEmptyStr | None = None


class OpInstanceCreate(OpCode):
    OP_ID = "OP_INSTANCE_CREATE"
    OP_DSC_FIELD = "instance_name"
    SECRET_FIELDS = ("osparams_secret",)
    PRIVATE_FIELDS = ("osparams_private",)

    instance_name: str
    force_variant: bool = False
    wait_for_sync: bool = not_built(True)
    name_check: bool = True
    ignore_ipolicy: bool = False
    opportunistic_locking: bool = False
    beparams: Params = Field(default_factory=dict)
    disks: list[DiskParams]
    disk_template: DiskTemplate | None = None
    group_name: NonEmptyStr | None = None
    file_driver: FileDriver | None = None
    file_storage_dir: NonEmptyStr | None = not_built()
    hvparams: Params = Field(default_factory=dict)
    hypervisor: Hypervisor | None = None
    iallocator: NonEmptyStr | None = None
    identify_defaults: bool = False
    ip_check: bool = True
    conflicts_check: bool = True
    mode: Literal["import", "create", "remote-import"]
    nics: list[NicParams]
    no_install: bool | None = None
    osparams: Params = Field(default_factory=dict)
    osparams_private: Params | None = None
    osparams_secret: Params | None = None
    os_type: NonEmptyStr | None = None
    pnode: NonEmptyStr | None = None
    pnode_uuid: NonEmptyStr | None = None
    snode: NonEmptyStr | None = None
    snode_uuid: NonEmptyStr | None = None
    source_handshake: list[Any] | None = None
    source_instance_name: NonEmptyStr | None = None
    source_shutdown_timeout: NonNegInt = 120
    source_x509_ca: NonEmptyStr | None = None
    src_node: NonEmptyStr | None = None
    src_node_uuid: NonEmptyStr | None = None
    src_path: NonEmptyStr | None = None
    compress: str = "none"
    start: bool = True
    forthcoming: bool = not_built(False)
    commit: bool = not_built(False)
    tags: list[NonEmptyStr] = Field(default_factory=list)
    instance_communication: bool = False
    helper_startup_timeout: int | None = None
    helper_shutdown_timeout: int | None = None


class OpInstanceRemove(_InstanceOp):
    OP_ID = "OP_INSTANCE_REMOVE"

    shutdown_timeout: NonNegInt = 120
    ignore_failures: bool = False


class OpInstanceStartup(_InstanceOp):
    OP_ID = "OP_INSTANCE_STARTUP"

    force: bool = False
    ignore_offline_nodes: bool = False
    hvparams: Params = Field(default_factory=dict)
    beparams: Params = Field(default_factory=dict)
    no_remember: bool = False
    startup_paused: bool = False
    shutdown_timeout: NonNegInt = 120


class OpInstanceShutdown(_InstanceOp):
    OP_ID = "OP_INSTANCE_SHUTDOWN"

    force: bool = False
    ignore_offline_nodes: bool = False
    timeout: NonNegInt = 120
    no_remember: bool = False
    admin_state_source: Literal["admin", "user"] | None = None


class OpInstanceReboot(_InstanceOp):
    OP_ID = "OP_INSTANCE_REBOOT"

    shutdown_timeout: NonNegInt = 120
    ignore_secondaries: bool = False
    reboot_type: Literal["soft", "full", "hard"]


class OpInstanceReinstall(_InstanceOp):
    OP_ID = "OP_INSTANCE_REINSTALL"
    SECRET_FIELDS = ("osparams_secret",)
    PRIVATE_FIELDS = ("osparams_private",)

    force_variant: bool = False
    os_type: NonEmptyStr | None = None
    osparams: Params | None = None
    osparams_private: Params | None = None
    osparams_secret: Params | None = None


class OpInstanceRename(_InstanceOp):
    OP_ID = "OP_INSTANCE_RENAME"
    # luxid shows no name in this opcode's summary.
    OP_DSC_FIELD = None

    new_name: NonEmptyStr
    name_check: bool = True
    ip_check: bool = True


class OpInstanceSetParams(_InstanceOp):
    OP_ID = "OP_INSTANCE_SET_PARAMS"
    PRIVATE_FIELDS = ("osparams_private",)

    force: bool = False
    force_variant: bool = False
    ignore_ipolicy: bool = False
    nics: NicMods = Field(default_factory=list)
    disks: DiskMods = Field(default_factory=list)
    beparams: Params = Field(default_factory=dict)
    runtime_mem: PositiveInt | None = None
    hvparams: Params = Field(default_factory=dict)
    disk_template: DiskTemplate | None = None
    ext_params: Params = not_built({})
    file_driver: FileDriver | None = None
    file_storage_dir: NonEmptyStr | None = not_built()
    pnode: NonEmptyStr | None = None
    pnode_uuid: NonEmptyStr | None = None
    remote_node: NonEmptyStr | None = None
    remote_node_uuid: NonEmptyStr | None = None
    iallocator: NonEmptyStr | None = not_built()
    os_name: NonEmptyStr | None = None
    osparams: Params = Field(default_factory=dict)
    osparams_private: Params | None = None
    # Corral's templates never resync: there is nothing to wait for.
    wait_for_sync: bool = True
    offline: bool | None = None
    conflicts_check: bool = True
    hotplug: bool = False
    hotplug_if_possible: bool = False
    instance_communication: bool | None = None


class OpInstanceGrowDisk(_InstanceOp):
    OP_ID = "OP_INSTANCE_GROW_DISK"

    wait_for_sync: bool = not_built(True)
    disk: NonNegInt = Field(lt=16)
    amount: NonNegInt
    absolute: bool = False
    ignore_ipolicy: bool = False


class OpInstanceActivateDisks(_InstanceOp):
    OP_ID = "OP_INSTANCE_ACTIVATE_DISKS"

    ignore_size: bool = False
    wait_for_sync: bool = False


class OpInstanceDeactivateDisks(_InstanceOp):
    OP_ID = "OP_INSTANCE_DEACTIVATE_DISKS"

    force: bool = False


class OpInstanceRecreateDisks(_InstanceOp):
    OP_ID = "OP_INSTANCE_RECREATE_DISKS"

    # Disk indexes, or [index, {size, mode, spindles}] pairs; none: all disks.
    disks: RecreateDisks = Field(default_factory=list)
    nodes: list[NonEmptyStr] = Field(default_factory=list)
    node_uuids: list[NonEmptyStr] | None = None
    iallocator: NonEmptyStr | None = None


class OpInstanceReplaceDisks(_InstanceOp):
    OP_ID = "OP_INSTANCE_REPLACE_DISKS"

    mode: Literal[
        "replace_on_primary", "replace_on_secondary", "replace_new_secondary", "replace_auto"
    ]
    disks: list[DiskIndex] = Field(default_factory=list)
    remote_node: NonEmptyStr | None = None
    remote_node_uuid: NonEmptyStr | None = None
    iallocator: NonEmptyStr | None = None
    early_release: bool = False
    ignore_ipolicy: bool = False


class OpInstanceFailover(_InstanceOp):
    OP_ID = "OP_INSTANCE_FAILOVER"

    shutdown_timeout: NonNegInt = 120
    ignore_consistency: bool = False
    target_node: NonEmptyStr | None = None
    target_node_uuid: NonEmptyStr | None = None
    ignore_ipolicy: bool = False
    cleanup: bool = False
    iallocator: NonEmptyStr | None = None


class OpInstanceMigrate(_InstanceOp):
    OP_ID = "OP_INSTANCE_MIGRATE"

    mode: Literal["live", "non-live"] | None = None
    live: bool | None = None
    target_node: NonEmptyStr | None = None
    target_node_uuid: NonEmptyStr | None = None
    allow_runtime_changes: bool = True
    ignore_ipolicy: bool = False
    cleanup: bool = False
    iallocator: NonEmptyStr | None = None
    allow_failover: bool = False
    ignore_hvversions: bool = False


class OpInstanceMove(_InstanceOp):
    OP_ID = "OP_INSTANCE_MOVE"

    shutdown_timeout: NonNegInt = 120
    ignore_ipolicy: bool = False
    target_node: NonEmptyStr
    target_node_uuid: NonEmptyStr | None = None
    # Corral's copy is not compressed: TLS on the cluster's own network.
    compress: str = not_built("none")
    ignore_consistency: bool = False


class OpInstanceConsole(_InstanceOp):
    OP_ID = "OP_INSTANCE_CONSOLE"


class OpInstanceQueryData(OpCode):
    OP_ID = "OP_INSTANCE_QUERY_DATA"

    use_locking: bool = False
    instances: list[NonEmptyStr] = Field(default_factory=list)
    static: bool = False
