"""The SDK contenders of benchmarks/run.py (``sdk/uvicorn-standard``, ``sdk/uvicorn``): the
official MCP Python SDK (``mcp`` 2.3.0), ``MCPServer`` in streamable-http mode under uvicorn,
with the same tools as trio-mcp's.

    python benchmarks/servers/sdk_bench.py --port 8000 [--json-response] [--session-ttl S]
        [--loop {asyncio,uvloop}] [--http {h11,httptools}]

Stateful sessions (the default), resumability on: the SDK ships no event store, so this file
has a minimal bounded one, ``BoundedEventStore``, written against the SDK's ``EventStore``
ABC. Everything else is the SDK's default (``streamable_http_app``'s arguments), uvicorn's
too, but for its event loop and HTTP parser: ``--loop uvloop --http httptools`` is what
``pip install 'uvicorn[standard]'`` gives (uvicorn's "auto" picks them when installed; they
are named here so that a missing one fails instead of falling back), and benchmarks/run.py's
primary SDK contender; the defaults, asyncio and h11, are what a plain ``pip install mcp``
gives.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import logging
import warnings
from typing import Any

import release  # beside this script, in benchmarks/servers/
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)

mcp = MCPServer("bench-python-sdk")


@mcp.tool()
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
async def echo_progress(ctx: Context, text: str) -> str:
    """Report one progress notification (progress 1 of 1, the text as its message) when the
    call has a progress token, then return the text unchanged, as trio-mcp's tool does."""
    await ctx.report_progress(1, 1, text)
    return text


@mcp.tool()
async def stream(ctx: Context, n: int, size: int = 200, delay: float = 0.0, tag: str = "") -> str:
    """Send n numbered notifications of about size bytes on this request's stream, then return.

    Progress notifications when the call has a progress token, log messages otherwise, with
    the same content as trio-mcp's tool (benchmarks/servers/trio_mcp_bench.py).
    """
    import anyio

    pad = "x" * size
    meta = ctx.request_context.meta or {}
    progress = meta.get("progress_token", meta.get("progressToken")) is not None
    for i in range(n):
        if progress:
            await ctx.report_progress(i + 1, n, f"{tag}{i}:{pad}")
        else:
            await ctx.log("info", {"i": i, "tag": tag, "pad": pad})
        if delay:
            await anyio.sleep(delay)
    return f"sent {n}"


class BoundedEventStore(EventStore):
    """The last ``max_events_per_stream`` events of each stream, for at most ``max_streams``
    streams (the least recently written stream is dropped first).

    The bounds are trio-mcp's defaults (256 events a window, 10,000 sessions), so both
    servers keep comparable windows. Event ids are a process-wide counter; an id that is
    unknown (evicted, never issued) replays nothing (``None``), as the ABC specifies.

    The ABC hands the store no session: stream ids are the SDK's (a request id, or the GET
    stream's key), so two sessions' streams with the same request id share a stream here,
    and a cursor is looked up whatever session presents it. That is the SDK's interface, not
    a shortcut of this store; RESULTS.md shows what it means for foreign cursors.
    """

    def __init__(self, max_events_per_stream: int = 256, max_streams: int = 10_000) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.max_streams = max_streams
        self._streams: collections.OrderedDict[
            StreamId, collections.deque[tuple[int, Any]]
        ] = collections.OrderedDict()
        self._index: dict[EventId, tuple[StreamId, int]] = {}
        self._seq = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: Any) -> EventId:
        seq = next(self._seq)
        events = self._streams.get(stream_id)
        if events is None:
            if len(self._streams) >= self.max_streams:
                _, dropped = self._streams.popitem(last=False)
                for old, _msg in dropped:
                    self._index.pop(str(old), None)
            events = self._streams[stream_id] = collections.deque()
        else:
            self._streams.move_to_end(stream_id)
        if len(events) >= self.max_events_per_stream:
            old, _msg = events.popleft()
            self._index.pop(str(old), None)
        events.append((seq, message))
        event_id = str(seq)
        self._index[event_id] = (stream_id, seq)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._index.get(last_event_id)
        if found is None:
            return None
        stream_id, after = found
        for seq, message in list(self._streams.get(stream_id, ())):
            if seq > after and message is not None:
                await send_callback(EventMessage(message, str(seq)))
        return stream_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--session-ttl", type=float, default=None,
                        help="session_idle_timeout (default: the SDK's, 1800 s)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                        help="uvicorn's event loop (uvloop: as with uvicorn[standard])")
    parser.add_argument("--http", choices=("h11", "httptools"), default="h11",
                        help="uvicorn's HTTP/1.1 parser (httptools: as with uvicorn[standard])")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    # ctx.log is deprecated in the SDK's newest protocol revision; the 2025-11-25 wire has it.
    warnings.simplefilter("ignore")
    kwargs: dict[str, Any] = {}
    if args.session_ttl is not None:
        kwargs["session_idle_timeout"] = args.session_ttl
    app = mcp.streamable_http_app(
        json_response=args.json_response,
        event_store=BoundedEventStore(),
        host=args.host,
        **kwargs,
    )
    release.install()
    uvicorn.run(app, host=args.host, port=args.port, loop=args.loop, http=args.http,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
