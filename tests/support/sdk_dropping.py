"""The official Python SDK's server (mcp 2.3.0, MCPServer under uvicorn) with resumability on
(the bounded in-memory event store of benchmarks/servers/sdk_bench.py) and a tool that closes
its request's SSE stream at given points (SEP-1699 polling, ``ctx.close_sse_stream``), for
the client's exactly-once test against it (tests/client/test_client_drops.py).

    python tests/support/sdk_dropping.py PORT

``running()`` starts a server script so, in the tests.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import GET_STREAM_KEY, StreamableHTTPServerTransport

SERVERS = Path(__file__).resolve().parents[2] / "benchmarks" / "servers"

mcp = MCPServer("sdk-dropping")


@mcp.tool()
async def chatty(ctx: Context, n: int, closes: list[int]) -> str:
    """Report progress 1..n, closing the request's stream after each count in closes."""
    for i in range(n):
        await ctx.report_progress(i + 1, n)
        if i + 1 in closes:
            await _close_when_attached(ctx)
            # 0-10 ms before the next event (the client re-attaches after 5 ms), so the
            # re-attach races the tool's next events, as against a tool that works between
            # its reports.
            await anyio.sleep((i * 7919 % 11) / 1000)
    return f"chatty {n}"


@mcp.tool()
async def announce(ctx: Context, n: int, closes: list[int]) -> str:
    """Once the session's GET stream is attached (2 s at most), send resources/updated for
    note://1..n on it, closing that stream after each count in closes."""
    transport, _key = _attachments(ctx)
    with anyio.move_on_after(2):
        while transport is not None and GET_STREAM_KEY not in transport._sse_stream_writers:  # noqa: ASYNC110
            await anyio.sleep(0.002)
    for i in range(n):
        await ctx.session.send_resource_updated(f"note://{i + 1}")
        if i + 1 in closes:
            with anyio.move_on_after(0.05):
                while (transport is not None  # noqa: ASYNC110
                       and GET_STREAM_KEY not in transport._sse_stream_writers):
                    await anyio.sleep(0.002)
            await ctx.close_standalone_sse_stream()
            await anyio.sleep((i * 7919 % 11) / 1000)
    return f"announced {n}"


def _attachments(ctx: Context) -> tuple[StreamableHTTPServerTransport | None, str | None]:
    """The transport serving ``ctx``'s request and the request's stream key, read from the
    closure the SDK hands the tool as ``close_sse_stream`` (it offers no way to ask)."""
    callback = ctx.request_context.close_sse_stream
    cells = {type(c.cell_contents): c.cell_contents
             for c in getattr(callback, "__closure__", None) or ()}
    return cells.get(StreamableHTTPServerTransport), cells.get(str)


async def _close_when_attached(ctx: Context) -> None:
    """Close the request's stream once a client connection is attached to it (at most 0.05 s
    of waiting): the SDK's ``close_sse_stream`` does nothing while none is, and a close
    that lands there would not be a drop."""
    transport, key = _attachments(ctx)
    with anyio.move_on_after(0.05):
        # The SDK has no event for it: a short poll.
        while transport is not None and key not in transport._sse_stream_writers:  # noqa: ASYNC110
            await anyio.sleep(0.002)
    await ctx.close_sse_stream()


def main() -> None:
    sys.path.insert(0, str(SERVERS))
    from sdk_bench import BoundedEventStore

    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore")
    app = mcp.streamable_http_app(event_store=BoundedEventStore(), retry_interval=5,
                                  host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False)


if __name__ == "__main__":
    main()


def running(script: Path, *args: str) -> Iterator[str]:
    """Run a server script in a process of its own on a free port of 127.0.0.1 (the port
    its last argument, after ``args``) until the generator is closed; yields its MCP URL."""
    from support.fixtures import free_port
    from support.process import stop

    port = free_port()
    cmd = [sys.executable, str(script), *args, str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, f"{script.name} did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc, timeout=30)
