"""Error classes with Ganeti's names and error codes.

Errors cross process boundaries (luxi, job results) in Ganeti's encoding,
``[class_name, args]``, so clients re-create the same class on their side.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


class GenericError(Exception):
    """Base class for every Corral error."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.__class__.__name__

    @property
    def ecode(self) -> str | None:
        return None


class _CodedError(GenericError):
    """An error whose second argument is one of the ECODE_* values."""

    def __init__(self, msg: str = "", ecode: str | None = None) -> None:
        if ecode is None:
            super().__init__(msg)
        else:
            super().__init__(msg, ecode)

    @property
    def ecode(self) -> str | None:
        return self.args[1] if len(self.args) > 1 else None


class OpPrereqError(_CodedError):
    """The operation's prerequisites are not met; nothing was changed."""


class OpExecError(GenericError):
    """The operation failed while executing."""


class OpCodeUnknown(GenericError):
    """The opcode id is not known."""


class OpResultError(GenericError):
    """An opcode returned a result of the wrong shape."""


class ParameterError(GenericError):
    """A parameter is invalid."""


class TypeEnforcementError(GenericError):
    """A value has the wrong type."""


class UnitParseError(GenericError):
    """A size or time with a unit could not be parsed."""


class ResolverError(_CodedError):
    """A host name could not be resolved."""


class TagError(GenericError):
    """A tag is invalid, or there are too many."""


class HooksFailure(GenericError):
    """Hooks could not be run at all."""


class HooksAbort(HooksFailure):
    """A pre-phase hook failed, so the operation was aborted.

    Its only argument is a list of ``(node, script, output)`` tuples.
    """

    @property
    def message(self) -> str:
        parts = []
        for node, script, output in self.args[0] if self.args else []:
            line = f"  Node: {node}, Script: {script}"
            if output:
                line += ", Output: " + str(output).strip()
            parts.append(line)
        return "\n".join(parts)


class ConfigurationError(GenericError):
    """The configuration is inconsistent or could not be read."""


class ConfigVersionMismatch(ConfigurationError):
    """The configuration was written by an incompatible version."""


class ProgrammerError(GenericError):
    """An internal invariant was violated."""


class LockError(GenericError):
    """A lock could not be acquired."""


class PidFileLockError(LockError):
    """A daemon's pid file is held by a running process."""


class JobLost(GenericError):
    """The job is not in the queue (it never existed or was archived)."""


class JobQueueError(GenericError):
    """Generic job queue error."""


class JobQueueDrainError(JobQueueError):
    """The job queue is drained: no new jobs are accepted."""


class JobQueueFull(JobQueueError):
    """The job queue holds too many unfinished jobs."""


class LuxiError(GenericError):
    """Malformed luxi request or response."""


class ProtocolError(LuxiError):
    """An error in the luxi protocol."""


class RequestError(ProtocolError):
    """masterd could not take a request (Ganeti's answer carries only a message)."""


class NoMasterError(GenericError):
    """The master daemon cannot be reached."""


class QueryFilterParseError(ParameterError):
    """A query filter could not be parsed."""


class RemoteError(GenericError):
    """An error raised on the other end of a connection that we do not know."""


class CommandError(GenericError):
    """An external command failed."""


class X509CertError(GenericError):
    """An X509 certificate is invalid."""


class SignatureError(GenericError):
    """A signature does not verify."""


class NotClusterError(GenericError):
    """There is no cluster in this root."""


_CLASSES: dict[str, type[GenericError]] = {
    cls.__name__: cls
    for cls in (
        GenericError,
        OpPrereqError,
        OpExecError,
        OpCodeUnknown,
        OpResultError,
        ParameterError,
        TypeEnforcementError,
        UnitParseError,
        ResolverError,
        TagError,
        HooksFailure,
        HooksAbort,
        ConfigurationError,
        ConfigVersionMismatch,
        ProgrammerError,
        LockError,
        PidFileLockError,
        JobLost,
        JobQueueError,
        JobQueueDrainError,
        JobQueueFull,
        LuxiError,
        ProtocolError,
        RequestError,
        NoMasterError,
        QueryFilterParseError,
        RemoteError,
        CommandError,
        X509CertError,
        SignatureError,
        NotClusterError,
    )
}


def encode_exception(err: BaseException) -> list[Any]:
    """Ganeti's wire form of an error: ``[class_name, args]`` (a Corral-only
    subclass travels as the nearest class Ganeti knows)."""
    if isinstance(err, GenericError):
        name = next(cls.__name__ for cls in type(err).__mro__ if cls.__name__ in _CLASSES)
        return [name, list(err.args)]
    return [OpExecError.__name__, [f"{err.__class__.__name__}: {err}"]]


def decode_exception(data: Any) -> GenericError:
    """Re-create an error from its wire form; unknown names become RemoteError."""
    if not (isinstance(data, list | tuple) and len(data) == 2):
        return RemoteError(f"Unparsable error: {data!r}")
    name, args = data
    cls = _CLASSES.get(str(name))
    if not isinstance(args, list | tuple):
        args = [args]
    if cls is None:
        return RemoteError(f"{name}: {', '.join(map(str, args))}")
    return cls(*args)


# What a master candidate's masterd standing by answers (corral.master.standby),
# which corral-rapi on that node passes on as "not the master".
NOT_MASTER = "is not the master; the master node is"


def not_master(err: GenericError) -> bool:
    """Whether ``err`` is a standing-by masterd's answer: not the master."""
    return isinstance(err, OpPrereqError) and NOT_MASTER in err.message
