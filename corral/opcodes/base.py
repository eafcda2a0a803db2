"""The opcode base class: wire form, validation, registry and summaries.

An opcode travels as Ganeti's JSON dict ``{"OP_ID": "OP_...", <field>: ...}``.
Each opcode class declares its fields once, with type and default; that
declaration validates luxi submissions, RAPI bodies and CLI input alike.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from corral import constants as C
from corral import errors
from corral.opcodes.types import NOT_BUILT_KEY, NonNegInt, SubmitPriority, same_value

OP_ID_KEY = "OP_ID"

_REGISTRY: dict[str, type[OpCode]] = {}


class OpCode(BaseModel):
    """Base of every opcode; carries Ganeti's common fields.

    Every field is Ganeti 3.0.2's, with its type and default; ``null`` means
    "not given" for any field that has a default (``from_dict``).
    """

    # NaN and infinities are not JSON (Ganeti's parsers refuse them).
    model_config = ConfigDict(strict=True, extra="forbid", frozen=False, allow_inf_nan=False)

    OP_ID: ClassVar[str] = ""
    # Field shown in parentheses in the job summary (Ganeti's opSummaryVal).
    OP_DSC_FIELD: ClassVar[str | None] = None
    # Fields never written to disk: stripped before the job is stored.
    SECRET_FIELDS: ClassVar[tuple[str, ...]] = ()
    # Fields stored but shown as <redacted>.
    PRIVATE_FIELDS: ClassVar[tuple[str, ...]] = ()
    # Fields Corral does not implement yet, with the values it accepts for them
    # (collected from the ``not_built`` declarations).
    NOT_BUILT: ClassVar[dict[str, list[Any]]] = {}

    dry_run: bool | None = None
    debug_level: NonNegInt | None = None
    priority: SubmitPriority = C.OP_PRIO_NORMAL
    depends: list[list[Any]] | None = None
    comment: str | None = None
    reason: list[list[Any]] = Field(default_factory=list)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.OP_ID:
            if cls.OP_ID in _REGISTRY:
                raise errors.ProgrammerError(f"Duplicate opcode {cls.OP_ID}")
            _REGISTRY[cls.OP_ID] = cls

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        not_built: dict[str, list[Any]] = {}
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra
            if isinstance(extra, dict) and NOT_BUILT_KEY in extra:
                not_built[name] = list(extra[NOT_BUILT_KEY])  # type: ignore[arg-type]
        cls.NOT_BUILT = not_built

    @field_validator("depends")
    @classmethod
    def _check_depends(cls, value: list[list[Any]] | None) -> list[list[Any]] | None:
        if value is None:
            return None
        checked = []
        for dep in value:
            # As Ganeti's TJobId: a job id may be a string of digits (RAPI hands
            # them out so); it is kept as the number.
            if len(dep) == 2 and isinstance(dep[0], str) and dep[0].isascii() and dep[0].isdigit():
                dep = [int(dep[0]), dep[1]]
            if (
                len(dep) != 2
                or not isinstance(dep[0], int)
                or isinstance(dep[0], bool)
                or not isinstance(dep[1], list)
                or not all(isinstance(s, str) and s in C.JOB_STATUS_FINALIZED for s in dep[1])
            ):
                raise ValueError(
                    "each dependency must be [job_id, [final statuses...]], "
                    f"statuses among {sorted(C.JOB_STATUS_FINALIZED)}; got {dep!r}"
                )
            checked.append(dep)
        return checked

    @field_validator("reason")
    @classmethod
    def _check_reason(cls, value: list[list[Any]]) -> list[list[Any]]:
        for entry in value:
            if len(entry) != 3 or not isinstance(entry[0], str) or not isinstance(entry[1], str):
                raise ValueError(f"reason entries are [source, text, timestamp]; got {entry!r}")
        return value

    def check_not_built(self) -> None:
        """Refuse a value asking for something Corral does not implement yet."""
        for name, accepted in self.NOT_BUILT.items():
            value = getattr(self, name)
            if value is not None and not any(same_value(value, ok) for ok in accepted):
                raise errors.OpPrereqError(
                    f"Parameter '{name}' of {self.OP_ID} is not supported by Corral yet;"
                    f" leave it unset (got {value!r})",
                    C.ECODE_INVAL,
                )

    # Wire form
    def to_dict(self, *, redact_private: bool = False, keep_secret: bool = True) -> dict[str, Any]:
        """Ganeti's dict form; optionally without secrets or with private values hidden."""
        data: dict[str, Any] = {OP_ID_KEY: self.OP_ID}
        # As luxid stores opcodes: fields without a value are left out, but
        # for ``depends`` and ``comment``, always there (null when unset).
        data.update(self.model_dump(exclude_none=True))
        data.setdefault("depends", None)
        data.setdefault("comment", None)
        if not keep_secret:
            for name in self.SECRET_FIELDS:
                if data.get(name):
                    data[name] = {key: C.REDACTED for key in data[name]}
        if redact_private:
            for name in self.PRIVATE_FIELDS:
                if data.get(name):
                    data[name] = {key: C.REDACTED for key in data[name]}
        return data

    def secret_values(self) -> list[str]:
        """The secret parameters' values (longest first), to scrub from any text."""
        values = {
            str(v) for name in self.SECRET_FIELDS for v in (getattr(self, name) or {}).values()
        }
        return sorted((v for v in values if v and v != C.REDACTED), key=len, reverse=True)

    def hidden_values(self) -> list[str]:
        """The secret and private values (longest first): what a script or an
        error may print must show neither (private values nest per OS)."""
        values: set[str] = set(self.secret_values())
        for name in self.PRIVATE_FIELDS:
            values.update(_leaves(getattr(self, name)))
        return sorted((v for v in values if v and v != C.REDACTED), key=len, reverse=True)

    def summary_value(self) -> str | None:
        """The text in parentheses of the job summary, if any."""
        if self.OP_DSC_FIELD:
            value = getattr(self, self.OP_DSC_FIELD, None)
            if value is not None:
                return ",".join(map(str, value)) if isinstance(value, list) else str(value)
        return None

    def summary(self) -> str:
        """luxid's job summary: the OP_ID without ``OP_``, plus the described value."""
        name = self.OP_ID[3:] if self.OP_ID.startswith("OP_") else self.OP_ID
        value = self.summary_value()
        return name if value is None else f"{name}({value})"


