"""Waiting for a condition with a deadline (never for a fixed duration)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, what: str = "") -> None:
    """Poll ``predicate`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what or predicate}"
        time.sleep(0.02)


async def wait_until_async(
    predicate: Callable[[], object], timeout: float = 5.0, what: str = ""
) -> None:
    """:func:`wait_until` inside an event loop: it keeps running while we poll."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"timed out waiting for {what or predicate}"
        await asyncio.sleep(0.002)


async def poll_async(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    timeout: float = 5.0,
    what: str = "",
    interval: float = 0.1,
) -> T:
    """Await ``probe`` until ``done`` accepts what it gives; that (fail after
    ``timeout`` seconds, saying what it gave last)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done(value := await probe()):
        assert loop.time() < deadline, f"timed out waiting for {what or probe}: last {value!r}"
        await asyncio.sleep(interval)
    return value
