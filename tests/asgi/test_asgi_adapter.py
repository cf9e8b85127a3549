# The ASGI adapter driven directly, with in-memory receive/send callables and no sockets:
# lifespan, routing, body limits and disconnects are the adapter's own job, so they are
# tested here where every ASGI message can be controlled and observed.
from __future__ import annotations

import json
import math
from collections.abc import MutableMapping
from typing import Any

import pytest
import trio

from trio_mcp import ResponseMode, Server, ServerConfig
from trio_mcp.edges._asgi import ASGIApp

Message = MutableMapping[str, Any]


class FakeASGIServer:
    """The server side of one ASGI connection: the test pushes what the app receives and
    reads what the app sends."""

    def __init__(self) -> None:
        self._to_app_send, self._to_app = trio.open_memory_channel[Message](math.inf)
        self._from_app_send, self.from_app = trio.open_memory_channel[Message](math.inf)
        self.sent: list[Message] = []
        self.received = 0

    def push(self, message: Message) -> None:
        self._to_app_send.send_nowait(message)

    async def receive(self) -> Message:
        message = await self._to_app.receive()
        self.received += 1
        return message

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        await self._from_app_send.send(message)

    async def next_sent(self) -> Message:
        return await self.from_app.receive()


def http_scope(
    path: str = "/mcp", method: str = "POST", headers: list[tuple[str, str]] | None = None
) -> Message:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in (headers if headers is not None else [("host", "127.0.0.1:8000")])
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def post_scope(path: str = "/mcp") -> Message:
    return http_scope(
        path,
        headers=[
            ("host", "127.0.0.1:8000"),
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
        ],
    )


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "asgi-test", "version": "0"},
        },
    }
).encode()


def make_app(config: ServerConfig | None = None) -> ASGIApp:
    server = Server("asgi-test")

    @server.tool()
    async def hello() -> str:
        """Say hello."""
        return "hello"

    return ASGIApp(server, config or ServerConfig(), bind_hosts=["127.0.0.1"])


async def collect_response(fake: FakeASGIServer) -> tuple[int, dict[str, str], bytes]:
    """Read http.response.start and every body chunk up to the last one."""
    start = await fake.next_sent()
    assert start["type"] == "http.response.start"
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in start["headers"]}
    body = b""
    while True:
        message = await fake.next_sent()
        assert message["type"] == "http.response.body"
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return start["status"], headers, body


@pytest.mark.spec("L-INIT-3")
async def test_lifespan_starts_and_stops_the_session_manager() -> None:
    """The ASGI lifespan protocol runs the session manager: after startup an initialize
    request is answered with the server's capabilities, and after shutdown the manager has
    stopped and its sessions are gone."""
    app = make_app(ServerConfig(response_mode=ResponseMode.JSON))
    lifespan = FakeASGIServer()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                app,
                {"type": "lifespan", "asgi": {"version": "3.0"}},
                lifespan.receive,
                lifespan.send,
            )
            lifespan.push({"type": "lifespan.startup"})

            assert await lifespan.next_sent() == {"type": "lifespan.startup.complete"}
            assert app.table.running

            http = FakeASGIServer()
            http.push({"type": "http.request", "body": INITIALIZE, "more_body": False})
            nursery.start_soon(app, post_scope(), http.receive, http.send)
            status, headers, body = await collect_response(http)

            assert status == 200
            assert "mcp-session-id" in headers
            assert "tools" in json.loads(body)["result"]["capabilities"]
            assert len(app.table.sessions) == 1

            http.push({"type": "http.disconnect"})
            lifespan.push({"type": "lifespan.shutdown"})

            assert await lifespan.next_sent() == {"type": "lifespan.shutdown.complete"}
        assert not app.table.running
        assert app.table.sessions == {}


@pytest.mark.spec("T-EP-1", "TM-HTTP-PATH")
@pytest.mark.parametrize("path", ["/", "/other", "/mcp/extra", "/mcpx"])
async def test_paths_other_than_the_endpoint_get_404(path: str) -> None:
    """The server provides one MCP endpoint path; any other path is Not Found, with a
    JSON-RPC error body, and nothing reaches the session manager."""
    app = make_app()
    fake = FakeASGIServer()
    fake.push({"type": "http.request", "body": INITIALIZE, "more_body": False})
    with trio.fail_after(10):
        await app(post_scope(path), fake.receive, fake.send)
        status, headers, body = await collect_response(fake)

    assert status == 404
    assert headers["content-type"] == "application/json"
    assert "error" in json.loads(body)
    assert app.table.sessions == {}


