"""LoginThrottle: per-client back-off after failed logins, with a fake clock."""

from __future__ import annotations

import pytest

from corral.rapi.throttle import LoginThrottle


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_no_failures_no_delay(clock: FakeClock) -> None:
    throttle = LoginThrottle(clock=clock)
    assert throttle.delay("10.0.0.1") == 0.0
    throttle.succeeded("10.0.0.1")
    assert throttle.delay("10.0.0.1") == 0.0
    assert len(throttle) == 0


def test_delay_doubles_per_failure_up_to_the_cap(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=0.05, cap=1.0, clock=clock)
    delays = []
    for _ in range(8):
        throttle.failed("c")
        delays.append(throttle.delay("c"))
    assert delays == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_many_failures_stay_at_the_cap(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=0.05, cap=5.0, clock=clock)
    for _ in range(5000):  # 2**5000 would overflow a float
        throttle.failed("c")
    assert throttle.delay("c") == 5.0


def test_clients_are_separate(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=0.5, cap=10.0, clock=clock)
    for _ in range(3):
        throttle.failed("attacker")
    assert throttle.delay("attacker") == 2.0
    assert throttle.delay("someone-else") == 0.0


def test_success_clears(clock: FakeClock) -> None:
    throttle = LoginThrottle(clock=clock)
    throttle.failed("c")
    throttle.failed("c")
    throttle.succeeded("c")
    assert throttle.delay("c") == 0.0
    throttle.failed("c")
    assert throttle.delay("c") == 0.05  # counting starts again


def test_failures_forgotten_after_quiet_time(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=1.0, cap=100.0, forget_after=600.0, clock=clock)
    throttle.failed("c")
    throttle.failed("c")
    clock.now += 599.0
    assert throttle.delay("c") == 2.0  # still remembered
    throttle.failed("c")  # a new failure restarts the quiet time
    clock.now += 599.0
    assert throttle.delay("c") == 4.0
    clock.now += 1.0
    assert throttle.delay("c") == 0.0
    assert len(throttle) == 0
    throttle.failed("c")
    assert throttle.delay("c") == 1.0


def test_expired_clients_are_dropped_from_memory(clock: FakeClock) -> None:
    throttle = LoginThrottle(forget_after=10.0, clock=clock)
    for i in range(100):
        throttle.failed(f"old-{i}")
    clock.now += 10.0
    throttle.failed("new")
    assert len(throttle) == 1


def test_memory_bounded_oldest_forgotten(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=1.0, cap=100.0, clock=clock, max_clients=3)
    for name in ("a", "b", "c"):
        throttle.failed(name)
        clock.now += 1.0
    throttle.failed("a")  # "a" is now the most recent failure, "b" the oldest
    throttle.failed("d")
    assert len(throttle) == 3
    assert throttle.delay("b") == 0.0
    assert throttle.delay("a") == 2.0
    assert throttle.delay("c") == 1.0
    assert throttle.delay("d") == 1.0
    for i in range(1000):
        throttle.failed(f"flood-{i}")
    assert len(throttle) == 3


@pytest.mark.parametrize(
    "kwargs",
    [{"base": 0.0}, {"base": 2.0, "cap": 1.0}, {"forget_after": 0.0}, {"max_clients": 0}],
)
def test_bad_settings_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LoginThrottle(**kwargs)  # type: ignore[arg-type]
