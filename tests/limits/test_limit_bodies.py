# Request bodies (issue 20, item 5): what the server holds of bodies still arriving is bounded
# server-wide, and a body has a deadline, on both HTTP servers. Clients here declare large
# bodies, send part of them and stop; a neighbour session keeps pinging meanwhile.
from __future__ import annotations

import contextlib
import functools
import json
import logging
import resource
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import attrs
import pytest
import trio
import trio.lowlevel
from support.attack import NEIGHBOUR_P99, neighbour_pinging, server_log_size
from support.client import (
    dumps,
    initialize_params,
    open_session,
    post_headers,
    request,
    rpc_request,
)
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


#: The attacker's and the neighbour's addresses (TM-SEC-UNIT: two clients on loopback).
ATTACKER: Final = "127.0.0.2"
NEIGHBOUR: Final = "127.0.0.3"


@attrs.define
class HeldBody:
    """One of the attacker's connections: a body declared, most of it sent, the rest held
    back; what the server answered, and whether it then closed the connection."""

    status: int = 0
    retry_after: str | None = None
    code: int | None = None
    closed: bool = False
    ended: trio.Event = attrs.field(factory=trio.Event)


async def hold_a_body(
    port: int, declared: int, send: int, held: HeldBody, hold_for: float,
    *, local: str = ATTACKER, forwarded_for: str | None = None,
) -> None:
    """From ``local``: declare ``declared`` bytes, send ``send`` of them in 64 KiB pieces,
    then send nothing more for ``hold_for`` seconds (within the body deadline), reading
    whatever the server answers; ``held`` records it."""
    sock = await trio.open_tcp_stream("127.0.0.1", port, local_address=local)
    forwarded = f"x-forwarded-for: {forwarded_for}\r\n" if forwarded_for else ""
    head = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
        f"{forwarded}content-length: {declared}\r\n\r\n"
    ).encode("latin-1")
    try:
        got = bytearray()

        async def read() -> None:
            with contextlib.suppress(trio.BrokenResourceError):
                while data := await sock.receive_some(65536):
                    got.extend(data)
                    if not held.status and b"\r\n\r\n" in got:
                        status, headers = h11_head(bytes(got).partition(b"\r\n\r\n")[0])
                        held.status, held.retry_after = status, headers.get("retry-after")
            with contextlib.suppress(ValueError, KeyError, TypeError):
                held.code = json.loads(bytes(got).partition(b"\r\n\r\n")[2])["error"]["code"]
            held.closed = True  # the server's end (or its reset)
            held.ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await sock.send_all(head)
                piece = b" " * 65536
                left = send
                while left > 0 and not held.closed:
                    await sock.send_all(piece[: min(left, len(piece))])
                    left -= min(left, len(piece))
            with trio.move_on_after(hold_for):
                await held.ended.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await sock.aclose()


def h11_head(raw: bytes) -> tuple[int, dict[str, str]]:
    """A response head's status and headers (names lower-cased)."""
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def neighbour_session(
    url: str, local: str = NEIGHBOUR, extra: list[tuple[str, str]] | None = None
) -> str:
    """A session of the neighbour's (from ``local``, with ``extra`` headers), initialized
    before the attack: its id."""
    response = await request(
        url, "POST", post_headers(extra=extra or ()),
        dumps(rpc_request("initialize", initialize_params())), local=local,
    )
    assert 200 == response.status, response.body[:300]
    session_id = response.header("mcp-session-id")
    assert session_id is not None
    ack = await request(
        url, "POST", post_headers(session_id=session_id, extra=extra or ()),
        dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), local=local,
    )
    assert 202 == ack.status
    return session_id


