"""Guessing RAPI passwords (issue 20): failed logins open windows of 300 s
here, per address and per user name; during a window one attempt waits and
the others are refused at once (429 with Retry-After), a login that already
succeeded from the address is checked at once, an address that did not fail
is always checked, and an empty password never logs in.

Each test uses addresses and users of its own: windows of one test never
touch another's.  An attempt left waiting out its window is abandoned by its
client (which closes the connection) at the end of the test.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.helpers.cluster import TestCluster, unique_loopback
from tests.helpers.rapi import Answer, Rapi, rapi_cluster
from tests.helpers.waiting import wait_until

WINDOW = 300
# An attempt left waiting gives up after this long (the test is over by then).
ABANDON_AFTER = 20


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    root = tmp_path_factory.mktemp("rapi-logins")
    with rapi_cluster(root, f"--login-delay {WINDOW} --max-login-delay {WINDOW}") as cluster:
        yield cluster


class _Attempts:
    """Requests sent at once from threads; the answers that came back."""

    def __init__(self, clients: list[Rapi], method: str = "PUT", path: str = "/2/tags?tag=x"):
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._send, args=(c, method, path), daemon=True)
            for c in clients
        ]
        for thread in self._threads:
            thread.start()

    def _send(self, client: Rapi, method: str, path: str) -> None:
        try:
            answer = client.request(method, path)
        except OSError:
            return  # abandoned while waiting out its window
        with self._lock:
            self.answers.append(answer)

    def count(self) -> int:
        with self._lock:
            return len(self.answers)

    def statuses(self) -> list[int]:
        with self._lock:
            return sorted(answer.status for answer in self.answers)


def _retry_after(answer: Answer) -> int:
    assert answer.status == 429, answer.body
    assert "Too many failed logins" in answer.json["message"]
    seconds = int(answer.headers["retry-after"])
    assert 1 <= seconds <= WINDOW
    return seconds


def test_attempts_beyond_the_waiting_one_are_refused_at_once(cl: TestCluster) -> None:
    """Issue 20: a correct login behind 20 wrong ones from one address waited
    104.5 s, queued behind them."""
    cl.add_rapi_user("guessed", "right", "write")
    attacker, other = unique_loopback(), unique_loopback()
    assert (
        Rapi(cl, "guessed", "wrong", source=attacker).request("PUT", "/2/tags?tag=x").status == 401
    )
    wrong = Rapi(cl, "guessed", "wrong", source=attacker, timeout=ABANDON_AFTER)
    guesses = _Attempts([wrong] * 20)
    # One waits out the window; the other 19 are answered without waiting.
    wait_until(lambda: guesses.count() == 19, 60, "19 refusals")
    for answer in guesses.answers:
        _retry_after(answer)
    # The right password from that address is refused at once too, not queued...
    _retry_after(Rapi(cl, "guessed", "right", source=attacker).request("PUT", "/2/tags?tag=x"))
    # ...and from another address it is checked at once.
    assert Rapi(cl, "guessed", "right", source=other).get("/2/info")["name"] == cl.cluster_name


def test_a_valid_login_does_not_end_the_window(cl: TestCluster) -> None:
    """Issue 20: a success reset the delay, so guesses alternated with a valid
    read-only login came at 14.3 a second."""
    cl.add_rapi_user("target", "t0p-secret", "write")
    cl.add_rapi_user("known", "kn0wn", "read")
    attacker = unique_loopback()
    known = Rapi(cl, "known", "kn0wn", source=attacker)
    assert known.get("/2/query/instance?fields=name")["data"] == []
    assert Rapi(cl, "target", "guess-1", source=attacker).request("GET", "/2/info").status == 401
    # The known login is checked at once, and ends nothing...
    assert known.get("/2/query/instance?fields=name")["data"] == []
    # ...so of the next two guesses one waits its window and one is refused.
    guess = Rapi(cl, "target", "guess-2", source=attacker, timeout=ABANDON_AFTER)
    guesses = _Attempts([guess, guess], "GET", "/2/info")
    wait_until(lambda: guesses.count() == 1, 60, "one refusal")
    _retry_after(guesses.answers[0])


def test_guesses_from_many_addresses_never_lock_the_user_out(cl: TestCluster) -> None:
    cl.add_rapi_user("popular", "mine", "write")
    for _ in range(5):
        guesser = Rapi(cl, "popular", "guess", source=unique_loopback())
        assert guesser.request("PUT", "/2/tags?tag=x").status == 401
    # The user's own address has not failed: checked at once, whatever the
    # window of the user name.
    owner = Rapi(cl, "popular", "mine", source=unique_loopback())
    assert owner.get("/2/info")["name"] == cl.cluster_name
    assert owner.request("PUT", "/2/tags?tag=popular&dry-run=1").status == 200


def test_an_empty_password_never_logs_in(cl: TestCluster) -> None:
    """Issue 20: ``{cleartext}`` with nothing after it let anyone in."""
    users = cl.paths.rapi_users_file
    with users.open("a") as out:
        out.write("unfinished {cleartext} write\n")
    answer = Rapi(cl, "unfinished", "", source=unique_loopback()).request("PUT", "/2/tags?tag=x")
    assert answer.status == 401, answer.body
