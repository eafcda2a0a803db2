"""Which connection corral-rapi's listener closes for a newcomer beyond its
bounds: the one that waited longest on its client, by class (unauthenticated
before authenticated, idle before active), once it has waited
``EVICTABLE_AFTER``.  Ages are set on real connections that have no socket."""

from __future__ import annotations

import asyncio

from corral.rapi.httpd.connection import HttpConnection, Phase
from corral.rapi.httpd.listener import Listener
from corral.rapi.httpd.messages import Request, Response
from corral.rapi.limits import EVICTABLE_AFTER, RapiLimits

OLD = EVICTABLE_AFTER + 1
YOUNG = EVICTABLE_AFTER / 2


class NoApplication:
    async def handle(self, request: Request) -> Response:
        raise AssertionError("no request is served here")

    def error(self, status: int, message: str) -> Response:
        raise AssertionError("no request is served here")


def choice(ages: dict[str, tuple[Phase, bool, float]]) -> str | None:
    """The name of the connection chosen among ``ages`` (name: phase,
    authenticated, seconds waited)."""

    async def scenario() -> str | None:
        listener = Listener(
            NoApplication(), "127.0.0.1", 0, tls=None, limits=RapiLimits(), max_body=1
        )
        now = asyncio.get_running_loop().time()
        names = {}
        for name, (phase, authenticated, waited) in ages.items():
            conn = HttpConnection(listener._settings, name)
            conn.phase, conn.authenticated, conn.waiting_since = phase, authenticated, now - waited
            listener.update(conn)
            names[conn] = name
        chosen = listener._oldest(EVICTABLE_AFTER)
        return None if chosen is None else names[chosen]

    return asyncio.run(scenario())


def test_an_idle_connection_goes_before_an_older_active_one() -> None:
    ages = {"sending": (Phase.HEAD, False, OLD + 5), "idle": (Phase.IDLE, False, OLD)}
    assert choice(ages) == "idle"


def test_an_active_connection_goes_when_no_idle_one_is_old_enough() -> None:
    ages = {"sending": (Phase.HEAD, False, OLD), "idle": (Phase.IDLE, False, YOUNG)}
    assert choice(ages) == "sending"


def test_a_connection_already_closing_goes_first_whatever_its_age() -> None:
    ages = {"idle": (Phase.IDLE, False, OLD), "closing": (Phase.CLOSING, False, YOUNG)}
    assert choice(ages) == "closing"


def test_unauthenticated_connections_go_before_authenticated_ones() -> None:
    ages = {"user": (Phase.IDLE, True, OLD + 5), "stranger": (Phase.HEAD, False, OLD)}
    assert choice(ages) == "stranger"


def test_a_burst_of_young_connections_waits() -> None:
    ages = {"a": (Phase.IDLE, False, YOUNG), "b": (Phase.HEAD, False, YOUNG)}
    assert choice(ages) is None
