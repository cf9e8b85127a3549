# A small raw HTTP/1.1 client for tests: trio sockets and h11, nothing else, so the tests see
# exactly what the server put on the wire (no client library smoothing it over).
#
# `request()` sends one request and reads the whole response. `open_stream()` reads a
# response incrementally, decodes text/event-stream as it arrives, and lets the caller drop
# the TCP connection at any point (mid-stream disconnects). `McpSession` wraps the JSON-RPC
# and MCP header chores of one session.
from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import attrs
import h11
import trio

from trio_mcp.protocol import LATEST_LEGACY_VERSION, SSEDecoder, SSEEvent

__all__ = [
    "POST_ACCEPT",
    "McpSession",
    "Response",
    "SSEStream",
    "dumps",
    "initialize",
    "initialize_params",
    "notification",
    "open_session",
    "open_stream",
    "post_headers",
    "request",
    "rpc_messages",
    "rpc_request",
]

#: The Accept header a conforming client sends on POST (T-POST-2).
POST_ACCEPT: Final = "application/json, text/event-stream"

HeaderList = Sequence[tuple[str, str]]

_ids = itertools.count(1)


@attrs.frozen
class Response:
    """A complete HTTP response. Header names are lower case."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    truncated: bool = False
    """The server closed the connection before the body was complete."""

    def header(self, name: str) -> str | None:
        """The first value of header ``name``, or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[SSEEvent]:
        """The body decoded as text/event-stream, comments included."""
        return SSEDecoder().feed(self.body)


def _target(url: str) -> tuple[str, int, str, str]:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None:
        raise ValueError(f"only http:// URLs are supported, not {url!r}")
    port = parts.port or 80
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    host = parts.hostname
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return host, port, path, authority


def _request_headers(
    authority: str, headers: HeaderList, body: bytes, method: str
) -> list[tuple[str, str]]:
    names = {k.lower() for k, _ in headers}
    out = list(headers)
    if "host" not in names:
        out.insert(0, ("host", authority))
    if (
        "content-length" not in names
        and "transfer-encoding" not in names
        and (body or method in ("POST", "PUT", "PATCH"))
    ):
        out.append(("content-length", str(len(body))))
    return out


