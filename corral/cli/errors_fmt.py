"""Ganeti's texts and exit codes for errors shown by the commands."""

from __future__ import annotations

from corral import constants as C
from corral import errors


class JobSubmitted(Exception):
    """--submit: the job is queued; print its id and leave with success."""

    def __init__(self, job_id: int) -> None:
        super().__init__(job_id)
        self.job_id = job_id


class UsageError(Exception):
    """Wrong command-line arguments."""


class ConfirmationDeclined(Exception):
    """The user answered no."""


def format_error(err: BaseException) -> tuple[int, str]:
    """``(exit code, message)`` for an error, as Ganeti's FormatError."""
    rc = C.EXIT_FAILURE
    if isinstance(err, JobSubmitted):
        return C.EXIT_SUCCESS, f"JobID: {err.job_id}"
    if isinstance(err, UsageError):
        return rc, f"Error: {err}"
    if isinstance(err, ConfirmationDeclined):
        return C.EXIT_CONFIRMATION, "Aborted."
    if isinstance(err, errors.NotClusterError):
        return C.EXIT_NOTCLUSTER, f"Error: {err.message}"
    if isinstance(err, errors.ConfigurationError):
        return 2, f"Corrupt configuration file: {err.message}\nAborting."
    if isinstance(err, errors.HooksAbort):
        lines = ["Failure: hooks execution failed:"]
        for node, script, output in err.args[0] if err.args else []:
            if output:
                lines.append(f"  node: {node}, script: {script}, output: {str(output).strip()}")
            else:
                lines.append(f"  node: {node}, script: {script} (no output)")
        return rc, "\n".join(lines)
    if isinstance(err, errors.HooksFailure):
        return rc, f"Failure: hooks general failure: {err.message}"
    if isinstance(err, errors.ResolverError):
        return rc, f"Failure: can't resolve hostname '{err.message}'"
    if isinstance(err, errors.OpPrereqError):
        if err.ecode:
            return rc, (
                "Failure: prerequisites not met for this operation:\n"
                f"error type: {err.ecode}, error details:\n{err.message}"
            )
        return rc, f"Failure: prerequisites not met for this operation:\n{err.message}"
    if isinstance(err, errors.OpExecError):
        return rc, f"Failure: command execution error:\n{err.message}"
    if isinstance(err, errors.TagError):
        return rc, f"Failure: invalid tag(s) given:\n{err.message}"
    if isinstance(err, errors.JobQueueDrainError):
        return rc, ("Failure: the job queue is marked for drain and doesn't accept new requests")
    if isinstance(err, errors.JobQueueFull):
        return rc, (
            "Failure: the job queue is full and doesn't accept new job submissions until"
            " old jobs are archived"
        )
    if isinstance(err, errors.TypeEnforcementError):
        return rc, f"Parameter Error: {err.message}"
    if isinstance(err, errors.ParameterError) and not isinstance(err, errors.QueryFilterParseError):
        return rc, f"Failure: unknown/wrong parameter name '{err.message}'"
    if isinstance(err, errors.NoMasterError):
        return rc, f"{err.message}\nIs the process running and listening for connections?"
    if isinstance(err, errors.JobLost):
        return rc, f"Error checking job status: {err.message}"
    if isinstance(err, errors.QueryFilterParseError):
        return rc, f"Error while parsing query filter: {err.message}"
    if isinstance(err, errors.LuxiError):
        return rc, f"Unhandled protocol error while talking to the master daemon:\n{err.message}"
    if isinstance(err, errors.GenericError):
        return rc, f"Unhandled Ganeti error: {err.message}"
    return rc, f"Unhandled exception: {err}"
