# trio_mcp.Client against trio-mcp's server on both HTTP servers: a call whose connection
# the server closes again and again (SEP-1699 polling) is re-attached and sees each message
# once; a cursor that left the server's window fails the call with the server's -31001; a
# cancelled scope cancels the handler, in a session and in 2026-07-28, over HTTP and in
# process.
from __future__ import annotations

import random
from typing import Any

import pytest
import trio
from support.fixtures import StartServer, wait_until
from support.resume import close_when_attached

from trio_mcp import Client, Context, ResumptionFailed, Retention, Server, ServerConfig

server = Server("client-sessions")
STATE: dict[str, Any] = {}


@server.tool()
async def chatty(n: int, closes: list[int], ctx: Context) -> str:
    """Send n log messages and n progress notifications, closing the connection after each
    count in closes.

    Args:
        n: how many notifications of each kind.
        closes: after which notifications the server closes the request's connection.
    """
    for i in range(n):
        await ctx.log("info", {"i": i})
        await ctx.report_progress(i + 1, n)
        if i + 1 in closes:
            await close_when_attached(ctx)
        await trio.lowlevel.checkpoint()
    return f"chatty {n}"


@server.tool()
async def outrun(before: int, after: int, ctx: Context) -> str:
    """Send `before` messages, close the connection, send `after` more while the client
    waits, then wait until cancelled.

    Args:
        before: messages while attached.
        after: messages while away.
    """
    for i in range(before):
        await ctx.log("info", {"i": i})
    await close_when_attached(ctx)
    for i in range(before, before + after):
        await ctx.log("info", {"i": i})
    try:
        await trio.sleep_forever()
    finally:
        STATE["outrun_cancelled"] = True
    return "unreachable"


@server.tool()
async def hang(ctx: Context) -> str:
    """Wait until cancelled, and say so."""
    STATE["hanging"] = True
    try:
        await trio.sleep_forever()
    finally:
        STATE["hang_cancelled"] = True
    return "unreachable"


@server.resource("test://{name}")
async def thing(name: str) -> str:
    """A resource to subscribe to."""
    return name


@server.tool()
async def flood(n: int, size: int, ctx: Context) -> str:
    """Report progress n times, each with a message of size characters.

    Args:
        n: how many.
        size: each message's length.
    """
    for i in range(n):
        await ctx.report_progress(i + 1, n, "x" * size)
    return "flooded"


@server.tool()
async def step(ctx: Context) -> str:
    """Report progress, then wait until the client has seen it."""
    STATE["seen"] = trio.Event()
    await ctx.report_progress(1, 2)
    await STATE["seen"].wait()
    await ctx.report_progress(2, 2)
    return "stepped"


@pytest.fixture(autouse=True)
def _fresh_state() -> None:
    STATE.clear()


@pytest.mark.spec("TM-CLIENT-RESUME", "TM-CLIENT-ONCE")
async def test_a_call_closed_by_the_server_again_and_again_sees_each_message_once(
    live_server: StartServer,
) -> None:
    """The server closes a call's connection at 20 random points of 200 notifications of
    each kind: the client re-attaches each time, every log message and progress reaches
    its callback once, in order, and the result arrives."""
    live = await live_server(server, ServerConfig(retry_ms=5))
    n = 200
    closes = sorted(random.Random(7).sample(range(1, n), 20))
    logs: list[int] = []
    progress: list[float] = []
    with trio.fail_after(60):
        async with Client(live.url, mode="legacy",
                          on_log=lambda params: logs.append(params["data"]["i"])) as client:
            await client.set_logging_level("info")
            result = await client.call_tool("chatty", {"n": n, "closes": closes},
                                            on_progress=lambda p, t, m: progress.append(p))

    assert list(range(n)) == logs
    assert [float(i) for i in range(1, n + 1)] == progress
    assert [{"type": "text", "text": f"chatty {n}"}] == result["content"]


