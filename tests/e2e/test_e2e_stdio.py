# The stdio edge (spec/stdio.md), in process: a host is a pair of trio streams standing for
# the server's stdin and stdout, in lockstep (a write waits until the other side reads it,
# as on a full pipe), so a host that does not read blocks the server's writes for real.
from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.app._guards import caller_of
from trio_mcp.edges._stdio import StdioEdge, serve_stdio

TIMEOUT = 20

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "stdio-test", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def make_server() -> tuple[Server, dict[str, Any]]:
    server = Server("stdio-test")
    seen: dict[str, Any] = {"cancelled": trio.Event(), "started": trio.Event()}

    @server.tool()
    async def echo(text: str) -> str:
        """Says text back."""
        return text

    @server.tool()
    async def chatty(ctx: Context, count: int) -> str:
        """Reports progress ``count`` times, each with a 2 KB message, then answers."""
        for i in range(1, count + 1):
            await ctx.report_progress(i, count, "x" * 2048)
        return "done"

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """The caller's address and rate-limit key, as middleware sees them."""
        return f"{ctx.peer} {caller_of(ctx)}"

    @server.tool()
    async def forever() -> str:
        """Runs until cancelled."""
        seen["started"].set()
        try:
            await trio.sleep_forever()
        finally:
            seen["cancelled"].set()
        return "never"

    return server, seen


class Host:
    """The host's ends: what it writes to the server's stdin, what it reads of its stdout."""

    def __init__(self) -> None:
        self.to_server, self.stdin = trio.testing.lockstep_stream_one_way_pair()
        self.stdout, self.from_server = trio.testing.lockstep_stream_one_way_pair()
        self._buffer = b""
        self.edge: StdioEdge | None = None

    async def send(self, data: bytes) -> None:
        await self.to_server.send_all(data)

    async def read(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = await self.from_server.receive_some(65536)
            assert chunk, "stdout ended"
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(raw)
        return message

    async def read_until_id(self, request_id: Any) -> dict[str, Any]:
        while True:
            message = await self.read()
            if message.get("id") == request_id and "method" not in message:
                return message

    async def initialize(self) -> dict[str, Any]:
        await self.send(line(INITIALIZE))
        answer = await self.read_until_id(0)
        await self.send(line(INITIALIZED))
        return answer

    async def eof(self) -> None:
        await self.to_server.aclose()


@pytest.fixture
async def host(nursery: trio.Nursery) -> AsyncIterator[tuple[Host, dict[str, Any]]]:
    server, seen = make_server()
    h = Host()
    done = trio.Event()

    async def run() -> None:
        try:
            await serve_stdio(
                server, config=ServerConfig(shutdown_grace=1.0, max_body_bytes=1024 * 1024),
                stdin=h.stdin, stdout=h.stdout, max_exchanges=32,
                ready=lambda edge: setattr(h, "edge", edge),
            )
        finally:
            done.set()

    nursery.start_soon(run)
    seen["done"] = done
    yield h, seen


@pytest.mark.spec("TM-STDIO-SESSION")
async def test_stdio_host_initializes_and_calls_a_tool(host: tuple[Host, dict[str, Any]]) -> None:
    """A host's lines are one 2025-11-25 session: initialize, then a tool call, each answer
    one line of stdout."""
    h, _ = host
    with trio.fail_after(TIMEOUT):
        answer = await h.initialize()
        assert "2025-11-25" == answer["result"]["protocolVersion"]
        await h.send(line({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"text": "hi"}}}))
        result = await h.read_until_id(1)
    assert "hi" == result["result"]["content"][0]["text"]


