# The replay window (TM-RES-WINDOW) and what happens at its edge: a response nobody has been
# sent is never evicted (TM-RES-PIN); a cursor whose successors have left the window gets an
# explicit failure (TM-RES-STALE), never a silent replay from the start, never an empty 200.
from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
from mcp import Client
from support.client import McpSession, open_session, rpc_request
from support.fixtures import LiveServer, StartServer
from support.resume import Gate, Wire, numbered, open_call, read_until, resume

from trio_mcp import Context, Retention, Server, ServerConfig
from trio_mcp.protocol import STANDALONE_STREAM, ErrorCode, Notification

TIMEOUT = 10
WINDOW = Retention(max_events=8)

server = Server("resume-retention")
GATES: dict[str, Gate] = {}


@server.tool()
async def stepped(key: str, n: int, ctx: Context) -> str:
    """Send up to n numbered notifications as the test allows, return when released.

    Args:
        key: names the gate the test holds.
        n: how many notifications at most.
    """
    gate = GATES[key]
    try:
        for i in range(n):
            if not await gate.turn(i):
                break
            await ctx.log("info", {"i": i})
            gate.sent = i + 1
            gate.poke()
        await gate.wait_for(lambda: gate.finish)
    except trio.Cancelled:
        gate.cancelled = True
        raise
    return "stepped"


def new_gate() -> tuple[str, Gate]:
    key = f"g{len(GATES)}"
    GATES[key] = Gate()
    return key, GATES[key]


def call(key: str, n: int) -> dict[str, Any]:
    return rpc_request("tools/call", {"name": "stepped", "arguments": {"key": key, "n": n}})


def flood(live: LiveServer, session_id: str, count: int, start: int = 0) -> None:
    """Server notifications on the standalone stream, while no GET is open to take them."""
    session = live.table.sessions[session_id]
    for i in range(start, start + count):
        session.send(
            Notification(
                method="notifications/message",
                params={"level": "info", "data": {"i": i, "tag": "standalone"}},
            )
        )


async def wait_detached(live: LiveServer, session: McpSession, stream: int) -> None:
    """Until the server has seen the client's connection to ``stream`` go."""
    server_session = live.table.sessions[session.id]
    while stream in server_session.views:  # noqa: ASYNC110 (tests poll runtime state)
        await trio.sleep(0.001)


def stream_of(event_id: str) -> int:
    return int(event_id.rpartition("~")[2].split(".")[0])


def assert_explicit_failure(wire: Wire, request_id: object) -> None:
    """TM-RES-STALE on a request stream: the named event, then an error response for the
    request with our code, and nothing else."""
    assert [e.event for e in wire.named] == ["resumption-failed"], wire
    details = json.loads(wire.named[0].data or "")
    assert {"stream", "lastEventId", "reason"} <= set(details), details
    [answer] = wire.messages
    assert request_id == answer["id"] and "result" not in answer, answer
    assert ErrorCode.RESUMPTION_FAILED == answer["error"]["code"] == -31001
    assert "Resumption failed" in answer["error"]["message"]


@pytest.mark.spec("TM-RES-PIN", "T-PSSE-6", "T-PSSE-12", "TM-RES-WINDOW")
async def test_chatty_standalone_stream_cannot_evict_an_unsent_response(
    live_server: StartServer,
) -> None:
    """With a window of 8 events, the server sends 1,000 notifications on the standalone
    stream (no GET open to take them) around a tool call whose client has gone away. The
    call's response, which no connection has taken yet, is kept: the client's resume gets
    it, and only it, while the flood has been evicted."""
    live = await live_server(server, ServerConfig(retention=WINDOW))
    key, gate = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        request = call(key, 0)
        before = Wire()
        async with open_call(session, request) as stream:
            priming = await stream.next_event()
            assert priming is not None
            before.take(priming)
        await wait_detached(live, session, stream_of(before.ids[0]))
        flood(live, session.id, 500)
        gate.release()
        server_session = live.table.sessions[session.id]
        while request["id"] in server_session.inflight:  # noqa: ASYNC110
            await trio.sleep(0.001)
        flood(live, session.id, 500, start=500)
        log = live.table.sessions[session.id].log
        evicted, retained = log.evicted, log.retained_events
        after = Wire()
        assert before.last_id is not None
        async with resume(session, before.last_id) as stream:
            ended = await read_until(stream, after)

    assert evicted >= 990 and retained <= WINDOW.max_events + 1
    assert ended and [] == after.named
    assert [request["id"]] == [m["id"] for m in after.messages]
    assert after.messages[0]["result"]["content"] == [{"type": "text", "text": "stepped"}]


