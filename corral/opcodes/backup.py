"""Export opcodes (Ganeti 3.0.2's OpBackupPrepare, OpBackupExport, OpBackupRemove)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr, NonNegInt, not_built

ExportMode = Literal["local", "remote"]


class _BackupOp(OpCode):
    OP_DSC_FIELD: ClassVar[str | None] = "instance_name"

    instance_name: str
    instance_uuid: NonEmptyStr | None = None


class OpBackupPrepare(_BackupOp):
    OP_ID = "OP_BACKUP_PREPARE"

    mode: ExportMode


class OpBackupExport(_BackupOp):
    OP_ID = "OP_BACKUP_EXPORT"

    compress: str = "none"
    shutdown_timeout: NonNegInt = 120
    # local: a node name; remote: one signed destination per disk.
    target_node: NonEmptyStr | list[Any]
    target_node_uuid: NonEmptyStr | None = None
    shutdown: bool = True
    remove_instance: bool = False
    ignore_remove_failures: bool = False
    mode: ExportMode = "local"
    x509_key_name: list[Any] | None = None
    destination_x509_ca: NonEmptyStr | None = None
    # Zeroing runs a helper VM with a zeroing image; Corral has neither yet.
    zero_free_space: bool = not_built(False)
    zeroing_timeout_fixed: int | None = not_built()
    zeroing_timeout_per_mib: float | None = not_built()
    # Corral's disk templates have no snapshots: a running instance is exported
    # shut down, which Ganeti allows only with long_sleep.
    long_sleep: bool = False


class OpBackupRemove(_BackupOp):
    OP_ID = "OP_BACKUP_REMOVE"