def _leaves(value: Any) -> list[str]:
    """The scalar values inside nested dicts, as text."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [] if value is None else [str(value)]


def scrub(value: Any, secrets: list[str]) -> Any:
    """``value`` with every secret inside its strings replaced by ``<redacted>``.

    A script's output (a ``verify`` refusing a value, say) may quote a secret;
    what the job keeps, and so writes to disk, must not.
    """
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, C.REDACTED)
        return value
    if isinstance(value, list | tuple):
        return [scrub(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: scrub(item, secrets) for key, item in value.items()}
    return value


def registry() -> dict[str, type[OpCode]]:
    """All opcode classes by OP_ID."""
    return _REGISTRY


def from_dict(data: Any) -> OpCode:
    """Validate a wire dict into an opcode, with a one-line error on bad input."""
    if not isinstance(data, dict):
        raise errors.OpPrereqError(
            f"An opcode must be a JSON object with OP_ID, got {type(data).__name__}",
            C.ECODE_INVAL,
        )
    op_id = data.get(OP_ID_KEY)
    cls = _REGISTRY.get(op_id) if isinstance(op_id, str) else None
    if cls is None or not isinstance(op_id, str):
        raise errors.OpCodeUnknown(f"Unknown opcode {op_id!r}")
    try:
        op = cls.model_validate(_given_fields(cls, op_id, data))
    except ValidationError as err:
        raise errors.OpPrereqError(
            f"Invalid {op_id}: {describe_validation_error(err)}", C.ECODE_INVAL
        ) from None
    op.check_not_built()
    return op


def _given_fields(cls: type[OpCode], op_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``data`` that carry a value: null means "not given" (as in
    Ganeti, whose luxid reads a null optional field as a missing one), except
    for a required field, where it is an error."""
    given: dict[str, Any] = {}
    for key, value in data.items():
        if key == OP_ID_KEY:
            continue
        if value is None:
            info = cls.model_fields.get(key)
            if info is not None:
                if info.is_required():
                    raise errors.OpPrereqError(
                        f"Invalid {op_id}: parameter '{key}' is required, got null", C.ECODE_INVAL
                    )
                continue
        given[key] = value
    return given


def describe_validation_error(err: ValidationError) -> str:
    """A compact one-line description of what pydantic rejected."""
    parts = []
    for item in err.errors():
        loc = ".".join(str(p) for p in item["loc"]) or "value"
        if item["type"] == "extra_forbidden":
            parts.append(f"unknown parameter '{loc}'")
        elif item["type"] == "missing":
            parts.append(f"parameter '{loc}' is required")
        else:
            parts.append(f"parameter '{loc}': {item['msg']} (got {item.get('input')!r})")
    return "; ".join(parts)
