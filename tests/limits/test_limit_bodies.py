# Request bodies (issue 20, item 5): what the server holds of bodies still arriving is bounded
# server-wide, and a body has a deadline, on both HTTP servers. Clients here declare large
# bodies, send part of them and stop; a neighbour session keeps pinging meanwhile.
from __future__ import annotations

import contextlib
import json
import logging
import resource
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from support.attack import NEIGHBOUR_P99, neighbour_pinging, server_log_size
from support.client import open_session
from support.fixtures import StartServer, wait_until

from trio_mcp import ServerConfig

pytestmark = pytest.mark.usefixtures("no_server_errors")

MiB = 1024 * 1024


@asynccontextmanager
async def partial_post(
    port: int, declared: int, send: int, path: str = "/mcp"
) -> AsyncIterator[trio.SocketStream]:
    """A POST that declares ``declared`` bytes of body and sends only ``send`` of them."""
    sock = await trio.open_tcp_stream("127.0.0.1", port)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
        f"content-length: {declared}\r\n\r\n"
    ).encode("latin-1")
    try:
        piece = b" " * 65536
        left = send
        # The server may answer and close before all of it is sent (that is the point).
        with contextlib.suppress(trio.BrokenResourceError):
            await sock.send_all(head)
            while left > 0:
                await sock.send_all(piece[: min(left, len(piece))])
                left -= min(left, len(piece))
        yield sock
    finally:
        with trio.CancelScope(shield=True):
            await sock.aclose()


async def read_status(sock: trio.SocketStream) -> tuple[int, bytes]:
    """The status of the response on ``sock`` and what followed it, up to its close."""
    got = bytearray()
    while True:
        try:
            data = await sock.receive_some(65536)
        except trio.BrokenResourceError:
            break
        if not data:
            break
        got += data
    status = int(bytes(got).split(b" ", 2)[1]) if got else 0
    return status, bytes(got)


@pytest.mark.spec("TM-SEC-BODIES")
async def test_a_body_past_the_server_wide_budget_gets_503_and_the_budget_comes_back(
    live_server: StartServer,
) -> None:
    """With three bodies of 300 KB still arriving and a budget of 1 MiB, a fourth gets 503
    with Retry-After and a JSON-RPC error; a small request still gets through; once the
    clients leave, nothing is held."""
    config = ServerConfig(max_body_memory=MiB, max_body_bytes=4 * MiB)
    live = await live_server(config=config)
    session = await open_session(live.url)
    budget = live.app.runtime.bodies
    with trio.fail_after(30):
        async with partial_post(live.port, 2 * MiB, 300_000), partial_post(
            live.port, 2 * MiB, 300_000
        ), partial_post(live.port, 2 * MiB, 300_000):
            await wait_until(lambda: budget.held >= 900_000)
            async with partial_post(live.port, 2 * MiB, 300_000) as fourth:
                status, raw = await read_status(fourth)
            assert 503 == status, raw[:300]
            head, _, body = raw.partition(b"\r\n\r\n")
            assert b"retry-after: 1" in head.lower()
            assert -31002 == json.loads(body)["error"]["code"]
            assert {} == await session.result("ping")
        await wait_until(lambda: budget.held == 0)
    assert 1 <= live.stats()["bodies_refused"]


@pytest.mark.spec("TM-SEC-BODIES")
async def test_a_body_that_stops_arriving_gets_408_after_the_body_deadline(
    live_server: StartServer,
) -> None:
    """A client that declares a body and stops sending it gets 408 once http_body_timeout
    has passed, on either HTTP server, and what it sent is released."""
    live = await live_server(config=ServerConfig(http_body_timeout=1.0))
    budget = live.app.runtime.bodies
    with trio.fail_after(20):
        async with partial_post(live.port, MiB, 100_000) as sock:
            status, _raw = await read_status(sock)
    assert 408 == status
    assert 0 == budget.held
    assert 1 == live.stats()["bodies_timed_out"]


@pytest.mark.slow
@pytest.mark.spec("TM-SEC-BODIES")
async def test_many_slow_bodies_hold_no_more_than_the_budget_and_leave_the_neighbour_served(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Forty connections each declaring 4 MiB and sending 3 MiB of it (120 MiB in all)
    against the default 64 MiB budget: the ones past it get 503, the process grows by
    less than the budget and 32 MiB, the log stays a few lines, and a neighbour's pings
    keep a p99 within 250 ms (NEIGHBOUR_P99)."""
    live = await live_server()
    neighbour_session = await open_session(live.url)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    statuses: list[int] = []
    with caplog.at_level(logging.INFO, logger="trio_mcp"), trio.fail_after(120):
        async with neighbour_pinging(neighbour_session) as neighbour:

            async def attacker() -> None:
                async with partial_post(live.port, 4 * MiB, 3 * MiB) as sock:
                    with trio.move_on_after(3) as cs:
                        status, _ = await read_status(sock)
                        statuses.append(status)
                    if cs.cancelled_caught:
                        statuses.append(0)  # still held, waiting for the rest

            async with trio.open_nursery() as nursery:
                for _ in range(40):
                    nursery.start_soon(attacker)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before

    assert statuses.count(503) >= 15, statuses
    assert [] == neighbour.failures
    assert neighbour.p99() < NEIGHBOUR_P99, str(neighbour)
    assert grown_kib < (64 + 32) * 1024, grown_kib
    logged = server_log_size(caplog)
    assert logged.records < 20 and logged.chars < 20_000, logged


@pytest.mark.spec("TM-SEC-BODIES")
async def test_a_declared_length_over_the_limit_gets_413_before_any_of_the_body(
    live_server: StartServer,
) -> None:
    """A POST declaring a body over max_body_bytes, of which it sends nothing, gets 413 at
    once on either HTTP server: the server does not wait for a body it would refuse, and
    nothing is taken from the budget."""
    live = await live_server(config=ServerConfig(max_body_bytes=1000))
    with trio.fail_after(20):
        async with partial_post(live.port, 10_000, 0) as sock:
            status, _raw = await read_status(sock)
    assert 413 == status
    assert 0 == live.app.runtime.bodies.held
