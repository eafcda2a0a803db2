"""Run code inside a network namespace of the test's own, without a subprocess.

A :class:`NamespaceThread` makes a namespace (random name) and one worker
thread that entered it (``setns`` changes only the calling thread): netlink
sockets, /dev/net/tun and /proc/sys/net used from that thread all belong to
the namespace, and so do the processes it starts.  Nothing touches the host's
interfaces.  The namespace (and every device in it) is removed on exit, also
after a failure.

Typical use::

    with NamespaceThread() as ns:
        ns.call(netdev.create_tap, "ct0")
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import ParamSpec, TypeVar

from pyroute2 import netns  # type: ignore[import-untyped]

P = ParamSpec("P")
R = TypeVar("R")


class NamespaceThread:
    """A fresh network namespace and a thread that lives in it."""

    def __init__(self) -> None:
        self.name = f"crl{secrets.token_hex(3)}nt"
        self._pool: ThreadPoolExecutor | None = None

    def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(*args, **kwargs)`` run in the namespace; its result or exception."""
        if self._pool is None:
            raise RuntimeError("The namespace is not set up (use it in a with block)")
        return self._pool.submit(fn, *args, **kwargs).result()

    def __enter__(self) -> NamespaceThread:
        netns.create(self.name)
        try:
            # flags=0: enter the namespace made above, never create another.
            self._pool = ThreadPoolExecutor(1, initializer=netns.setns, initargs=(self.name, 0))
            self.call(lambda: None)  # the thread exists and entered it
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the thread and remove the namespace with all its devices."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        with contextlib.suppress(OSError):
            netns.remove(self.name)
