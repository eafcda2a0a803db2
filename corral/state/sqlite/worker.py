"""The thread that does a store's SQLite work, off the event loop.

One worker is one thread: the store's calls run one after the other, in
order, on the connections that thread owns, while the event loop goes on.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class Worker:
    """Runs blocking calls in one thread of its own, in the order they come."""

    def __init__(self, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(*args, **kwargs)`` in the worker's thread; its result."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def submit(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn`` in the worker's thread, waited for here (outside any event loop)."""
        return self._pool.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        """Finish what was asked, then end the thread."""
        self._pool.shutdown(wait=True)