@pytest.mark.spec("TM-RES-STALE", "TM-RES-WINDOW", "T-GET-6", "T-PSSE-12")
async def test_stale_request_cursor_gets_an_explicit_failure_not_a_replay(
    live_server: StartServer,
) -> None:
    """With a window of 8 events, a call sends 30 notifications while its client is away.
    The client's resume (200, text/event-stream) carries a named `resumption-failed` SSE
    event and a JSON-RPC error response (-31001) for the call, then ends: none of the
    notifications, neither from the start nor from the window's edge. The handler is
    cancelled. Resuming again with the same cursor fails the same way: never an empty 200."""
    live = await live_server(server, ServerConfig(retention=WINDOW))
    key, gate = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        request = call(key, 40)
        before = Wire()
        async with open_call(session, request) as stream:
            await gate.allow(1)
            await read_until(stream, before, messages=1)
        await gate.allow(30)
        assert before.last_id is not None
        answers = []
        for _ in range(2):
            wire = Wire()
            async with resume(session, before.last_id) as stream:
                status, content_type = stream.status, stream.content_type
                ended = await read_until(stream, wire)
            answers.append((status, content_type, ended, wire))
        await gate.wait_for(lambda: gate.cancelled)

    assert [0] == before.numbers
    for status, content_type, ended, wire in answers:
        assert (200, "text/event-stream", True) == (status, content_type, ended)
        assert_explicit_failure(wire, request["id"])
        assert [] == [n for m in wire.messages if (n := numbered(m)) is not None]
    assert gate.cancelled


@pytest.mark.spec("TM-RES-STALE", "TM-RES-PIN", "T-PSSE-11")
async def test_response_lost_in_transit_and_then_evicted_is_an_explicit_failure(
    live_server: StartServer,
) -> None:
    """The server wrote a call's response, but the connection broke before the client read
    it (T-PSSE-11: a disconnection may occur at any time). Once written, a response is no
    longer pinned; when the window has moved past it, the client's resume must still end the
    call: the named event and an error response for the call, not an event stream that
    carries nothing (which SDK clients would resume again and again)."""
    live = await live_server(server, ServerConfig(retention=WINDOW))
    key, gate = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        request = call(key, 0)
        before = Wire()
        async with open_call(session, request) as stream:
            priming = await stream.next_event()
            assert priming is not None
            before.take(priming)
            gate.release()
            # The view ends once the response is written; the client never reads it.
            await wait_detached(live, session, stream_of(before.ids[0]))
        flood(live, session.id, 50)
        wire = Wire()
        assert before.last_id is not None
        async with resume(session, before.last_id) as stream:
            status = stream.status
            ended = await read_until(stream, wire)

    assert (200, True) == (status, ended)
    assert_explicit_failure(wire, request["id"])


