# Helpers for the resumption tests (tests/resumption/): a client that behaves like the
# official SDK clients when a stream breaks (GET + Last-Event-ID from the last id it received,
# no de-duplication), and bookkeeping of what it saw, so a test can count duplicates and gaps.
from __future__ import annotations

import contextlib
import json
import random
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from support.client import McpSession, SSEStream, open_stream, rpc_request
from support.client import dumps as json_body
from support.fixtures import OwnApp, start_live
from trio_mcp import Context, Server, ServerConfig
from trio_mcp.edges._asgi import ASGIApp
from trio_mcp.protocol import SSEEvent

__all__ = [
    "CallRecord",
    "Gate",
    "Wire",
    "call_with_drops",
    "close_when_attached",
    "numbered",
    "open_call",
    "read_until",
    "resume",
    "serve_in",
]


async def close_when_attached(ctx: Context) -> None:
    """In a tool: close the request's connection (SEP-1699 polling) as soon as a client
    connection is attached to its stream; ``close_sse_stream`` is False while none is."""
    # The runtime has no event for "a view attached"; a short poll is enough for tests.
    while not ctx.close_sse_stream():  # noqa: ASYNC110
        await trio.sleep(0.002)


@attrs.define(eq=False)
class Gate:
    """Lets a test drive a tool step by step: how many notifications it may send, how many
    it has sent, and whether it may return. The tool waits on it; the test pokes it."""

    allowed: int = 0
    sent: int = 0
    finish: bool = False
    cancelled: bool = False
    changed: trio.Event = attrs.Factory(trio.Event)

    def poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self.changed.wait()

    async def turn(self, i: int) -> bool:
        """In the tool: wait until notification ``i`` may go out (True) or the tool is
        released before that (False)."""
        await self.wait_for(lambda: self.allowed > i or self.finish)
        return self.allowed > i

    async def allow(self, count: int) -> None:
        """Let the tool send ``count`` more notifications and wait until it has."""
        self.allowed += count
        self.poke()
        await self.wait_for(lambda: self.sent >= self.allowed)

    def release(self) -> None:
        """Let the tool return."""
        self.finish = True
        self.poke()


async def serve_in(
    nursery: trio.Nursery,
    server: Server,
    config: ServerConfig | None = None,
    *,
    http_server: str = "hypercorn",
) -> tuple[str, ASGIApp | OwnApp]:
    """Serve ``server`` on 127.0.0.1:0 on ``http_server`` in ``nursery``; the MCP URL and app.

    What the ``live_server`` fixture does, for tests that cannot use a function-scoped
    fixture (a Hypothesis test runs each example in a trio run of its own).
    """
    live = await start_live(nursery, server, config, http_server=http_server)
    return live.url, live.app


@contextlib.asynccontextmanager
async def resume(
    session: McpSession, last_event_id: str, extra: Iterable[tuple[str, str]] = ()
) -> AsyncIterator[SSEStream]:
    """GET with Last-Event-ID: re-attach the stream that event id belongs to (T-RESUME-4)."""
    async with session.open_get([("last-event-id", last_event_id), *extra]) as stream:
        yield stream


@contextlib.asynccontextmanager
async def open_call(
    session: McpSession, message: Mapping[str, Any], extra: Iterable[tuple[str, str]] = ()
) -> AsyncIterator[SSEStream]:
    """POST one request and yield its response stream as soon as the head arrives."""
    async with open_stream(
        session.url, "POST", session.headers(list(extra)), json_body(message)
    ) as stream:
        yield stream


def numbered(message: Mapping[str, Any]) -> int | None:
    """The number ``i`` carried by a test server's notifications/message, else None."""
    if message.get("method") != "notifications/message":
        return None
    data = (message.get("params") or {}).get("data")
    if isinstance(data, Mapping) and isinstance(data.get("i"), int):
        return int(data["i"])
    return None


@attrs.define
class Wire:
    """Everything one client saw on one or more connections, in arrival order."""

    events: list[SSEEvent] = attrs.Factory(list)
    comments: list[str] = attrs.Factory(list)
    messages: list[dict[str, Any]] = attrs.Factory(list)
    ids: list[str] = attrs.Factory(list)
    named: list[SSEEvent] = attrs.Factory(list)
    """Events with an ``event:`` name other than "message" (which SDK clients skip)."""
    retries: list[int] = attrs.Factory(list)
    last_id: str | None = None

    def take(self, event: SSEEvent) -> dict[str, Any] | None:
        """Record one SSE event; return its JSON-RPC message if it carries one."""
        if event.comment is not None:
            self.comments.append(event.comment)
            return None
        self.events.append(event)
        if event.id:
            self.ids.append(event.id)
            self.last_id = event.id
        if event.retry is not None:
            self.retries.append(event.retry)
        if event.event not in (None, "message"):
            self.named.append(event)
            return None
        if not event.data:
            return None
        message: dict[str, Any] = json.loads(event.data)
        self.messages.append(message)
        return message

    @property
    def numbers(self) -> list[int]:
        return [n for m in self.messages if (n := numbered(m)) is not None]


async def read_until(
    stream: SSEStream, wire: Wire, *, messages: int | None = None
) -> bool:
    """Read ``stream`` into ``wire`` until ``messages`` JSON-RPC messages have arrived (or
    until the end of the stream when None). Returns whether the stream ended."""
    got = 0
    while messages is None or got < messages:
        event = await stream.next_event()
        if event is None:
            return True
        if wire.take(event) is not None:
            got += 1
    return False


@attrs.define
class CallRecord:
    """One request followed across every connection it took to get its response."""

    request_id: int | str
    wire: Wire = attrs.Factory(Wire)
    connections: int = 0
    drops: int = 0
    """Connections the client closed before the response arrived."""
    results: list[dict[str, Any]] = attrs.Factory(list)
    statuses: list[int] = attrs.Factory(list)

    @property
    def duplicates(self) -> int:
        numbers = self.wire.numbers
        return len(numbers) - len(set(numbers))

    def gaps(self, n: int) -> int:
        return len(set(range(n)) - set(self.wire.numbers))


async def call_with_drops(
    session: McpSession,
    name: str,
    arguments: Mapping[str, Any],
    *,
    rng: random.Random,
    max_events: int = 6,
    max_connections: int = 10_000,
) -> CallRecord:
    """Call a tool, closing the TCP connection after a random number (1..max_events) of SSE
    events each time, and resuming with GET + Last-Event-ID from the last id received, until
    the response arrives. Like the SDK clients: no de-duplication, no re-POST."""
    request = rpc_request("tools/call", {"name": name, "arguments": dict(arguments)})
    record = CallRecord(request_id=request["id"])
    wire = record.wire
    while not record.results:
        if record.connections >= max_connections:
            raise AssertionError(f"no response after {record.connections} connections")
        if record.connections == 0:
            opener = open_call(session, request)
        else:
            assert wire.last_id is not None, "the stream broke before any event id"
            opener = resume(session, wire.last_id)
        record.connections += 1
        async with opener as stream:
            record.statuses.append(stream.status)
            assert stream.status == 200 and stream.content_type == "text/event-stream", (
                stream.status,
                await stream.read_body(),
            )
            budget = rng.randint(1, max_events)
            seen = 0
            while True:
                event = await stream.next_event()
                if event is None:
                    break
                message = wire.take(event)
                if event.comment is not None:
                    continue
                if message is not None and message.get("id") == request["id"]:
                    record.results.append(message)
                    break
                seen += 1
                if seen >= budget:
                    record.drops += 1
                    break
        # Leaving the block closed the TCP connection, wherever the response was.
        await trio.lowlevel.checkpoint()
    return record