@pytest.mark.spec("TM-STDIO-MALFORMED", "T-STDIO-4")
async def test_stdio_malformed_lines_get_parse_errors_and_the_server_goes_on(
    host: tuple[Host, dict[str, Any]],
) -> None:
    """Broken JSON, invalid UTF-8, a JSON value that is no message, a bad id and nesting
    past the parser's depth are each answered with a JSON-RPC error, and the next request
    is served."""
    h, _ = host
    with trio.fail_after(TIMEOUT):
        await h.initialize()
        await h.send(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        assert -32700 == (await h.read())["error"]["code"]
        await h.send(b'{"jsonrpc":"2.0","id":2,"method":"ping","x":"\xff\xfe"}\n')
        bad_utf8 = await h.read()
        assert (-32700, None) == (bad_utf8["error"]["code"], bad_utf8["id"])
        await h.send(b"42\n")
        assert -32600 == (await h.read())["error"]["code"]
        # An id that is no string or number, and a cancellation naming one: refused, and
        # nothing of the edge's own breaks on them.
        await h.send(b'{"jsonrpc":"2.0","id":{"a":[1]},"method":"ping"}\n')
        assert "error" in await h.read()
        await h.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                     b'"params":{"requestId":[1]}}\n')
        await h.send(b"[" * 100_000 + b"\n")
        assert -32700 == (await h.read())["error"]["code"]
        await h.send(b"\n\r\n")  # blank lines are nothing
        await h.send(line({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        assert {} == (await h.read_until_id(3))["result"]


@pytest.mark.spec("TM-STDIO-LONG")
async def test_stdio_a_4_mb_line_is_refused_without_being_held(
    host: tuple[Host, dict[str, Any]],
) -> None:
    """A 4 MB line over the 1 MB max_body_bytes is answered with an error, while the memory
    the server allocates meanwhile stays far below the line; the next line is served."""
    h, _ = host
    with trio.fail_after(TIMEOUT):
        await h.initialize()
        head = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo",'
        piece = b"x" * 65536
        tracemalloc.start()
        try:
            await h.send(head + b'"arguments":{"text":"')
            for _ in range(64):
                await h.send(piece)
            await h.send(b'"}}}\n')
            refusal = await h.read()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert -32600 == refusal["error"]["code"]
        assert "longer than 1048576 bytes" in refusal["error"]["message"]
        assert peak < 3 * 1024 * 1024, peak
        await h.send(line({"jsonrpc": "2.0", "id": 10, "method": "ping"}))
        assert {} == (await h.read_until_id(10))["result"]


@pytest.mark.slow
@pytest.mark.spec("TM-STDIO-BACKPRESSURE", "TM-STDIO-BOUND")
async def test_stdio_a_host_that_never_reads_stops_the_reading_not_the_server(
    host: tuple[Host, dict[str, Any]],
) -> None:
    """10,000 pings from a host that reads nothing: the server stops reading stdin after a
    bounded number (its writes wait on the pipe, its in-flight bound is reached); once the
    host reads, every ping is answered, in full, none twice."""
    h, _ = host
    with trio.fail_after(120):
        await h.initialize()
        sent = [0]

        async def flood() -> None:
            for i in range(10_000):
                await h.send(line({"jsonrpc": "2.0", "id": 100 + i, "method": "ping"}))
                sent[0] += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            await trio.sleep(2)
            stuck_at = sent[0]
            assert stuck_at < 1000, stuck_at
            assert h.edge is not None and h.edge.in_flight <= 32
            answered: dict[Any, Any] = {}
            while len(answered) < 10_000:
                message = await h.read()
                if "id" in message and "method" not in message:
                    assert message["id"] not in answered
                    answered[message["id"]] = message
        busy = [m for m in answered.values() if "error" in m]
        assert all(-31002 == m["error"]["code"] for m in busy)
        assert set(range(100, 10_100)) == set(answered)
        print(f"stdin stopped after {stuck_at} lines; {len(busy)} answered busy")


@pytest.mark.slow
@pytest.mark.spec("TM-STDIO-BACKPRESSURE")
@pytest.mark.parametrize("count", [100, 400])
async def test_stdio_a_stream_cut_for_a_host_that_does_not_read_loses_nothing_silently(
    nursery: trio.Nursery, count: int
) -> None:
    """With a stall budget of half a second, a host that reads nothing for 6 s while a tool
    sends ``count`` progress notifications of 2 KB has its stream cut, and the edge
    re-attaches it: within the replay window (256 events) the host then reads every
    notification once, in order, and the answer; past it, what it reads is still a gapless
    prefix, and the request is answered -31001 (resumption failed), never left hanging."""
    server, _ = make_server()
    h = Host()
    cfg = ServerConfig(stall_budget=0.5, min_read_rate=1024.0, shutdown_grace=1.0)

    async def run() -> None:
        await serve_stdio(server, config=cfg, stdin=h.stdin, stdout=h.stdout,
                          ready=lambda edge: setattr(h, "edge", edge))

    nursery.start_soon(run)
    with trio.fail_after(60):
        await h.initialize()
        await h.send(line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "chatty", "arguments": {"count": count}, "_meta": {"progressToken": "t"}}}))
        # The portable judge cuts a reader that stopped within six windows (3 s here).
        await trio.sleep(6)
        progress = []
        while True:
            message = await h.read()
            if message.get("method") == "notifications/progress":
                progress.append(message["params"]["progress"])
            elif message.get("id") == 1:
                break
    assert h.edge is not None
    cuts = h.edge.runtime.statistics().sessions.streams_cut
    print(f"{cuts} stream(s) cut; {len(progress)} of {count} notifications; {message}"[:300])
    assert cuts >= 1
    assert list(range(1, len(progress) + 1)) == progress
    if count <= 100:
        assert "done" == message["result"]["content"][0]["text"], message
        assert count == len(progress)
    else:
        assert -31001 == message["error"]["code"], message
    nursery.cancel_scope.cancel()