@pytest.mark.slow
@pytest.mark.spec("TM-SEC-BODIES", "TM-SEC-FAIR")
async def test_one_address_holding_the_bodies_budget_locks_out_no_other_address(
    live_server: StartServer,
) -> None:
    """One address keeps the bodies' budget (64 MiB) full: 16 connections, and a new one
    for each the server closes (at most 40 in all), each declaring a 4 MiB body, sending all
    of it but a byte, then holding that back (within the 30 s body deadline). Meanwhile
    a neighbour at another address makes eight tools/call with a 256 KB argument, one after
    the other: every one is answered 200. The room each took came from the attacker: some of
    its bodies were refused 503 with Retry-After and -31002, and their connections closed;
    the bytes held never passed the budget."""
    live = await live_server()
    capacity = live.app.config.max_body_memory
    declared = live.app.config.max_body_bytes
    bodies = live.app.runtime.bodies
    sid = await neighbour_session(live.url)
    attackers: list[HeldBody] = []
    statuses: list[int] = []
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, bodies.held)
            await trio.lowlevel.checkpoint()

    async def attack(nursery: trio.Nursery) -> None:
        running = trio.Semaphore(16)
        while len(attackers) < 40:
            await running.acquire()
            held = HeldBody()
            attackers.append(held)

            async def one(held: HeldBody = held) -> None:
                try:
                    await hold_a_body(live.port, declared, declared - 1, held, 25)
                finally:
                    running.release()

            nursery.start_soon(one)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            nursery.start_soon(attack, nursery)
            # The attack has filled the budget: its bodies hold all but less than a piece.
            await wait_until(lambda: bodies.held >= capacity - 16, poll=0.01)
            full_at = bodies.held
            for _ in range(8):
                call = rpc_request(
                    "tools/call", {"name": "echo", "arguments": {"text": "n" * 256_000}}
                )
                response = await request(
                    live.url, "POST", post_headers(session_id=sid), dumps(call), local=NEIGHBOUR
                )
                statuses.append(response.status)
                assert 200 == response.status, response.body[:300]
            # Each body refused is closed: at once on the own server (after its answer, a
            # half-close), after a second without bytes under hypercorn (TM-HTTP-LINGER).
            await wait_until(lambda: all(a.closed for a in attackers if a.status), poll=0.01)
            nursery.cancel_scope.cancel()
    stats = live.stats()
    assert full_at >= capacity - 16
    assert [200] * 8 == statuses
    assert peak <= capacity, peak
    evicted = [a for a in attackers if a.status == 503]
    assert evicted, attackers
    for attacker in evicted:
        assert ("1", -31002, True) == (
            attacker.retry_after, attacker.code, attacker.closed
        ), attacker
    # Every 503 was the attacker's: a body taken for the neighbour's, or one refused
    # because the attacker held the most of a full pool.
    assert 1 <= stats["bodies_evicted"], stats
    assert len(evicted) == stats["bodies_evicted"] + stats["bodies_refused"], stats
    await wait_until(lambda: bodies.held == 0)


@pytest.mark.spec("TM-SEC-BODIES", "TM-SEC-UNIT")
async def test_behind_a_trusted_proxy_bodies_are_counted_by_the_forwarded_client(
    live_server: StartServer,
) -> None:
    """Behind a trusted proxy (127.0.0.2) every client comes from one address: its bodies
    arriving are counted by the address the proxy forwards. One client behind it fills the
    pool (8 MiB: eight bodies of 1 MiB but a byte); another behind the same proxy still has
    its 256 KB POST answered 200, taking one of the first client's bodies (503, closed)."""
    proxy = ATTACKER
    config = ServerConfig(
        max_body_memory=8 * MiB, max_body_bytes=MiB, trusted_proxies=frozenset({proxy})
    )
    live = await live_server(config=config)
    bodies = live.app.runtime.bodies
    neighbour = [("x-forwarded-for", "10.0.0.2")]
    sid = await neighbour_session(live.url, proxy, neighbour)
    held = [HeldBody() for _ in range(8)]
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for one in held:
                nursery.start_soon(functools.partial(
                    hold_a_body, live.port, MiB, MiB - 1, one, 20, local=proxy,
                    forwarded_for="10.0.0.1",
                ))
            await wait_until(lambda: bodies.held == 8 * (MiB - 1), poll=0.01)
            assert {"ip:10.0.0.1": 8 * (MiB - 1)} == bodies.pool.share.holdings()
            call = rpc_request("tools/call", {"name": "echo", "arguments": {"text": "n" * 256_000}})
            response = await request(
                live.url, "POST", post_headers(session_id=sid, extra=neighbour), dumps(call),
                local=proxy,
            )
            assert 200 == response.status, response.body[:300]
            await wait_until(lambda: any(one.closed for one in held), poll=0.01)
            nursery.cancel_scope.cancel()
    [taken] = [one for one in held if one.status]
    assert (503, "1", -31002, True) == (taken.status, taken.retry_after, taken.code, taken.closed)
    assert 1 == live.stats()["bodies_evicted"]
