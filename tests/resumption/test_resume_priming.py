# Priming and polling (SEP-1699): each SSE stream of a 2025-11-25 session starts with an
# event that has an id and empty data, so the client holds a cursor before anything else
# arrives; older sessions get none (their clients break on empty data); a server that closes
# a connection early sends `retry` first. Real hypercorn on loopback, the raw h11 client.
from __future__ import annotations

from typing import Any

import pytest
import trio
from support.client import McpSession, open_session, rpc_request
from support.fixtures import LiveServer, StartServer
from support.resume import Wire, open_call, read_until, resume

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.protocol import STANDALONE_STREAM, Notification

TIMEOUT = 10
RETRY_MS = 1234

server = Server("resume-priming")
CLOSES: list[bool] = []


@server.tool()
async def polled(n: int, ctx: Context, close_after: int = -1, again: bool = False) -> str:
    """Send n numbered notifications; after `close_after` of them (if >= 0), close the
    connection, then wait a moment so the client sees the close before the rest.

    Args:
        n: how many notifications.
        close_after: when to close the connection (-1: never).
        again: close it a second time at once.
    """
    for i in range(n):
        if i == close_after:
            await trio.sleep(0.05)  # the view has written what came before
            CLOSES.append(ctx.close_sse_stream())
            if again:
                CLOSES.append(ctx.close_sse_stream())
            await trio.sleep(0.05)
        await ctx.log("info", {"i": i})
    if close_after == n:
        CLOSES.append(ctx.close_sse_stream())
    return f"polled {n}"


def call(n: int, close_after: int = -1, again: bool = False) -> dict[str, Any]:
    return rpc_request("tools/call", {"name": "polled", "arguments": {
        "n": n, "close_after": close_after, "again": again}})


def standalone_note(live: LiveServer, session: McpSession, i: int) -> None:
    live.table.sessions[session.id].send(
        Notification(method="notifications/message", params={"level": "info", "data": {"i": i}})
    )


async def first_events(live: LiveServer, session: McpSession) -> tuple[Wire, Wire]:
    """A tool call's POST stream, and the standalone GET stream with one message on it."""
    post, get = Wire(), Wire()
    async with open_call(session, call(2)) as stream:
        await read_until(stream, post)
    async with session.open_get() as stream:
        standalone_note(live, session, 0)
        await read_until(stream, get, messages=1)
    return post, get


async def _closed_and_resumed(
    live: LiveServer, request: dict[str, Any]
) -> tuple[bool, Wire, Wire]:
    """Send ``request`` in a new session and read its stream until the server closes it,
    then resume it and read it to its end: whether the first connection ended, and what
    each brought."""
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        first, second = Wire(), Wire()
        async with open_call(session, request) as stream:
            ended = await read_until(stream, first)
        assert first.last_id is not None
        async with resume(session, first.last_id) as stream:
            await read_until(stream, second)
    return ended, first, second


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CLOSES.clear()


@pytest.mark.spec("T-PSSE-1", "TM-RES-PRIME", "T-RESUME-2")
async def test_every_stream_of_a_2025_11_25_session_starts_with_a_priming_event(
    live_server: StartServer,
) -> None:
    """In a 2025-11-25 session, a POST's SSE stream and the standalone GET stream each start
    with an event that has an id and empty data (and no event name), before any message;
    the priming id is a cursor: resuming from it delivers the stream's messages from the
    start, as if nothing had been received."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url, protocol_version="2025-11-25")
        post, get = await first_events(live, session)
        replay = Wire()
        async with resume(session, post.ids[0]) as stream:
            await read_until(stream, replay)

    for wire in (post, get):
        priming = wire.events[0]
        assert (priming.data, priming.event) == ("", None) and priming.id, priming
        assert all(e.data for e in wire.events[1:])
    assert [0, 1] == post.numbers and [0] == get.numbers
    assert post.messages == replay.messages
    assert len(set(post.ids + get.ids)) == len(post.ids + get.ids)


@pytest.mark.spec("TM-RES-PRIME", "T-PSSE-1")
async def test_a_2025_06_18_session_gets_no_priming_event(live_server: StartServer) -> None:
    """Clients older than 2025-11-25 break on an event with empty data: a session that
    negotiated 2025-06-18 gets no priming event on either kind of stream; its first event
    is its first message, which still carries an id (a cursor to resume from)."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url, protocol_version="2025-06-18")
        post, get = await first_events(live, session)

    assert "2025-06-18" == session.protocol_version
    for wire in (post, get):
        assert all(e.data for e in wire.events), wire.events
        assert all(e.id for e in wire.events), wire.events
    assert [0, 1] == post.numbers and [0] == get.numbers


