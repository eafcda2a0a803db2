"""LoginThrottle: windows after failed logins, per address and per user name,
with a fake clock."""

from __future__ import annotations

import pytest

from corral.rapi.throttle import LoginThrottle

GOOD = "Basic good"
BAD = "Basic bad"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_no_failures_no_wait(clock: FakeClock) -> None:
    throttle = LoginThrottle(clock=clock)
    assert throttle.wait("10.0.0.1", "alice", GOOD) == 0.0
    throttle.succeeded("10.0.0.1", GOOD)
    assert throttle.wait("10.0.0.1", "alice", GOOD) == 0.0


def test_window_doubles_per_failure_up_to_the_cap(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=0.05, cap=1.0, clock=clock)
    waits = []
    for _ in range(8):
        throttle.failed("c", "alice", BAD)
        waits.append(throttle.wait("c", "alice", BAD))
    assert waits == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_the_window_runs_down_with_time(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=4.0, cap=100.0, clock=clock)
    throttle.failed("c", "alice", BAD)
    clock.now += 1.5
    assert throttle.wait("c", "alice", BAD) == pytest.approx(2.5)
    clock.now += 2.5
    assert throttle.wait("c", "alice", BAD) == 0.0


def test_many_failures_stay_at_the_cap(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=0.05, cap=5.0, clock=clock)
    for _ in range(5000):  # 2**5000 would overflow a float
        throttle.failed("c", "alice", BAD)
    assert throttle.wait("c", "alice", BAD) == 5.0


def test_addresses_are_separate(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=0.5, cap=10.0, clock=clock)
    for _ in range(3):
        throttle.failed("attacker", "alice", BAD)
    assert throttle.wait("attacker", "bob", BAD) == 2.0
    assert throttle.wait("someone-else", "bob", BAD) == 0.0


def test_a_success_does_not_shorten_the_window(clock: FakeClock) -> None:
    """Issue 20: a success reset the delay, so guesses alternated with a known
    read-only login ran at full speed."""
    throttle = LoginThrottle(base=1.0, cap=100.0, clock=clock)
    throttle.succeeded("c", "Basic reader")
    for failures in range(1, 6):
        throttle.failed("c", "writer", BAD)
        throttle.succeeded("c", "Basic reader")
        assert throttle.wait("c", "writer", "Basic guess") == 2.0 ** (failures - 1)


def test_credentials_that_succeeded_from_the_address_are_checked_at_once(
    clock: FakeClock,
) -> None:
    throttle = LoginThrottle(base=10.0, cap=100.0, clock=clock)
    throttle.succeeded("c", GOOD)
    throttle.failed("c", "alice", BAD)
    assert throttle.wait("c", "alice", GOOD) == 0.0
    assert throttle.wait("c", "alice", BAD) == 10.0
    # ...from that address only, and no longer once they failed.
    throttle.failed("d", "bob", BAD)
    assert throttle.wait("d", "alice", GOOD) == 10.0
    throttle.failed("c", "alice", GOOD)
    assert throttle.wait("c", "alice", GOOD) == 20.0


def test_a_user_name_window_holds_only_addresses_that_failed(clock: FakeClock) -> None:
    """Guesses for alice from many addresses slow down guessing addresses but
    never alice's own login from a clean address."""
    throttle = LoginThrottle(base=1.0, cap=1000.0, clock=clock)
    for i in range(8):
        throttle.failed(f"10.0.0.{i}", "alice", BAD)
    assert throttle.wait("10.0.0.0", "alice", BAD) == 128.0  # alice's 8th failure
    assert throttle.wait("10.0.0.0", "bob", BAD) == 1.0  # that address's own window
    assert throttle.wait("192.168.1.1", "alice", GOOD) == 0.0  # a clean address


def test_failures_forgotten_after_quiet_time(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=100.0, cap=1000.0, forget_after=600.0, clock=clock)
    throttle.succeeded("c", GOOD)
    throttle.failed("c", "alice", BAD)
    throttle.failed("c", "alice", BAD)
    clock.now += 199.0
    assert throttle.wait("c", "alice", BAD) == 1.0  # still remembered
    throttle.failed("c", "alice", BAD)  # a new failure restarts the quiet time
    clock.now += 599.0
    assert throttle.wait("c", "alice", BAD) == 0.0  # the window is over...
    throttle.failed("c", "alice", BAD)
    assert throttle.wait("c", "alice", BAD) == 800.0  # ...but the count was kept
    clock.now += 600.0
    assert throttle.wait("c", "alice", BAD) == 0.0
    assert len(throttle) == 0  # the known credentials too
    throttle.failed("c", "alice", BAD)
    assert throttle.wait("c", "alice", BAD) == 100.0


def test_memory_bounded_oldest_forgotten(clock: FakeClock) -> None:
    throttle = LoginThrottle(base=1.0, cap=100.0, clock=clock, max_entries=3)
    for name in ("a", "b", "c"):
        throttle.failed(name, "u", BAD)
        clock.now += 0.001
    throttle.failed("a", "u", BAD)  # "a" is now the most recent failure, "b" the oldest
    throttle.failed("d", "u", BAD)
    assert throttle.wait("b", "nobody", BAD) == 0.0
    assert throttle.wait("a", "nobody", BAD) == pytest.approx(2.0, abs=0.01)
    assert throttle.wait("c", "nobody", BAD) == pytest.approx(1.0, abs=0.01)
    for i in range(1000):
        throttle.failed(f"flood-{i}", f"user-{i}", f"Basic {i}")
        throttle.succeeded(f"flood-{i}", f"Basic {i}")
    assert len(throttle) == 9  # three of each kind


@pytest.mark.parametrize(
    "kwargs",
    [{"base": 0.0}, {"base": 2.0, "cap": 1.0}, {"forget_after": 0.0}, {"max_entries": 0}],
)
def test_bad_settings_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LoginThrottle(**kwargs)  # type: ignore[arg-type]
