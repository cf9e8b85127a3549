"""The load generator's client: raw HTTP/1.1 over asyncio, just enough of MCP's Streamable HTTP.

No HTTP library: a request is one pre-built bytes write, a response is parsed in place
(Content-Length or chunked), SSE is split into events only where a benchmark reads them.
That keeps the client's cost per request a fraction of any server's, which run.py checks
by measuring the load generator's own CPU time.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import attrs

PROTOCOL_VERSION = "2025-11-25"
ACCEPT = b"application/json, text/event-stream"


class ConnectionClosed(Exception):
    """The server closed the connection (or it was reset) before the response ended."""


@attrs.define
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@attrs.define
class SSEEvent:
    data: str | None = None
    id: str | None = None
    event: str | None = None
    retry: int | None = None

    def message(self) -> Any:
        """The event's JSON-RPC message (None for a priming event or a comment)."""
        if not self.data:
            return None
        return json.loads(self.data)


class SSEParser:
    """An incremental text/event-stream parser: feed bytes, get the completed events.

    Accepts LF and CRLF line ends (hypercorn/trio-mcp writes LF, sse-starlette CRLF).
    Comments are dropped; an event with an id and empty data (priming) is reported.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._event = SSEEvent()
        self._data: list[str] | None = None
        self._any = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        buf = self._buf + chunk
        out: list[SSEEvent] = []
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = buf[start:end]
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._any:
                    if self._data is not None:
                        self._event.data = "\n".join(self._data)
                    out.append(self._event)
                self._event = SSEEvent()
                self._data = None
                self._any = False
                continue
            if line[:1] == b":":
                continue
            name, _, value = line.decode("utf-8").partition(":")
            if value.startswith(" "):
                value = value[1:]
            self._any = True
            if name == "data":
                if self._data is None:
                    self._data = []
                self._data.append(value)
            elif name == "id":
                self._event.id = value
            elif name == "event":
                self._event.event = value
            elif name == "retry" and value.isdigit():
                self._event.retry = int(value)
        self._buf = buf[start:]
        return out


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._waiter: asyncio.Future[None] | None = None
        self.bytes_received = 0

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.bytes_received += len(data)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- use --------------------------------------------------------------------------------

    @classmethod
    async def open(cls, host: str, port: int, *, rcvbuf: int | None = None) -> Connection:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf is not None:
            # Before connect, so that the window the server sees is small from the start.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, port))
        _, proto = await loop.create_connection(cls, sock=sock)
        return proto

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def abort(self) -> None:
        """Close the TCP connection for good (unread data makes the kernel send a reset)."""
        if self.transport is not None:
            self.transport.abort()
        self.closed = True

    async def _more(self) -> None:
        if self.closed:
            raise ConnectionClosed("connection closed by the server")
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def read_head(self) -> tuple[int, dict[str, str]]:
        buf = self.buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            await self._more()
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        del buf[: end + 4]
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def read_response(
        self, on_chunk: Callable[[bytes], bool] | None = None
    ) -> Response:
        """Read one response. With ``on_chunk``, body chunks go to it instead of the Response,
        and it returns True to stop reading (the rest of the body is then left unread)."""
        status, headers = await self.read_head()
        return await self.read_body(status, headers, on_chunk)

    async def read_body(
        self, status: int, headers: dict[str, str],
        on_chunk: Callable[[bytes], bool] | None = None,
    ) -> Response:
        """The body of a response whose head ``read_head`` returned (see read_response)."""
        parts: list[bytes] = []
        emit = on_chunk if on_chunk is not None else _collect(parts)
        buf = self.buf
        length = headers.get("content-length")
        if length is not None:
            remaining = int(length)
            while remaining:
                if not buf:
                    await self._more()
                take = bytes(buf[:remaining])
                del buf[: len(take)]
                remaining -= len(take)
                if emit(take):
                    break
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                end = buf.find(b"\r\n")
                while end < 0:
                    await self._more()
                    end = buf.find(b"\r\n")
                size = int(bytes(buf[:end]).split(b";", 1)[0], 16)
                if size == 0:
                    # The last chunk, then trailer fields (none, from these servers), then CRLF.
                    stop = buf.find(b"\r\n\r\n", end)
                    while stop < 0:
                        await self._more()
                        stop = buf.find(b"\r\n\r\n", end)
                    del buf[: stop + 4]
                    break
                need = end + 2 + size + 2
                while len(buf) < need:
                    await self._more()
                chunk = bytes(buf[end + 2 : end + 2 + size])
                del buf[:need]
                if emit(chunk):
                    break
        elif status not in (204, 304) and not (100 <= status < 200):
            # No length and not chunked: the body runs to the end of the connection.
            while True:
                if buf:
                    chunk = bytes(buf)
                    buf.clear()
                    if emit(chunk):
                        break
                try:
                    await self._more()
                except ConnectionClosed:
                    break
        return Response(status, headers, b"".join(parts))


def _collect(parts: list[bytes]) -> Callable[[bytes], bool]:
    def emit(chunk: bytes) -> bool:
        parts.append(chunk)
        return False

    return emit


# -- MCP over the connection ------------------------------------------------------------------


def request_head(
    host: str, port: int, path: str, *, session_id: str | None = None,
    method: str = "POST", last_event_id: str | None = None,
) -> bytes:
    """A request's head up to (not including) its Content-Length value."""
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Accept: " + (ACCEPT.decode() if method == "POST" else "text/event-stream"),
        f"MCP-Protocol-Version: {PROTOCOL_VERSION}",
    ]
    if method == "POST":
        lines.append("Content-Type: application/json")
    if session_id is not None:
        lines.append(f"Mcp-Session-Id: {session_id}")
    if last_event_id is not None:
        lines.append(f"Last-Event-ID: {last_event_id}")
    return ("\r\n".join(lines) + "\r\n").encode()


