"""Instance opcodes (Ganeti's field names and defaults)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from corral.opcodes.base import OpCode

Params = dict[str, Any]


class _InstanceOp(OpCode):
    OP_DSC_FIELD = "instance_name"

    instance_name: str = Field(min_length=1)
    instance_uuid: str | None = None


class OpInstanceCreate(OpCode):
    OP_ID = "OP_INSTANCE_CREATE"
    OP_DSC_FIELD = "instance_name"
    SECRET_FIELDS = ("osparams_secret",)
    PRIVATE_FIELDS = ("osparams_private",)

    instance_name: str = Field(min_length=1)
    mode: Literal["create", "import", "remote-import"] = "create"
    os_type: str | None = None
    force_variant: bool = False
    disk_template: str
    disks: list[Params] = Field(default_factory=list)
    nics: list[Params] = Field(default_factory=list)
    beparams: Params = Field(default_factory=dict)
    hvparams: Params = Field(default_factory=dict)
    hypervisor: str | None = None
    osparams: Params = Field(default_factory=dict)
    osparams_private: Params = Field(default_factory=dict)
    osparams_secret: Params = Field(default_factory=dict)
    pnode: str | None = None
    pnode_uuid: str | None = None
    snode: str | None = None
    snode_uuid: str | None = None
    group_name: str | None = None
    iallocator: str | None = None
    name_check: bool = True
    ip_check: bool = True
    conflicts_check: bool = True
    no_install: bool = False
    start: bool = True
    wait_for_sync: bool = True
    ignore_ipolicy: bool = False
    opportunistic_locking: bool = False
    identify_defaults: bool = False
    file_driver: str | None = None
    file_storage_dir: str | None = None
    src_node: str | None = None
    src_node_uuid: str | None = None
    src_path: str | None = None
    source_handshake: list[Any] | None = None
    source_instance_name: str | None = None
    source_shutdown_timeout: int = 120
    source_x509_ca: str | None = None
    compress: str = "none"
    forthcoming: bool = False
    commit: bool = False
    tags: list[str] = Field(default_factory=list)
    instance_communication: bool = False
    helper_startup_timeout: int | None = None
    helper_shutdown_timeout: int | None = None


class OpInstanceRemove(_InstanceOp):
    OP_ID = "OP_INSTANCE_REMOVE"

    shutdown_timeout: int = Field(default=120, ge=0)
    ignore_failures: bool = False


class OpInstanceStartup(_InstanceOp):
    OP_ID = "OP_INSTANCE_STARTUP"

    force: bool = False
    ignore_offline_nodes: bool = False
    hvparams: Params = Field(default_factory=dict)
    beparams: Params = Field(default_factory=dict)
    no_remember: bool = False
    startup_paused: bool = False
    shutdown_timeout: int = Field(default=120, ge=0)


class OpInstanceShutdown(_InstanceOp):
    OP_ID = "OP_INSTANCE_SHUTDOWN"

    force: bool = False
    ignore_offline_nodes: bool = False
    timeout: int = Field(default=120, ge=0)
    shutdown_timeout: int | None = None
    no_remember: bool = False
    admin_state_source: str | None = None


class OpInstanceReboot(_InstanceOp):
    OP_ID = "OP_INSTANCE_REBOOT"

    shutdown_timeout: int = Field(default=120, ge=0)
    ignore_secondaries: bool = False
    reboot_type: Literal["soft", "hard", "full"] = "hard"


class OpInstanceReinstall(_InstanceOp):
    OP_ID = "OP_INSTANCE_REINSTALL"
    SECRET_FIELDS = ("osparams_secret",)
    PRIVATE_FIELDS = ("osparams_private",)

    force_variant: bool = False
    os_type: str | None = None
    osparams: Params | None = None
    osparams_private: Params | None = None
    osparams_secret: Params | None = None


class OpInstanceRename(_InstanceOp):
    OP_ID = "OP_INSTANCE_RENAME"

    new_name: str = Field(min_length=1)
    name_check: bool = True
    ip_check: bool = False


class OpInstanceSetParams(_InstanceOp):
    OP_ID = "OP_INSTANCE_SET_PARAMS"
    PRIVATE_FIELDS = ("osparams_private",)

    force: bool = False
    force_variant: bool = False
    ignore_ipolicy: bool = False
    nics: list[list[Any]] = Field(default_factory=list)
    disks: list[list[Any]] = Field(default_factory=list)
    beparams: Params = Field(default_factory=dict)
    runtime_mem: int | None = None
    hvparams: Params = Field(default_factory=dict)
    disk_template: str | None = None
    os_name: str | None = None
    osparams: Params | None = None
    osparams_private: Params | None = None
    offline: bool | None = None
    conflicts_check: bool = True
    hotplug: bool = False
    wait_for_sync: bool = True
    pnode: str | None = None
    remote_node: str | None = None
    iallocator: str | None = None
    file_driver: str | None = None
    file_storage_dir: str | None = None


class OpInstanceGrowDisk(_InstanceOp):
    OP_ID = "OP_INSTANCE_GROW_DISK"

    disk: int = Field(ge=0)
    amount: int = Field(ge=0)
    absolute: bool = False
    wait_for_sync: bool = True
    ignore_ipolicy: bool = False


class OpInstanceQueryData(OpCode):
    OP_ID = "OP_INSTANCE_QUERY_DATA"

    instances: list[str] = Field(default_factory=list)
    static: bool = False
    use_locking: bool = False
