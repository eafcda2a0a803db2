"""RAPI errors: an HTTP status with Ganeti's JSON body ``{code, message, explain}``."""

from __future__ import annotations

import html
from http import HTTPStatus

from corral import errors
from corral.luxi import protocol


class HttpError(Exception):
    """An answer other than success; ``message`` defaults to the status's phrase."""

    def __init__(
        self, status: int, message: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message or HTTPStatus(status).phrase)
        self.status = status
        self.message = message
        self.headers = headers or {}

    def body(self) -> bytes:
        """The JSON body Ganeti's RAPI sends with an error (its message HTML-escaped)."""
        phrase = HTTPStatus(self.status)
        return protocol.dumps(
            {
                "code": self.status,
                "message": html.escape(self.message or phrase.phrase),
                "explain": phrase.description,
            }
        )


def bad_request(message: str) -> HttpError:
    return HttpError(400, message)


def not_found(message: str | None = None) -> HttpError:
    return HttpError(404, message)


def from_luxi(err: errors.GenericError) -> HttpError:
    """The answer for an error from masterd, with Ganeti's statuses.

    Ganeti's RAPI answers 502 when masterd cannot be reached (as here when
    this node's masterd stands by: its message names the master), 504 on a time-out,
    503 for a full or drained queue and 500 for any other error, whose text it
    passes on (an unknown name in an item's resource is a 404: see handlers).
    """
    if isinstance(err, errors.NoMasterError):
        return HttpError(502, f"Can't connect to master daemon: {err.message}")
    if errors.not_master(err):
        # This node's masterd stands by: the master IP reaches the master.
        return HttpError(502, err.message)
    if isinstance(err, errors.JobQueueFull):
        return HttpError(503, "Job queue is full, needs archiving")
    if isinstance(err, errors.JobQueueDrainError):
        return HttpError(503, "Job queue is drained, cannot submit")
    if isinstance(err, errors.ProtocolError):
        return HttpError(502, err.message)
    return HttpError(500, _ganeti_text(err))


def _ganeti_text(err: errors.GenericError) -> str:
    """The text Ganeti's RAPI shows for an error: Python's ``str`` of it, so
    ``('message', 'error_code')`` for one with an error code."""
    return str(err.args) if len(err.args) > 1 else err.message