def encode_request(head: bytes, body: bytes) -> bytes:
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def rpc(rid: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        msg["id"] = rid
    if params is not None:
        msg["params"] = params
    return json.dumps(msg, separators=(",", ":")).encode()


def messages_of(response: Response) -> list[Any]:
    """The JSON-RPC messages of a complete response (JSON body or SSE)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [m for e in SSEParser().feed(response.body + b"\n\n") if (m := e.message())]
    if not response.body:
        return []
    return [json.loads(response.body)]


@attrs.define
class Session:
    """An initialized MCP session on a keep-alive connection."""

    host: str
    port: int
    path: str
    id: str
    conn: Connection
    next_id: int = 2

    def head(self, method: str = "POST", last_event_id: str | None = None) -> bytes:
        return request_head(self.host, self.port, self.path, session_id=self.id, method=method,
                            last_event_id=last_event_id)

    def take_id(self) -> int:
        rid = self.next_id
        self.next_id += 1
        return rid

    #: Connections the server closed after a response (hypercorn closes a keep-alive
    #: connection after keep_alive_max_requests, 1000 by default) and this client reopened.
    reconnects: int = 0

    async def ready(self) -> Connection:
        """The connection, reopened if the server closed it after the last response."""
        if self.conn.closed:
            self.conn.abort()
            self.conn = await Connection.open(self.host, self.port)
            self.reconnects += 1
        return self.conn

    async def call(self, body: bytes) -> Response:
        conn = await self.ready()
        conn.write(encode_request(self.head(), body))
        resp = await conn.read_response()
        if resp.headers.get("connection", "").lower() == "close":
            conn.closed = True
        return resp

    async def delete(self) -> int:
        """DELETE the session; the response's status."""
        conn = await self.ready()
        conn.write(self.head("DELETE") + b"\r\n")
        resp = await conn.read_response()
        if resp.headers.get("connection", "").lower() == "close":
            conn.closed = True
        return resp.status

    async def get(self, last_event_id: str | None,
                  on_chunk: Callable[[bytes], bool] | None = None) -> Response:
        conn = await self.ready()
        conn.write(self.head("GET", last_event_id) + b"\r\n")
        return await conn.read_response(on_chunk)


async def open_session(
    host: str, port: int, path: str = "/mcp", *, conn: Connection | None = None,
    first_id: int = 2,
) -> Session:
    """initialize + notifications/initialized, on ``conn`` or a new connection."""
    conn = conn or await Connection.open(host, port)
    init = rpc(1, "initialize", {
        "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "trio-mcp-bench", "version": "0"},
    })
    conn.write(encode_request(request_head(host, port, path), init))
    resp = await conn.read_response()
    sid = resp.headers.get("mcp-session-id")
    if resp.status != 200 or not sid:
        raise RuntimeError(f"initialize failed: {resp.status} {resp.body[:200]!r}")
    if not any("result" in m for m in messages_of(resp)):
        raise RuntimeError(f"initialize without a result: {resp.body[:200]!r}")
    session = Session(host, port, path, sid, conn, next_id=first_id)
    resp = await session.call(rpc(None, "notifications/initialized"))
    if resp.status != 202:
        raise RuntimeError(f"notifications/initialized got {resp.status}")
    return session


# -- 2026-07-28 ("modern") requests: no initialize, no session -------------------------------

MODERN_VERSION = "2026-07-28"
CLIENT_INFO = {"name": "trio-mcp-bench", "version": "0"}


def modern_head(host: str, port: int, path: str, method: str, name: str | None = None) -> bytes:
    """A modern request's head up to (not including) its Content-Length value: the version,
    method and (tools/call, prompts/get, resources/read) name headers the body mirrors."""
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Accept: " + ACCEPT.decode(),
        "Content-Type: application/json",
        f"MCP-Protocol-Version: {MODERN_VERSION}",
        f"Mcp-Method: {method}",
    ]
    if name is not None:
        lines.append(f"Mcp-Name: {name}")
    return ("\r\n".join(lines) + "\r\n").encode()


def modern_meta(progress_token: int | str | None = None) -> dict[str, Any]:
    """The ``params._meta`` envelope every modern request carries (and a progress token)."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if progress_token is not None:
        meta["progressToken"] = progress_token
    return meta


@attrs.define
class Stateless:
    """A keep-alive connection for modern requests, each a POST complete in itself, reopened
    when the server closed it (hypercorn says ``Connection: close`` after its
    keep_alive_max_requests, 1000 by default), or when a response was cut short."""

    host: str
    port: int
    conn: Connection | None = None
    reconnects: int = 0
    """Connections opened after the first."""

    async def ready(self) -> Connection:
        conn = self.conn
        if conn is None or conn.closed:
            if conn is not None:
                conn.abort()
                self.reconnects += 1
            conn = self.conn = await Connection.open(self.host, self.port)
        return conn

    async def call(self, request: bytes) -> Response:
        """Send one whole request (head and body, ``encode_request``), read its response.

        Raises:
            ConnectionClosed: the connection ended before the response did (the next call
                opens another).
        """
        conn = await self.ready()
        conn.write(request)
        try:
            resp = await conn.read_response()
        except ConnectionClosed:
            conn.abort()
            raise
        if resp.headers.get("connection", "").lower() == "close":
            conn.closed = True
        return resp

    def abort(self) -> None:
        if self.conn is not None:
            self.conn.abort()


async def wait_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