class SSEStream:
    """One HTTP exchange whose response is read incrementally.

    ``status`` and ``headers`` are available on entry; ``events()`` yields the SSE events
    (comments included) as they arrive; ``aclose()`` drops the TCP connection.
    """

    def __init__(self, sock: trio.SocketStream, conn: h11.Connection, response: h11.Response):
        self._sock = sock
        self._conn = conn
        self.status: int = response.status_code
        self.headers: tuple[tuple[str, str], ...] = tuple(
            (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in response.headers
        )
        self._decoder = SSEDecoder()
        self._pending: list[SSEEvent] = []
        self.ended = False
        """Set when the response body is over (finished, or cut off by the server)."""
        self.truncated = False
        """Set when the server closed the connection before the body was complete (for a
        chunked SSE stream: without its final chunk)."""
        self.closed = False
        self._eof = False

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    async def _next_data(self) -> bytes | None:
        """The next body chunk, or None at the end of the body."""
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError:
                if not self._eof:
                    raise
                # The server dropped the connection mid-body: an end, but not a clean one.
                self.ended = self.truncated = True
                return None
            if event is h11.NEED_DATA:
                data = await self._sock.receive_some(65536)
                self._eof = not data
                self._conn.receive_data(data)
                continue
            if isinstance(event, h11.Data):
                return bytes(event.data)
            if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                self.ended = True
                return None

    async def read_body(self) -> bytes:
        """The rest of the body (for a response that is not a stream)."""
        chunks = []
        while (chunk := await self._next_data()) is not None:
            chunks.append(chunk)
        return b"".join(chunks)

    async def next_event(self, *, comments: bool = True) -> SSEEvent | None:
        """The next SSE event (or comment), or None when the server ended the stream."""
        while True:
            while self._pending:
                event = self._pending.pop(0)
                if comments or event.comment is None:
                    return event
            chunk = await self._next_data()
            if chunk is None:
                return None
            self._pending.extend(self._decoder.feed(chunk))

    async def events(self, *, comments: bool = True) -> AsyncIterator[SSEEvent]:
        while (event := await self.next_event(comments=comments)) is not None:
            yield event

    async def next_message(self) -> dict[str, Any]:
        """The next JSON-RPC message on the stream (skips comments and empty-data events)."""
        while True:
            event = await self.next_event(comments=False)
            if event is None:
                raise EOFError("the SSE stream ended before another message")
            if event.data:
                message: dict[str, Any] = json.loads(event.data)
                return message

    async def aclose(self) -> None:
        """Drop the TCP connection, wherever the response is."""
        if not self.closed:
            self.closed = True
            await self._sock.aclose()


@contextlib.asynccontextmanager
async def open_stream(
    url: str,
    method: str = "GET",
    headers: HeaderList = (),
    body: bytes = b"",
    *,
    local: str | None = None,
) -> AsyncIterator[SSEStream]:
    """Send a request (from the address ``local``, when given: 127.0.0.x on loopback) and
    yield once the response head has arrived; closes the connection on exit."""
    host, port, path, authority = _target(url)
    sock = await trio.open_tcp_stream(host, port, local_address=local)
    try:
        conn = h11.Connection(our_role=h11.CLIENT)
        # Header values go out as latin-1 bytes, so tests can send any octet HTTP allows.
        raw_headers = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in _request_headers(authority, headers, body, method)
        ]
        req = h11.Request(method=method, target=path, headers=raw_headers)
        out = conn.send(req) or b""
        if body:
            out += conn.send(h11.Data(data=body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        await sock.send_all(out)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await sock.receive_some(65536)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                break
            raise h11.RemoteProtocolError(f"unexpected {event!r} before the response head")
        stream = SSEStream(sock, conn, event)
        yield stream
    finally:
        with trio.CancelScope(shield=True):
            await sock.aclose()


async def request(
    url: str,
    method: str = "POST",
    headers: HeaderList = (),
    body: bytes = b"",
    *,
    local: str | None = None,
) -> Response:
    """Send one request on a fresh connection (from ``local``, when given) and read the
    complete response."""
    async with open_stream(url, method, headers, body, local=local) as stream:
        payload = await stream.read_body()
        return Response(
            status=stream.status, headers=stream.headers, body=payload, truncated=stream.truncated
        )


# -- JSON-RPC and MCP helpers ------------------------------------------------------------


def rpc_request(
    method: str, params: Mapping[str, Any] | None = None, *, id: str | int | None = None
) -> dict[str, Any]:
    """A JSON-RPC request (a fresh integer id unless given)."""
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": next(_ids) if id is None else id,
        "method": method,
    }
    if params is not None:
        message["params"] = dict(params)
    return message


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def initialize_params(
    protocol_version: str = LATEST_LEGACY_VERSION, capabilities: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "protocolVersion": protocol_version,
        "capabilities": dict(capabilities or {}),
        "clientInfo": {"name": "trio-mcp-tests", "version": "0"},
    }


def post_headers(
    *,
    session_id: str | None = None,
    protocol_version: str | None = None,
    extra: HeaderList = (),
) -> list[tuple[str, str]]:
    """The headers of a conforming POST (T-POST-2), plus the MCP ones that are given."""
    headers = [("accept", POST_ACCEPT), ("content-type", "application/json")]
    if session_id is not None:
        headers.append(("mcp-session-id", session_id))
    if protocol_version is not None:
        headers.append(("mcp-protocol-version", protocol_version))
    names = {k.lower() for k, _ in extra}
    return [h for h in headers if h[0] not in names] + list(extra)


def rpc_messages(response: Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a POST response: a JSON body (one object or an array) or the
    data of each SSE event that has any."""
    if response.content_type == "application/json":
        decoded = response.json()
        return decoded if isinstance(decoded, list) else [decoded]
    if response.content_type == "text/event-stream":
        return [json.loads(e.data) for e in response.events() if e.data]
    raise AssertionError(f"no JSON-RPC body in a {response.status} {response.content_type!r}")


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@attrs.define
class McpSession:
    """One initialized session, seen from a conforming client."""

    url: str
    id: str
    protocol_version: str
    initialize_result: dict[str, Any]

    def headers(self, extra: HeaderList = ()) -> list[tuple[str, str]]:
        return post_headers(session_id=self.id, protocol_version=self.protocol_version, extra=extra)

    async def post(self, message: Any, *, headers: HeaderList = ()) -> Response:
        """POST any JSON value (a message, a batch, garbage) with this session's headers."""
        return await request(self.url, "POST", self.headers(headers), dumps(message))

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its JSON-RPC response (result or error) as a dict."""
        message = rpc_request(method, params)
        response = await self.post(message)
        assert response.status == 200, (response.status, response.body)
        answers = [m for m in rpc_messages(response) if m.get("id") == message["id"]]
        assert len(answers) == 1, rpc_messages(response)
        return answers[0]

    async def result(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send a request and return its result (fails the test on an error)."""
        answer = await self.call(method, params)
        assert "result" in answer, answer
        return answer["result"]

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> Response:
        return await self.post(notification(method, params))

    async def delete(self) -> Response:
        return await request(self.url, "DELETE", self.headers())

    @contextlib.asynccontextmanager
    async def open_get(self, extra: Iterable[tuple[str, str]] = ()) -> AsyncIterator[SSEStream]:
        """Open the standalone GET stream (or resume one, with a Last-Event-ID in ``extra``)."""
        headers = [
            ("accept", "text/event-stream"),
            ("mcp-session-id", self.id),
            ("mcp-protocol-version", self.protocol_version),
            *extra,
        ]
        async with open_stream(self.url, "GET", headers) as stream:
            yield stream


async def open_session(
    url: str,
    *,
    protocol_version: str = LATEST_LEGACY_VERSION,
    send_initialized: bool = True,
    headers: HeaderList = (),
    capabilities: Mapping[str, Any] | None = None,
) -> McpSession:
    """Initialize a session (and by default send notifications/initialized)."""
    response = await request(
        url,
        "POST",
        post_headers(extra=headers),
        dumps(rpc_request("initialize", initialize_params(protocol_version, capabilities))),
    )
    assert response.status == 200, (response.status, response.body)
    session_id = response.header("mcp-session-id")
    assert session_id, response.headers
    [answer] = [m for m in rpc_messages(response) if "id" in m]
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    session = McpSession(
        url=url, id=session_id, protocol_version=result["protocolVersion"], initialize_result=result
    )
    if send_initialized:
        ack = await session.notify("notifications/initialized")
        assert ack.status == 202, (ack.status, ack.body)
    return session


async def initialize(url: str, *, protocol_version: str = LATEST_LEGACY_VERSION) -> str:
    """Initialize a session, send notifications/initialized, and return the session id."""
    return (await open_session(url, protocol_version=protocol_version)).id
