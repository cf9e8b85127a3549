# Hypothesis over schedules of drops and re-attaches, end to end (real hypercorn, raw h11
# client). The test drives the tool step by step through a gate, so every schedule is
# deterministic: the client only ever waits for messages that the log already holds.
from __future__ import annotations

import contextlib
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.client import McpSession, SSEStream, open_session, rpc_request
from support.fixtures import HTTP_SERVERS
from support.resume import Gate, Wire, open_call, resume, serve_in

from trio_mcp import Context, Server
from trio_mcp._asgi import ASGIApp

N = 12


GATES: dict[str, Gate] = {}

server = Server("resume-schedules")


@server.tool()
async def stepped(key: str, n: int, ctx: Context) -> str:
    """Send n numbered notifications, each when the test allows it; return when told to.

    Args:
        key: names the gate the test holds.
        n: how many notifications.
    """
    gate = GATES[key]
    for i in range(n):
        assert await gate.turn(i)
        await ctx.log("info", {"i": i})
        gate.sent = i + 1
        gate.poke()
    await gate.wait_for(lambda: gate.finish)
    return "stepped"


# One step of a schedule.
EMIT = st.tuples(st.just("emit"), st.integers(1, 4))
READ = st.tuples(st.just("read"), st.integers(1, 4))
DROP = st.tuples(st.just("drop"), st.just(0))
REATTACH = st.tuples(st.just("reattach"), st.just(0))
SERVER_CLOSE = st.tuples(st.just("server-close"), st.just(0))
SCHEDULES = st.lists(st.one_of(EMIT, READ, DROP, REATTACH, SERVER_CLOSE), max_size=24)


@attrs.define(eq=False)
class Client:
    """The test's client: one current connection at most, resumed from the last id."""

    session: McpSession
    wire: Wire
    stack: contextlib.AsyncExitStack
    conn: SSEStream | None = None
    connections: int = 0
    detached_extra: list[dict[str, Any]] = attrs.Factory(list)
    """Messages that reached a connection after a newer one had re-attached its stream."""

    async def attach(self) -> SSEStream:
        assert self.wire.last_id is not None
        stream = await self.stack.enter_async_context(resume(self.session, self.wire.last_id))
        assert stream.status == 200, stream.status
        # TM-RES-ATTACHED: the comment comes first; once it is here the server has attached.
        first = await stream.next_event()
        assert first is not None and first.comment is not None, first
        assert first.comment.startswith("attached "), first
        self.connections += 1
        return stream

    async def current(self) -> SSEStream:
        if self.conn is None:
            self.conn = await self.attach()
        return self.conn

    async def read(self, count: int) -> None:
        got = 0
        while got < count:
            stream = await self.current()
            event = await stream.next_event()
            if event is None:
                self.conn = None  # the server ended the connection: resume
                continue
            if self.wire.take(event) is not None:
                got += 1

    async def drop(self) -> None:
        if self.conn is not None:
            await self.conn.aclose()
            self.conn = None


async def run_schedule(
    url: str, app: ASGIApp, key: str, gate: Gate, schedule: list[tuple[str, int]]
) -> tuple[Client, dict[str, Any]]:
    """Call the stepped tool and play ``schedule`` against it; read until the response."""
    session = await open_session(url)
    request = rpc_request("tools/call", {"name": "stepped", "arguments": {"key": key, "n": N}})
    async with contextlib.AsyncExitStack() as stack:
        wire = Wire()
        client = Client(session=session, wire=wire, stack=stack)
        client.conn = await stack.enter_async_context(open_call(session, request))
        client.connections = 1
        # The priming event: the client has a cursor before anything else happens.
        priming = await client.conn.next_event()
        assert priming is not None and priming.id and priming.data == "", priming
        wire.take(priming)
        [server_session] = app.manager.sessions.values()
        [stream_no] = {v.stream for v in server_session.views.values()} - {0}

        for op, arg in schedule:
            available = gate.sent - len(wire.messages)
            if op == "emit":
                gate.allowed = min(N, gate.allowed + arg)
                gate.poke()
                await gate.wait_for(lambda: gate.sent == gate.allowed)
            elif op == "read":
                await client.read(min(arg, available))
            elif op == "drop":
                await client.drop()
            elif op == "server-close":
                stream = await client.current()
                await client.read(available)
                assert server_session.close_stream_connection(stream_no)
                rest = Wire()
                while (event := await stream.next_event()) is not None:
                    rest.take(event)
                # T-PSSE-4: a retry field before the server closes the connection early.
                assert [] == rest.messages and rest.retries, rest
                client.conn = None
            elif op == "reattach":
                old = await client.current()
                await client.read(available)
                client.conn = await client.attach()
                leftovers = Wire()
                while (event := await old.next_event()) is not None:
                    leftovers.take(event)
                client.detached_extra += leftovers.messages

        gate.allowed = N
        gate.finish = True
        gate.poke()
        while not any(m.get("id") == request["id"] for m in wire.messages):
            await client.read(1)
        # T-PSSE-10: after the response the stream ends.
        if client.conn is not None:
            assert await client.conn.next_event() is None

    return client, request


@pytest.mark.spec(
    "T-RESUME-5", "T-RESUME-6", "T-MULTI-2", "T-PSSE-2", "T-PSSE-4", "TM-RES-ATTACHED"
)
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.parametrize("http_server", HTTP_SERVERS)
@given(schedule=SCHEDULES)
async def test_any_schedule_of_drops_and_reattaches_delivers_each_message_once(
    http_server: str, schedule: list[tuple[str, int]],
) -> None:
    """Whatever the order of sends, client drops, server-side closes (with retry) and
    re-attaches of a second connection while the first is still open, the client gets
    every notification once, in order, then the response once; a connection whose stream
    was taken over by a newer connection receives nothing more (T-MULTI-2)."""
    key = f"g{len(GATES)}"
    gate = GATES[key] = Gate()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            url, app = await serve_in(nursery, server, http_server=http_server)
            client, request = await run_schedule(url, app, key, gate, schedule)
            nursery.cancel_scope.cancel()
    wire = client.wire

    assert [] == client.detached_extra
    assert list(range(N)) == wire.numbers
    assert 1 == sum(1 for m in wire.messages if m.get("id") == request["id"])
    assert [{"type": "text", "text": "stepped"}] == wire.messages[-1]["result"]["content"]