@pytest.mark.spec("T-PSSE-2", "T-PSSE-4", "T-PSSE-12", "T-RESUME-5")
async def test_retry_comes_before_the_server_closes_a_request_connection_early(
    live_server: StartServer,
) -> None:
    """When a handler closes its request's connection (SEP-1699 polling), the last thing on
    that connection is an event with the configured `retry` and no data; the request goes
    on, and its remaining messages and its response arrive on the resumed stream."""
    live = await live_server(server, ServerConfig(retry_ms=RETRY_MS))
    request = call(4, close_after=2)
    ended, first, second = await _closed_and_resumed(live, request)

    assert ended and [True] == CLOSES
    last = first.events[-1]
    assert (last.retry, last.data, last.id) == (RETRY_MS, None, None), last
    assert [0, 1] == first.numbers and [2, 3] == second.numbers
    assert request["id"] == second.messages[-1]["id"] and "result" in second.messages[-1]
    assert [] == second.retries  # a stream that ended after its response: no retry


@pytest.mark.spec("T-PSSE-2")
async def test_closing_a_connection_that_is_already_closing_closes_nothing(
    live_server: StartServer,
) -> None:
    """A handler that closes its request's connection twice in a row is told True, then
    False: the second close finds that connection ending and closes nothing, so a handler
    that closes whenever ``close_sse_stream`` succeeds closes each connection once."""
    live = await live_server(server, ServerConfig(retry_ms=RETRY_MS))
    ended, first, second = await _closed_and_resumed(live, call(4, close_after=2, again=True))

    assert ended and [True, False] == CLOSES
    assert [0, 1] == first.numbers and [2, 3] == second.numbers


@pytest.mark.spec("T-GET-7", "T-GET-8", "TM-RES-PRIME")
async def test_retry_comes_before_the_server_closes_the_standalone_connection(
    live_server: StartServer,
) -> None:
    """The server may close the standalone GET connection at any time; it sends `retry`
    first, and the client resumes from the priming id without losing what was sent while it
    was away."""
    live = await live_server(server, ServerConfig(retry_ms=RETRY_MS))
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        first, second = Wire(), Wire()
        async with session.open_get() as stream:
            priming = await stream.next_event()
            assert priming is not None
            first.take(priming)
            server_session = live.table.sessions[session.id]
            assert server_session.close_stream_connection(STANDALONE_STREAM)
            ended = await read_until(stream, first)
        standalone_note(live, session, 0)
        assert first.last_id is not None
        async with resume(session, first.last_id) as stream:
            await read_until(stream, second, messages=1)

    assert ended and [RETRY_MS] == first.retries
    assert first.events[-1].retry == RETRY_MS
    assert [0] == second.numbers


@pytest.mark.spec("T-PSSE-2", "TM-RES-PRIME")
async def test_no_early_close_before_an_event_id_in_an_unprimed_session(
    live_server: StartServer,
) -> None:
    """T-PSSE-2 allows closing a connection early only after an event id has gone out. In a
    2025-06-18 session a POST stream has no priming event; a handler that asks to close its
    connection before its first message is refused, and the response arrives on the same
    connection."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url, protocol_version="2025-06-18")
        request = call(0, close_after=0)
        wire = Wire()
        async with open_call(session, request) as stream:
            ended = await read_until(stream, wire)

    assert ended and [False] == CLOSES
    assert [request["id"]] == [m["id"] for m in wire.messages]
    assert [] == wire.retries


@pytest.mark.spec("T-PSSE-15", "TM-BP-OLDREV")
@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
async def test_no_early_close_at_all_in_a_session_before_2025_11_25(
    live_server: StartServer, version: str
) -> None:
    """Before 2025-11-25 the server does not close a request's stream before its response:
    a handler that asks to close its connection after messages with ids went out is
    refused, and every message and the response arrive on the same connection."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url, protocol_version=version)
        request = call(4, close_after=2)
        wire = Wire()
        async with open_call(session, request) as stream:
            ended = await read_until(stream, wire)

    assert ended and [False] == CLOSES
    assert [0, 1, 2, 3] == wire.numbers
    assert request["id"] == wire.messages[-1]["id"] and "result" in wire.messages[-1]
    assert [] == wire.retries


@pytest.mark.spec("T-PSSE-10", "T-PSSE-6")
async def test_a_stream_ends_after_its_response_without_retry(live_server: StartServer) -> None:
    """A POST stream ends right after the request's response, and without a retry field:
    there is nothing to come back for."""
    live = await live_server(server, ServerConfig(retry_ms=RETRY_MS))
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        request = call(3)
        wire = Wire()
        async with open_call(session, request) as stream:
            ended = await read_until(stream, wire)

    assert ended
    assert request["id"] == wire.messages[-1]["id"] and wire.events[-1].data
    assert [] == wire.retries