@pytest.mark.spec("TM-STDIO-EOF", "T-STDIO-6")
async def test_stdio_eof_serves_a_last_line_without_newline_then_shuts_down(
    host: tuple[Host, dict[str, Any]],
) -> None:
    """A last line without a line break is served; end of stdin then cancels a running
    handler within the shutdown grace, and the server returns."""
    h, seen = host
    with trio.fail_after(TIMEOUT):
        await h.initialize()
        await h.send(line({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                           "params": {"name": "forever", "arguments": {}}}))
        await seen["started"].wait()
        await h.send(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping"}).encode())
        await h.eof()
        assert {} == (await h.read_until_id(6))["result"]
        start = trio.current_time()
        await seen["cancelled"].wait()
        await seen["done"].wait()
        assert trio.current_time() - start < 1.0 + 5


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.mark.spec("TM-STDIO-MODERN", "T-STDIO-5")
async def test_stdio_cancelled_ends_a_2026_request(host: tuple[Host, dict[str, Any]]) -> None:
    """notifications/cancelled naming a running 2026-07-28 request cancels its handler, and
    nothing answers the notification."""
    h, seen = host
    with trio.fail_after(TIMEOUT):
        await h.send(line({"jsonrpc": "2.0", "id": "f", "method": "tools/call",
                           "params": {"name": "forever", "arguments": {},
                                      "_meta": MODERN_META}}))
        await seen["started"].wait()
        await h.send(line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": "f", "reason": "enough"}}))
        await seen["cancelled"].wait()
        await h.send(line({"jsonrpc": "2.0", "id": "p", "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"text": "next"},
                                      "_meta": MODERN_META}}))
        answer = await h.read()
    # The cancelled request is not answered (MU-CANCEL-3), the notification neither.
    assert ("p", "next") == (answer["id"], answer["result"]["content"][0]["text"]), answer


@pytest.mark.spec("TM-STDIO-SESSION")
async def test_stdio_a_notification_before_initialize_gets_no_answer(
    host: tuple[Host, dict[str, Any]],
) -> None:
    """What the runtime refuses of a notification or response (no session yet) is not
    written to stdout: JSON-RPC answers no notification."""
    h, _ = host
    with trio.fail_after(TIMEOUT):
        await h.send(line({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
        await h.send(line({"jsonrpc": "2.0", "id": 77, "result": {}}))
        await h.send(line({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        first = await h.read()
    # A request without a session is refused, with its id: the first thing on stdout.
    assert 1 == first["id"] and "error" in first, first


@pytest.mark.spec("TM-STDIO-MODERN")
async def test_stdio_a_2026_request_is_served_without_the_session(
    host: tuple[Host, dict[str, Any]],
) -> None:
    """A line whose _meta names 2026-07-28 is served statelessly, beside the session."""
    h, _ = host
    meta = MODERN_META
    with trio.fail_after(TIMEOUT):
        await h.send(line({"jsonrpc": "2.0", "id": "m1", "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"text": "now"},
                                      "_meta": meta}}))
        answer = await h.read_until_id("m1")
    assert "now" == answer["result"]["content"][0]["text"], answer


@pytest.mark.spec("TM-HAND-PEER", "TM-HAND-RATE-KEY")
async def test_stdio_requests_have_no_peer_address(host: tuple[Host, dict[str, Any]]) -> None:
    """Over stdio there is no client address: ctx.peer is None in both eras, and the rate
    limit's key is not an address."""
    h, _ = host
    with trio.fail_after(TIMEOUT):
        await h.initialize()
        await h.send(line({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "whoami", "arguments": {}}}))
        legacy = await h.read_until_id(1)
        await h.send(line({"jsonrpc": "2.0", "id": "m1", "method": "tools/call",
                           "params": {"name": "whoami", "arguments": {},
                                      "_meta": MODERN_META}}))
        modern = await h.read_until_id("m1")
    for answer in (legacy, modern):
        peer, key = answer["result"]["content"][0]["text"].split(" ", 1)
        assert "None" == peer and not key.startswith("ip:"), answer
