# Resumption with the official Python SDK client (`mcp` 2.3.0, mode="legacy"): it resumes a
# POST stream that the server closed with GET + Last-Event-ID after `retry` ms, by itself,
# and maps the response on the resumed stream back to its request (conformance.md §5).
from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import trio
import trio.lowlevel
from mcp import Client
from mcp.shared.exceptions import MCPError
from support.fixtures import StartServer
from support.resume import close_when_attached

from trio_mcp import Context, Retention, Server, ServerConfig
from trio_mcp.protocol import ErrorCode

server = Server("resume-sdk")

#: What the tools saw, for the assertions: closes that took effect, cancellations.
EVENTS: dict[str, Any] = {}


@server.tool()
async def chatty(n: int, closes: int, ctx: Context) -> str:
    """Send n numbered log messages and n progress notifications; close the connection
    `closes` times along the way (SEP-1699 polling).

    Args:
        n: how many notifications of each kind.
        closes: how many times the server closes the request's connection.
    """
    every = max(1, n // (closes + 1))
    done = 0
    for i in range(n):
        await ctx.log("info", {"i": i})
        await ctx.report_progress(i + 1, n)
        if done < closes and i % every == every - 1:
            await close_when_attached(ctx)
            done += 1
        await trio.lowlevel.checkpoint()
    EVENTS["closes"] = done
    return f"chatty {n}"


@server.tool()
async def outrun(before: int, after: int, ctx: Context) -> str:
    """Send `before` messages, close the connection, send `after` more while the client
    waits its retry interval, then wait forever (until cancelled).

    Args:
        before: messages sent while the client is attached.
        after: messages sent while it is away.
    """
    for i in range(before):
        await ctx.log("info", {"i": i})
    await close_when_attached(ctx)
    EVENTS["closed_at"] = time.monotonic()
    for i in range(before, before + after):
        await ctx.log("info", {"i": i})
    try:
        await trio.sleep_forever()
    finally:
        EVENTS["cancelled_at"] = time.monotonic()
    return "unreachable"


@pytest.fixture(autouse=True)
def _fresh_events() -> None:
    EVENTS.clear()


@pytest.mark.spec("T-PSSE-2", "T-PSSE-4", "T-RESUME-5", "T-PSSE-12", "TM-RES-ATTACHED")
async def test_sdk_client_resumes_a_repeatedly_closed_call_and_sees_each_message_once(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """While a tool call runs, the server closes its connection three times (with a retry
    field). The Python SDK client resumes by itself each time with GET + Last-Event-ID;
    every log message and every progress notification reaches its callback exactly once, in
    order, and the result arrives. The `: attached` comment that starts each resumed stream
    is invisible to the client: no error, no extra message, no warning."""
    live = await live_server(server, ServerConfig(retry_ms=20))
    n = 60
    logs: list[int] = []
    progresses: list[float] = []
    extra: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params.data["i"])

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progresses.append(progress)

    async def on_message(message: Any) -> None:
        extra.append(message)

    caplog.set_level(logging.DEBUG, logger="mcp")
    with trio.fail_after(15):
        async with Client(
            live.url, mode="legacy", logging_callback=on_log, message_handler=on_message
        ) as client:
            result = await client.call_tool(
                "chatty", {"n": n, "closes": 3}, progress_callback=on_progress
            )
    resumed = sum(1 for r in caplog.records if "Reconnected to SSE stream" in r.getMessage())
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    assert 3 == EVENTS["closes"] == resumed
    assert list(range(n)) == logs
    assert [float(i + 1) for i in range(n)] == progresses
    assert [{"type": "text", "text": f"chatty {n}"}] == [
        c.model_dump(exclude_none=True) for c in result.content
    ]
    assert not result.is_error
    # Everything the session surfaced: the 2n notifications, nothing else, no exception.
    kinds = sorted(type(m).__name__ for m in extra)
    assert ["LoggingMessageNotification"] * n + ["ProgressNotification"] * n == kinds
    assert [] == problems


@pytest.mark.spec("TM-RES-STALE", "TM-RES-WINDOW", "T-GET-6")
async def test_sdk_client_with_a_stale_cursor_gets_a_prompt_explicit_failure(
    live_server: StartServer,
) -> None:
    """With a replay window of 8 events, a tool sends 40 messages while the client waits
    out its retry interval after a server-side close. The client's resumed GET cannot be
    served: it gets a JSON-RPC error response (code -31001) for the call on the 200 stream,
    and the SDK's call fails at once with that error: after one retry interval, well before
    the SDK would have given up on its own (two more retries), and without hanging. The
    tool's handler is cancelled, since its answer can no longer reach the client."""
    retry_ms = 300
    config = ServerConfig(retention=Retention(max_events=8), retry_ms=retry_ms)
    live = await live_server(server, config)
    logs: list[int] = []

    async def on_log(params: Any) -> None:
        logs.append(params.data["i"])

    with trio.fail_after(15):
        async with Client(live.url, mode="legacy", logging_callback=on_log) as client:
            with pytest.raises(MCPError) as failure:
                await client.call_tool("outrun", {"before": 3, "after": 40})
            failed_at = time.monotonic()
            # The session lives on: the next call works.
            listed = await client.list_tools()
    waited = failed_at - EVENTS["closed_at"]
    print(f"stale cursor: call failed {waited * 1000:.0f} ms after the server closed")

    assert ErrorCode.RESUMPTION_FAILED == failure.value.code == -31001
    assert "Resumption failed" in failure.value.message
    # What the client got before the close, and nothing of what the window lost.
    assert list(range(len(logs))) == logs and len(logs) <= 3
    assert retry_ms / 1000 <= waited < 2 * retry_ms / 1000
    assert EVENTS["cancelled_at"] - EVENTS["closed_at"] < 2 * retry_ms / 1000
    assert "outrun" in {t.name for t in listed.tools}
