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

OP_ID_KEY = "OP_ID"
REDACTED = "<redacted>"

_REGISTRY: dict[str, type[OpCode]] = {}


class OpCode(BaseModel):
    """Base of every opcode; carries Ganeti's common fields."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=False)

    OP_ID: ClassVar[str] = ""
    # Field shown in parentheses in the job summary, as Ganeti's OP_DSC_FIELD.
    OP_DSC_FIELD: ClassVar[str | None] = None
    # Fields never written to disk: stripped before the job is stored.
    SECRET_FIELDS: ClassVar[tuple[str, ...]] = ()
    # Fields stored but shown as <redacted>.
    PRIVATE_FIELDS: ClassVar[tuple[str, ...]] = ()

    dry_run: bool = False
    debug_level: int = Field(default=0, ge=0)
    priority: int = Field(default=C.OP_PRIO_NORMAL, ge=C.OP_PRIO_HIGHEST, le=C.OP_PRIO_LOWEST)
    depends: list[list[Any]] | None = None
    comment: str | None = None
    reason: list[list[Any]] = Field(default_factory=list)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.OP_ID:
            if cls.OP_ID in _REGISTRY:
                raise errors.ProgrammerError(f"Duplicate opcode {cls.OP_ID}")
            _REGISTRY[cls.OP_ID] = cls

    @field_validator("depends")
    @classmethod
    def _check_depends(cls, value: list[list[Any]] | None) -> list[list[Any]] | None:
        if value is None:
            return None
        for dep in value:
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
        return value

    @field_validator("reason")
    @classmethod
    def _check_reason(cls, value: list[list[Any]]) -> list[list[Any]]:
        for entry in value:
            if len(entry) != 3 or not isinstance(entry[0], str) or not isinstance(entry[1], str):
                raise ValueError(f"reason entries are [source, text, timestamp]; got {entry!r}")
        return value

    # Wire form
    def to_dict(self, *, redact_private: bool = False, keep_secret: bool = True) -> dict[str, Any]:
        """Ganeti's dict form; optionally without secrets or with private values hidden."""
        data: dict[str, Any] = {OP_ID_KEY: self.OP_ID}
        data.update(self.model_dump())
        if not keep_secret:
            for name in self.SECRET_FIELDS:
                if data.get(name):
                    data[name] = {key: REDACTED for key in data[name]}
        if redact_private:
            for name in self.PRIVATE_FIELDS:
                if data.get(name):
                    data[name] = {key: REDACTED for key in data[name]}
        return data

    def secret_values(self) -> list[str]:
        """The secret parameters' values (longest first), to scrub from any text."""
        values = {
            str(v) for name in self.SECRET_FIELDS for v in (getattr(self, name) or {}).values()
        }
        return sorted((v for v in values if v and v != REDACTED), key=len, reverse=True)

    def summary(self) -> str:
        """Ganeti's job summary: the OP_ID without ``OP_``, plus the described field."""
        name = self.OP_ID[3:] if self.OP_ID.startswith("OP_") else self.OP_ID
        if self.OP_DSC_FIELD:
            value = getattr(self, self.OP_DSC_FIELD, None)
            if value is not None:
                if isinstance(value, list):
                    value = ",".join(map(str, value))
                return f"{name}({value})"
        return name


def scrub(value: Any, secrets: list[str]) -> Any:
    """``value`` with every secret inside its strings replaced by ``<redacted>``.

    A script's output (a ``verify`` refusing a value, say) may quote a secret;
    what the job keeps, and so writes to disk, must not.
    """
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
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
    if cls is None:
        raise errors.OpCodeUnknown(f"Unknown opcode {op_id!r}")
    fields = {k: v for k, v in data.items() if k != OP_ID_KEY}
    try:
        return cls.model_validate(fields)
    except ValidationError as err:
        raise errors.OpPrereqError(
            f"Invalid {op_id}: {describe_validation_error(err)}", C.ECODE_INVAL
        ) from None


def describe_validation_error(err: ValidationError) -> str:
    """A compact one-line description of what pydantic rejected."""
    parts = []
    for item in err.errors():
        loc = ".".join(str(p) for p in item["loc"]) or "value"
        if item["type"] == "extra_forbidden":
            parts.append(f"unknown parameter '{loc}'")
        else:
            parts.append(f"parameter '{loc}': {item['msg']} (got {item.get('input')!r})")
    return "; ".join(parts)
