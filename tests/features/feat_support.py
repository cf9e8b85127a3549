# An in-memory MCP client for feature tests: it drives the server's ASGI app directly, with
# no sockets, so tests can run under trio's MockClock (the `autojump_clock` fixture) and
# time is exact. What it sees is what the app sent: every SSE event, in order.
from __future__ import annotations

import contextlib
import itertools
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from trio_mcp import Client, Server, ServerConfig
from trio_mcp.client import ErrorAnswer
from trio_mcp.edges._asgi import ASGIApp
from trio_mcp.protocol import LATEST_LEGACY_VERSION, SSEDecoder, SSEEvent
from trio_mcp.runtime._stats import as_dict
from trio_mcp.runtime.legacy._table import SessionTable

__all__ = ["Connect", "Exchange", "InProcess", "MemoryServer", "MemorySession", "error_of"]

_ids = itertools.count(1000)

#: The ``connect`` fixture (conftest.py): ``await connect(server, era, config=None,
#: **client_options)`` is an open ``trio_mcp.Client(server)``, closed with the test.
Connect = Callable[..., Awaitable[Client]]


class Exchange:
    """One HTTP request to the app and its response, read as it arrives."""

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._body_sent = False
        self._disconnect = trio.Event()
        self._started = trio.Event()
        self._chunks_in, self._chunks = trio.open_memory_channel[bytes](math.inf)
        self._decoder = SSEDecoder()
        self._pending: list[SSEEvent] = []
        self.status = 0
        self.headers: dict[str, str] = {}
        self.ended = False
        self.events: list[SSEEvent] = []
        """Every SSE event and comment read so far."""

    # -- the ASGI side ------------------------------------------------------------------

    async def _receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._disconnect.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
            self._started.set()
        elif message["type"] == "http.response.body":
            with contextlib.suppress(trio.ClosedResourceError):
                self._chunks_in.send_nowait(message.get("body", b""))
                if not message.get("more_body", False):
                    self._chunks_in.close()

    # -- the client side ----------------------------------------------------------------

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()

    def disconnect(self) -> None:
        """The client drops the connection."""
        self._disconnect.set()

    async def body(self) -> bytes:
        chunks = [chunk async for chunk in self._chunks]
        self.ended = True
        return b"".join(chunks)

    async def next_event(self) -> SSEEvent | None:
        """The next SSE event or comment, or None when the response ended."""
        while not self._pending:
            try:
                chunk = await self._chunks.receive()
            except trio.EndOfChannel:
                self.ended = True
                return None
            self._pending.extend(self._decoder.feed(chunk))
        event = self._pending.pop(0)
        self.events.append(event)
        return event

    async def next_message(self) -> dict[str, Any] | None:
        """The next JSON-RPC message (SSE data or the JSON body), or None at the end."""
        if self.content_type == "application/json":
            if self.ended:
                return None
            message: dict[str, Any] = json.loads(await self.body())
            return message
        while (event := await self.next_event()) is not None:
            if event.data:
                message = json.loads(event.data)
                return message
        return None

    async def messages(self) -> list[dict[str, Any]]:
        """Every remaining message, until the response ends."""
        out = []
        while (m := await self.next_message()) is not None:
            out.append(m)
        return out


class MemoryServer:
    """A trio-mcp Server behind its ASGI app, driven in memory."""

    def __init__(self, server: Server, config: ServerConfig, nursery: trio.Nursery) -> None:
        self.server = server
        self.config = config
        self.app = ASGIApp(server, config, bind_hosts=["127.0.0.1"])
        self._nursery = nursery

    @property
    def table(self) -> SessionTable:
        return self.app.table

    def stats(self) -> dict[str, int | float]:
        """The counters of TM-BP-COUNTERS by their names (what the stats port serves)."""
        return as_dict(self.app.runtime.statistics())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self.app.running():
            task_status.started()
            await trio.sleep_forever()

    async def request(
        self, method: str, headers: Sequence[tuple[str, str]] = (), body: bytes = b""
    ) -> Exchange:
        """Start one HTTP exchange; returns once the response head is there."""
        ex = Exchange(body)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": self.config.path,
            "raw_path": self.config.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in [("host", "127.0.0.1:8000"), *headers]
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        self._nursery.start_soon(self.app, scope, ex._receive, ex._send)
        await ex._started.wait()
        return ex

    async def post(
        self,
        message: Any,
        *,
        session_id: str | None = None,
        version: str | None = LATEST_LEGACY_VERSION,
    ) -> Exchange:
        headers = [("accept", "application/json, text/event-stream")]
        headers.append(("content-type", "application/json"))
        if session_id is not None:
            headers.append(("mcp-session-id", session_id))
        if version is not None:
            headers.append(("mcp-protocol-version", version))
        return await self.request("POST", headers, json.dumps(message).encode())

    async def open_session(
        self, capabilities: Mapping[str, Any] | None = None, *, initialized: bool = True
    ) -> MemorySession:
        """Initialize a session (and send notifications/initialized unless told not to)."""
        ex = await self.post(
            request(
                "initialize",
                {
                    "protocolVersion": LATEST_LEGACY_VERSION,
                    "capabilities": dict(capabilities or {}),
                    "clientInfo": {"name": "feature-tests", "version": "0"},
                },
            ),
            version=None,
        )
        assert ex.status == 200, ex.status
        session = MemorySession(self, ex.headers["mcp-session-id"])
        answer = await ex.next_message()
        assert answer is not None and "result" in answer, answer
        session.initialize_result = answer["result"]
        if initialized:
            ack = await session.notify("notifications/initialized")
            assert ack.status == 202
        return session