@pytest.mark.spec("TM-CLIENT-GAP")
async def test_a_cursor_outside_the_window_fails_the_call_with_the_servers_reason(
    live_server: StartServer,
) -> None:
    """With a window of 8 events, 40 messages go out while the client waits its retry: the
    resume cannot be served, the call raises ResumptionFailed with -31001 after about one
    retry interval, and the server cancels the handler."""
    live = await live_server(server, ServerConfig(retention=Retention(max_events=8),
                                                  retry_ms=300))
    with trio.fail_after(20):
        async with Client(live.url, mode="legacy") as client:
            start = trio.current_time()
            with pytest.raises(ResumptionFailed) as caught:
                await client.call_tool("outrun", {"before": 3, "after": 40})
            took = trio.current_time() - start
        await wait_until(lambda: STATE.get("outrun_cancelled", False))

    assert -31001 == caught.value.code
    assert 0.3 <= took < 5


@pytest.mark.spec("TM-CLIENT-CANCEL")
@pytest.mark.parametrize("where", ["http", "memory"])
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_cancelling_the_callers_scope_cancels_the_handler(
    live_server: StartServer, where: str, mode: str
) -> None:
    """A call cancelled by its caller's cancel scope ends the handler on the server: by
    notifications/cancelled in a session, by the closed POST in 2026-07-28; the client
    goes on answering."""
    target: Any = server if where == "memory" else (await live_server(server)).url
    with trio.fail_after(20):
        async with Client(target, mode=mode) as client:
            with trio.move_on_after(10) as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.call_tool, "hang")
                    await wait_until(lambda: STATE.get("hanging", False))
                    scope.cancel()
            await wait_until(lambda: STATE.get("hang_cancelled", False))
            await client.ping()

    assert scope.cancelled_caught


@pytest.mark.spec("TM-CLIENT-MEMORY")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_in_process_a_stream_arrives_as_the_server_writes_it(mode: str) -> None:
    """Client(server) hands each event over as the server writes it: the tool waits for
    the client to have seen its first progress before it goes on, which a transport that
    read whole responses first would never let happen."""

    def seen(progress: float, total: float | None, message: str | None) -> None:
        if progress == 1:
            STATE["seen"].set()

    with trio.fail_after(20):
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("step", on_progress=seen)

    assert [{"type": "text", "text": "stepped"}] == result["content"]


@pytest.mark.spec("TM-CLIENT-SESSION")
async def test_a_session_the_server_ended_is_started_again(live_server: StartServer) -> None:
    """The session is ended behind the client's back (a DELETE with its id): the next call
    gets 404, and the client starts a new session, subscribes again, and sends the call once
    more, which is answered."""
    import httpx2

    live = await live_server(server)
    with trio.fail_after(30):
        async with Client(live.url, mode="legacy") as client:
            await client.subscribe("test://anything")
            first = client.session_id
            assert first is not None
            async with httpx2.AsyncClient() as raw:
                ended = await raw.delete(live.url, headers={
                    "mcp-session-id": first, "mcp-protocol-version": client.protocol_version})
            result = await client.call_tool("chatty", {"n": 1, "closes": []})
            second = client.session_id

    assert 204 == ended.status_code
    assert second is not None and first != second
    assert [{"type": "text", "text": "chatty 1"}] == result["content"]


@pytest.mark.spec("TM-CLIENT-MEMORY", "TM-CLIENT-ONCE")
async def test_in_process_a_slow_reader_holds_the_server_back_and_loses_nothing() -> None:
    """In process, a progress callback that takes its time: the server's writes wait for
    the reader (at most PIECES_HELD pieces ahead, as a socket's buffers would hold), and
    every one of 300 notifications of 4 KB reaches the callback once, in order."""
    seen: list[float] = []

    async def slow(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        await trio.sleep(0.001)

    with trio.fail_after(60):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("flood", {"n": 300, "size": 4096}, on_progress=slow)

    assert [float(i) for i in range(1, 301)] == seen
    assert [{"type": "text", "text": "flooded"}] == result["content"]