@pytest.mark.spec("T-POST-5", "TM-HTTP-SIZE")
async def test_body_limit_is_enforced_while_reading() -> None:
    """A POST body over max_body_bytes is refused with 413 as soon as the limit is passed:
    the adapter does not wait for (or buffer) the rest of an oversized body."""
    app = make_app(ServerConfig(max_body_bytes=100))
    fake = FakeASGIServer()
    # 3 x 40 bytes, the body never ends: the app must answer after the third chunk.
    for _ in range(3):
        fake.push({"type": "http.request", "body": b"x" * 40, "more_body": True})
    with trio.fail_after(10):
        async with app.running():
            await app(post_scope(), fake.receive, fake.send)
        status, _headers, body = await collect_response(fake)

    assert status == 413
    assert json.loads(body)["error"]["code"] == -32600
    assert fake.received == 3


@pytest.mark.spec("T-POST-5", "TM-HTTP-SIZE")
async def test_body_exactly_at_the_limit_is_accepted() -> None:
    """The limit is inclusive: a body of exactly max_body_bytes is read and served."""
    app = make_app(ServerConfig(max_body_bytes=len(INITIALIZE)))
    fake = FakeASGIServer()
    fake.push({"type": "http.request", "body": INITIALIZE[:10], "more_body": True})
    fake.push({"type": "http.request", "body": INITIALIZE[10:], "more_body": False})
    with trio.fail_after(10):
        async with app.running(), trio.open_nursery() as nursery:
            nursery.start_soon(app, post_scope(), fake.receive, fake.send)
            status, _, _ = await collect_response(fake)
            fake.push({"type": "http.disconnect"})

    assert status == 200


@pytest.mark.spec("T-PSSE-11")
async def test_disconnect_while_the_body_is_read_sends_nothing() -> None:
    """A client that disconnects before its body is complete gets no response (there is no
    one to send it to), no session is created and the app returns cleanly."""
    app = make_app()
    fake = FakeASGIServer()
    fake.push({"type": "http.request", "body": INITIALIZE[:20], "more_body": True})
    fake.push({"type": "http.disconnect"})
    with trio.fail_after(10):
        async with app.running():
            await app(post_scope(), fake.receive, fake.send)

    assert fake.sent == []
    assert app.table.sessions == {}


@pytest.mark.spec("T-EP-1")
async def test_websocket_connections_are_refused() -> None:
    """The MCP endpoint is HTTP only: a websocket connection is closed without being
    accepted."""
    app = make_app()
    fake = FakeASGIServer()
    fake.push({"type": "websocket.connect"})
    scope = dict(http_scope(), type="websocket", scheme="ws")
    with trio.fail_after(10):
        await app(scope, fake.receive, fake.send)

    assert [m["type"] for m in fake.sent] == ["websocket.close"]


@pytest.mark.spec("TM-SESS-GC")
async def test_requests_answered_whole_leave_no_cycles_for_the_collector() -> None:
    """A request answered at once frees what it made by reference counting: the adapter's
    way to start a disconnect watcher, never used, is taken back from the responder it
    holds, so the two make no cycle that only the cycle collector would free. 50 pings
    leave fewer unreachable objects than there are pings."""
    import gc

    app = make_app()
    requests = 50
    with trio.fail_after(10):
        async with app.running():
            fake = FakeASGIServer()
            fake.push({"type": "http.request", "body": INITIALIZE, "more_body": False})
            await app(post_scope(), fake.receive, fake.send)
            _status, headers, _body = await collect_response(fake)
            session = [
                ("host", "127.0.0.1:8000"),
                ("accept", "application/json, text/event-stream"),
                ("content-type", "application/json"),
                ("mcp-session-id", headers["mcp-session-id"]),
                ("mcp-protocol-version", "2025-11-25"),
            ]

            async def ping(k: int) -> bytes:
                fake = FakeASGIServer()
                body = json.dumps({"jsonrpc": "2.0", "id": 10 + k, "method": "ping"})
                fake.push({"type": "http.request", "body": body.encode(), "more_body": False})
                await app(http_scope(headers=session), fake.receive, fake.send)
                status, _headers, answer = await collect_response(fake)
                assert status == 200
                return answer

            await ping(-1)  # anything made once, on the first request, is made now
            gc.collect()
            gc.disable()
            try:
                for k in range(requests):
                    assert b'"result":{}' in await ping(k)
                unreachable = gc.collect()
            finally:
                gc.enable()
    assert unreachable < requests