@pytest.mark.spec("TM-RES-STALE", "TM-RES-WINDOW", "T-GET-4")
async def test_stale_standalone_cursor_gets_the_signal_and_the_stream_goes_on(
    live_server: StartServer,
) -> None:
    """The standalone stream has no request to fail. A client whose standalone cursor has
    left the window gets the named `resumption-failed` event, then a fresh position (a
    priming event with a new id, from which it can resume) and whatever the window still
    holds after the loss, oldest first, then live messages: never the stream from its
    start, and not a connection that ends and leaves the client resuming the same stale
    cursor forever."""
    live = await live_server(server, ServerConfig(retention=WINDOW))
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        before = Wire()
        async with session.open_get() as get:
            priming = await get.next_event()
            assert priming is not None and priming.id
            before.take(priming)
        await wait_detached(live, session, STANDALONE_STREAM)
        flood(live, session.id, 50)
        wire = Wire()
        assert before.last_id is not None
        async with resume(session, before.last_id) as stream:
            status = stream.status
            await read_until(stream, wire, messages=WINDOW.max_events)
            flood(live, session.id, 1, start=50)
            await read_until(stream, wire, messages=1)
        # The new position is a cursor that works.
        again = Wire()
        flood(live, session.id, 1, start=51)
        async with resume(session, wire.last_id or "") as stream:
            await read_until(stream, again, messages=1)

    assert 200 == status
    assert ["resumption-failed"] == [e.event for e in wire.named]
    kept = list(range(50 - WINDOW.max_events, 50))
    assert [*kept, 50] == wire.numbers
    assert [51] == again.numbers and [] == again.named


@pytest.mark.spec("TM-RES-STALE", "T-GET-8", "T-PSSE-4")
async def test_sdk_standalone_stream_recovers_from_a_stale_cursor(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The Python SDK client's standalone GET is closed by the server (with a retry field);
    while it waits, the stream outruns the window. Its resume gets the named event (which
    the SDK skips with a warning) and goes on: later server notifications reach the client,
    each once, and the client does not poll the server with its stale cursor."""
    retry_ms = 200
    live = await live_server(server, ServerConfig(retention=WINDOW, retry_ms=retry_ms))
    seen: list[int] = []

    async def on_log(params: Any) -> None:
        seen.append(params.data["i"])

    caplog.set_level(logging.INFO, logger="mcp")
    with trio.fail_after(TIMEOUT):
        async with Client(live.url, mode="legacy", logging_callback=on_log) as client:
            del client
            [server_session] = live.table.sessions.values()
            while STANDALONE_STREAM not in server_session.views:  # noqa: ASYNC110
                await trio.sleep(0.005)
            await trio.sleep(0.05)  # let the SDK read the priming event
            assert server_session.close_stream_connection(STANDALONE_STREAM)
            flood(live, server_session.id, 30)
            while STANDALONE_STREAM not in server_session.views:  # noqa: ASYNC110
                await trio.sleep(0.005)
            flood(live, server_session.id, 3, start=100)
            while len([i for i in seen if i >= 100]) < 3:  # noqa: ASYNC110
                await trio.sleep(0.005)
            await trio.sleep(3 * retry_ms / 1000)  # would the client poll again?
            opened = live.stats()["streams_opened"]

    assert [100, 101, 102] == [i for i in seen if i >= 100]
    assert len(seen) == len(set(seen))
    assert [] == [i for i in seen if i < 30 - WINDOW.max_events]
    # initialize, its POST stream, the first GET, the one resume: no polling loop.
    assert opened <= 4, opened


@pytest.mark.spec("TM-RES-WINDOW", "TM-RES-STALE", "T-RESUME-5")
async def test_age_limit_fails_only_a_cursor_that_needs_an_expired_message(
    live_server: StartServer,
) -> None:
    """The window also has an age limit. After it has passed, a message is evicted at the
    next append; a cursor at or after that message still resumes normally, while a cursor
    before it (the priming id) gets the explicit failure."""
    live = await live_server(server, ServerConfig(retention=Retention(max_age=0.2)))
    key, gate = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        request = call(key, 3)
        before = Wire()
        async with open_call(session, request) as stream:
            await gate.allow(1)
            await read_until(stream, before, messages=1)
        await trio.sleep(0.3)
        await gate.allow(1)  # this append evicts notification 0 by age
        fresh, stale = Wire(), Wire()
        async with resume(session, before.ids[1]) as stream:  # after notification 0
            await read_until(stream, fresh, messages=1)
        async with resume(session, before.ids[0]) as stream:  # the priming id: before it
            await read_until(stream, stale)

    assert [0] == before.numbers
    assert [1] == fresh.numbers and [] == fresh.named
    assert_explicit_failure(stale, request["id"])
