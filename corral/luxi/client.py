"""Blocking luxi client used by the gnt-* commands (stdlib only)."""

from __future__ import annotations

import os
import socket

from corral import constants as C
from corral import errors
from corral.luxi import protocol

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


class Client:
    """One connection to masterd's luxi socket."""

    def __init__(self, address: str | os.PathLike[str], timeout: float | None = None) -> None:
        self._address = address
        self._timeout = timeout
        self._sock: socket.socket | None = None
        self._buffer = bytearray()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self._timeout)
            try:
                sock.connect(os.fspath(self._address))
            except OSError as err:
                sock.close()
                # The commands add Ganeti's "Is the process running..." line.
                raise errors.NoMasterError(
                    f"Cannot communicate with the master daemon at {self._address}:"
                    f" {err.strerror or err}."
                ) from None
            self._sock = sock
        return self._sock

    def connect(self) -> None:
        """Connect now (NoMasterError if nothing listens); calls use the connection."""
        self._connect()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, *args: Any) -> Any:
        """Send one request and return its result (or raise its error)."""
        sock = self._connect()
        try:
            sock.sendall(protocol.encode_request(method, list(args)))
            return protocol.parse_response(self._read_message(sock))
        except OSError as err:
            self.close()
            raise errors.NoMasterError(f"Lost connection to the master daemon: {err}") from None

    def _read_message(self, sock: socket.socket) -> bytes:
        while True:
            end = self._buffer.find(protocol.ETX)
            if end >= 0:
                data = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return data
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise OSError("connection closed by masterd")
            self._buffer += chunk

    # Typed wrappers for the methods the commands use.
    def submit_job(self, ops: list[dict[str, Any]]) -> int:
        return int(self.call("SubmitJob", ops))

    def submit_many_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[list[Any]]:
        return list(self.call("SubmitManyJobs", jobs))

    def wait_for_job_change(
        self,
        job_id: int,
        fields: list[str],
        prev_job_info: Any,
        prev_log_serial: int,
        timeout: float = C.LUXI_WFJC_TIMEOUT,
    ) -> Any:
        return self.call(
            "WaitForJobChange", job_id, fields, prev_job_info, prev_log_serial, timeout
        )

    def query_jobs(self, job_ids: list[int] | None, fields: list[str]) -> list[Any]:
        return list(self.call("QueryJobs", job_ids, fields))

    def query(self, what: str, fields: list[str], qfilter: Any = None) -> dict[str, Any]:
        return dict(self.call("Query", what, fields, qfilter))

    def query_fields(self, what: str, fields: list[str] | None = None) -> dict[str, Any]:
        return dict(self.call("QueryFields", what, fields))
