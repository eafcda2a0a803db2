"""Rate-limited logging: a flood of one message writes a few lines and a count."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.process.daemons import setup_logging
from corral.process.lograte import LOG_BURST, RateLimitFilter


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, ListHandler, Clock]]:
    handler, clock = ListHandler(), Clock()
    handler.addFilter(RateLimitFilter(handler, burst=3, interval=60.0, clock=clock))
    log = logging.getLogger("test.lograte")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    try:
        yield log, handler, clock
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)
        log.propagate = True


def test_first_ones_pass_then_one_summary_per_interval(
    logger: tuple[logging.Logger, ListHandler, Clock],
) -> None:
    log, handler, clock = logger
    for port in range(100):
        log.error("Cannot accept on port %d: too many open files", port)
    assert handler.lines == [
        f"ERROR Cannot accept on port {port}: too many open files" for port in range(3)
    ]
    clock.now += 61
    log.error("Cannot accept on port %d: too many open files", 7)
    assert handler.lines[3:] == [
        "ERROR Suppressed 97 similar messages in 60 s:"
        " Cannot accept on port %d: too many open files",
        "ERROR Cannot accept on port 7: too many open files",
    ]


def test_kinds_are_counted_apart_and_summarised_by_any_later_record(
    logger: tuple[logging.Logger, ListHandler, Clock],
) -> None:
    log, handler, clock = logger
    for _ in range(5):
        log.info("TLS handshake with %s failed", "10.0.0.1")
        log.warning("TLS handshake with %s failed", "10.0.0.1")  # another level
        log.info("Closed a connection from %s", "10.0.0.2")
    assert len(handler.lines) == 9
    clock.now += 61
    log.info("something else")
    assert sorted(handler.lines[9:]) == [
        "INFO Suppressed 2 similar messages in 60 s: Closed a connection from %s",
        "INFO Suppressed 2 similar messages in 60 s: TLS handshake with %s failed",
        "INFO something else",
        "WARNING Suppressed 2 similar messages in 60 s: TLS handshake with %s failed",
    ]
    # Nothing is summarised twice.
    clock.now += 61
    log.info("quiet")
    assert handler.lines[-1] == "INFO quiet"
    assert len(handler.lines) == 14


def test_daemon_log_stays_small_under_a_flood(tmp_path: Path) -> None:
    path = tmp_path / "corral-noded.log"
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        setup_logging(path, debug=False)
        log = logging.getLogger("corral.http.listener")
        for _ in range(50_000):
            log.error("Cannot accept a connection: %s", "Too many open files")
        for handler in root.handlers:
            handler.flush()
        lines = path.read_text().splitlines()
    finally:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert len(lines) == LOG_BURST
    assert all("Cannot accept a connection: Too many open files" in line for line in lines)
