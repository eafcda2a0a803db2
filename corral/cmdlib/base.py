"""The logical-unit base class and what every unit can reach.

Life cycle, driven by ``corral.cmdlib.processor``: check arguments → expand
names → declare locks → (locks taken) → check prerequisites → pre hooks →
execute → commit config → post hooks → config-update hook.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from corral import constants as C
from corral import errors
from corral.config.manager import KIND_NAMES
from corral.hooks import HookResults, HooksMaster, HookSpec, node_addresses
from corral.objects import ConfigObject, Node
from corral.opcodes.base import OpCode

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager, ConfigTransaction
    from corral.jobs.runner import OpContext
    from corral.rpc.result import NodeAddress
    from corral.services.context import Master

# A lock level's value meaning "every lock of the level".
ALL_SET = "__all__"

OpT = TypeVar("OpT", bound=OpCode)
ObjT = TypeVar("ObjT", bound=ConfigObject)

_LU_REGISTRY: dict[str, type[LogicalUnit[Any]]] = {}


class LogicalUnit(ABC, Generic[OpT]):
    """One opcode's implementation."""

    OPCODE: ClassVar[type[OpCode]]
    HPATH: ClassVar[str | None] = None
    HTYPE: ClassVar[str | None] = None
    # True: the unit takes the Big Ganeti Lock exclusively (cluster-wide changes).
    REQ_BGL: ClassVar[bool] = True
    # True: the unit runs its post hooks itself, during exec (cluster destroy).
    POST_HOOKS_IN_EXEC: ClassVar[bool] = False

    def __init__(self, master: Master, op: OpT, ctx: OpContext, tx: ConfigTransaction) -> None:
        self.master = master
        self.cfg = master.cfg
        self.op = op
        self.ctx = ctx
        self.tx = tx
        self.needed_locks: dict[str, list[str] | str] = {}
        self.share_locks: dict[str, bool] = {}
        # Levels whose locks are taken as they are free, the others not waited
        # for (Ganeti's opportunistic_locks; at least one of them is taken).
        self.opportunistic_levels: set[str] = set()
        self._expanded: list[_Expanded] = []
        # Whether a checkpoint committed changes (the config-update hook runs then too).
        self.checkpoint_changed = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        opcode = cls.__dict__.get("OPCODE")
        if opcode is not None:
            _LU_REGISTRY[opcode.OP_ID] = cls

    def bgl_shared(self) -> bool:
        """Whether this unit can share the Big Ganeti Lock (see REQ_BGL)."""
        return not self.REQ_BGL

    # Life cycle steps, overridden as needed
    def check_arguments(self) -> None:
        """Check the opcode's arguments alone (no config, no locks)."""

    def expand_names(self) -> None:
        """Turn names into config objects; fail on unknown ones."""

    async def before_locks(self) -> None:
        """Asynchronous work of name expansion, done before any lock is asked for."""

    def declare_locks(self) -> None:
        """Fill ``needed_locks`` and ``share_locks`` per level."""

    def declare_level(self, level: str) -> None:
        """Refine the locks of ``level`` once the previous levels are held."""

    async def check_prereq(self) -> None:
        """Check the cluster's state under the locks; raise OpPrereqError."""

    def prepare_retry(self) -> bool:
        """Get ready to run again after a temporary lack of resources
        (OpPrereqError with ECODE_TEMP_NORES): False when this unit cannot."""
        return False

    def build_hooks_env(self) -> dict[str, Any]:
        """The unit's hook variables, without the GANETI_ prefix."""
        return {}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        """Node uuids on which the pre and post hooks run."""
        return [], []

    @abstractmethod
    async def exec(self) -> Any:
        """Do the work; the result is the opcode's result."""

    def hooks_callback(self, phase: str, results: HookResults, result: Any) -> Any:
        """Fold post-hook results into the unit's result (cluster verify)."""
        return result

    # Names expanded before the locks, checked again under them
    def expand(self, cls: type[ObjT], name_or_uuid: str) -> ObjT:
        """The object the opcode names (by name or uuid), looked up before any
        lock is held: the processor checks, once the locks are held, that the
        name still belongs to that object (see :meth:`recheck_expanded`)."""
        obj = self.cfg.lookup(cls, name_or_uuid)
        self._expanded.append(_Expanded(cls, obj.name, obj.uuid))
        return obj

    def recheck_expanded(self) -> None:
        """Refuse to go on if an object named before the locks were taken was
        renamed, removed or replaced meanwhile.

        Locks are taken by name (instances) or uuid; a job queued behind a rename
        or a removal would otherwise act on whatever now carries the name it
        looked up, or on an object under a name it does not hold the lock of.
        """
        for entry in self._expanded:
            entry.check(self.cfg)

    async def checkpoint(self) -> None:
        """Commit what the unit changed so far and go on in a new transaction
        (an operation whose later steps need the first ones durable)."""
        if await self.tx.commit():
            self.checkpoint_changed = True
        self.tx = self.cfg.transaction()

    # Helpers for the units
    def feedback(self, message: str) -> None:
        self.ctx.feedback(message)

    def log_info(self, message: str) -> None:
        """Information for the user, in Ganeti's LogInfo form."""
        self.ctx.feedback(f" - INFO: {message}")

    def warn(self, message: str) -> None:
        """A warning for the user, in Ganeti's LogWarning form."""
        self.ctx.feedback(f" - WARNING: {message}")

    @property
    def master_node(self) -> Node:
        return self.cfg.master_node

    def node_addresses(self, uuids: list[str]) -> list[NodeAddress]:
        """The nodes that can be called (known, not offline), as RPC calls take them."""
        return node_addresses(self.master, uuids)

    def hooks(self) -> HooksMaster:
        """The runner of this unit's hooks."""
        spec = HookSpec(
            self.HPATH,
            self.HTYPE,
            self.op.OP_ID,
            self.build_hooks_env,
            self.build_hooks_nodes,
            self.warn,
            self.hooks_callback,
        )
        return HooksMaster(self.master, spec)


@dataclass(frozen=True)
class _Expanded:
    """An object a unit looked up by name before holding its lock."""

    cls: type[ConfigObject]
    name: str
    uuid: str

    def check(self, cfg: ConfigManager) -> None:
        kind = KIND_NAMES.get(self.cls.TABLE, self.cls.__name__)
        holder = cfg.find(self.cls, self.name)
        if holder is not None and holder.uuid == self.uuid:
            return
        if holder is not None:
            # Ganeti's words (ExpandInstanceUuidAndName and its kin).
            raise errors.OpPrereqError(
                f"The {kind.lower()}s UUID '{holder.uuid}' does not match the expected UUID"
                f" '{self.uuid}' for {kind.lower()} '{self.name}'. Maybe the {kind.lower()}"
                " changed since you submitted this job.",
                C.ECODE_NOTUNIQUE,
            )
        current = cfg.get(self.cls, self.uuid)
        why = f" (renamed to '{current.name}' after this job was submitted)" if current else ""
        raise errors.OpPrereqError(f"{kind} '{self.name}' not known{why}", C.ECODE_NOENT)


def lu_class(op_id: str) -> type[LogicalUnit[Any]] | None:
    return _LU_REGISTRY.get(op_id)