def request(
    method: str, params: Mapping[str, Any] | None = None, *, id: Any = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids) if id is None else id}
    message["method"] = method
    if params is not None:
        message["params"] = dict(params)
    return message


class MemorySession:
    """One initialized session of a MemoryServer."""

    def __init__(self, server: MemoryServer, session_id: str) -> None:
        self.server = server
        self.id = session_id
        self.initialize_result: dict[str, Any] = {}

    async def post(self, message: Any) -> Exchange:
        return await self.server.post(message, session_id=self.id)

    async def start(
        self, method: str, params: Mapping[str, Any] | None = None, *, id: Any = None
    ) -> tuple[dict[str, Any], Exchange]:
        """Send a request; returns it and its open response stream."""
        message = request(method, params, id=id)
        ex = await self.post(message)
        assert ex.status == 200, ex.status
        return message, ex

    async def call(
        self, method: str, params: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Send a request; returns its response and the messages that came before it."""
        message, ex = await self.start(method, params)
        before = []
        while (m := await ex.next_message()) is not None:
            if m.get("id") == message["id"] and "method" not in m:
                return m, before
            before.append(m)
        raise AssertionError(f"no response to {method}; got {before}")

    async def result(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        answer, _ = await self.call(method, params)
        assert "result" in answer, answer
        return answer["result"]

    async def error(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        answer, _ = await self.call(method, params)
        assert "error" in answer, answer
        error: dict[str, Any] = answer["error"]
        return error

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> Exchange:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        return await self.post(message)

    async def respond(self, request_id: Any, result: Mapping[str, Any]) -> Exchange:
        """Answer a server-to-client request (the server replies 202)."""
        return await self.post({"jsonrpc": "2.0", "id": request_id, "result": dict(result)})

    async def get(self) -> Exchange:
        """Open the standalone GET stream."""
        headers = [
            ("accept", "text/event-stream"),
            ("mcp-session-id", self.id),
            ("mcp-protocol-version", LATEST_LEGACY_VERSION),
        ]
        return await self.server.request("GET", headers)

    async def delete(self) -> Exchange:
        headers = [("mcp-session-id", self.id), ("mcp-protocol-version", LATEST_LEGACY_VERSION)]
        return await self.server.request("DELETE", headers)


@contextlib.asynccontextmanager
async def memory_server(
    server: Server, config: ServerConfig | None = None
) -> AsyncIterator[MemoryServer]:
    """A MemoryServer for the length of the block."""
    async with trio.open_nursery() as nursery:
        ms = MemoryServer(server, config or ServerConfig(), nursery)
        await nursery.start(ms.run)
        yield ms
        nursery.cancel_scope.cancel()


async def error_of(
    client: Client, method: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON-RPC error a request through ``client`` is answered with, as its object
    (``code``, ``message``, and ``data`` when there is some); fails when it succeeds."""
    try:
        result = await client.request(method, params)
    except ErrorAnswer as error:
        return _error_object(error)
    raise AssertionError(f"{method} succeeded: {result}")


def _error_object(error: ErrorAnswer) -> dict[str, Any]:
    answer: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        answer["data"] = error.data
    return answer


class InProcess:
    """One server reached through ``trio_mcp.Client(server)`` in either era: a client per
    era, opened when first asked, for the tests that ask both eras the same thing."""

    def __init__(self, connect: Connect, server: Server, **options: Any) -> None:
        self.server = server
        self._connect = connect
        self._options = options
        self._clients: dict[tuple[str, str], Client] = {}

    async def client(
        self, era: str, *, extensions: Mapping[str, Mapping[str, Any]] | None = None
    ) -> Client:
        """The open client of ``era`` declaring ``extensions``."""
        key = (era, json.dumps(extensions or {}, sort_keys=True))
        if key not in self._clients:
            self._clients[key] = await self._connect(
                self.server, era, extensions=extensions, **self._options)
        return self._clients[key]

    async def rpc(
        self, era: str, method: str, params: Mapping[str, Any] | None = None,
        *, extensions: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The answer to one request, as ``{"result": …}`` or ``{"error": …}``."""
        client = await self.client(era, extensions=extensions)
        try:
            return {"result": await client.request(method, params)}
        except ErrorAnswer as error:
            return {"error": _error_object(error)}

    async def tool_call(
        self, era: str, name: str, arguments: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """One tools/call's result (an error answer fails the test)."""
        return await (await self.client(era)).call_tool(name, arguments)
