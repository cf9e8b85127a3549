# 2026-07-28 ("modern") requests for the end-to-end tests (tests/modern/): the per-request
# envelope in params._meta and the routing headers that must agree with it, so a test states
# only what it is about. Nothing here smooths over what the server answers: `post()` returns
# the raw HTTP response and `open_modern()` the raw stream of tests/support/client.py.
from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import trio

from support.client import (
    POST_ACCEPT,
    Response,
    SSEStream,
    dumps,
    open_stream,
    request,
    rpc_request,
)

__all__ = [
    "CLIENT_INFO",
    "META_CAPS",
    "META_INFO",
    "META_LEVEL",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "META_VERSION",
    "MODERN",
    "b64_header",
    "call_tool",
    "messages_of",
    "modern_headers",
    "modern_meta",
    "modern_notification",
    "modern_request",
    "open_modern",
    "open_raw",
    "post",
    "raw_events",
    "read_to_eof",
    "read_until",
]

MODERN: Final = "2026-07-28"

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
META_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"

CLIENT_INFO: Final = {"name": "trio-mcp-modern-tests", "version": "0"}

#: Which params field each method's Mcp-Name header mirrors.
_NAME_FIELD: Final = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    # The tasks extension's requests name their task (spec/tasks.md TK-HEADERS).
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}

HeaderList = Sequence[tuple[str, str]]


def modern_meta(
    *,
    capabilities: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    version: str = MODERN,
    client_info: Mapping[str, Any] | None = CLIENT_INFO,
    **extra: Any,
) -> dict[str, Any]:
    """A request's ``_meta``: protocol version, client info and capabilities (empty by
    default), and the optional log level and progress token."""
    meta: dict[str, Any] = {
        META_VERSION: version,
        META_CAPS: dict(capabilities or {}),
    }
    if client_info is not None:
        meta[META_INFO] = dict(client_info)
    if log_level is not None:
        meta[META_LEVEL] = log_level
    if progress_token is not None:
        meta["progressToken"] = progress_token
    meta.update(extra)
    return meta


def modern_request(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    id: str | int | None = None,
    capabilities: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    version: str = MODERN,
) -> dict[str, Any]:
    """A JSON-RPC request with the modern envelope in ``params._meta`` (a fresh integer id
    unless given). A ``_meta`` already in ``params`` is merged over the envelope."""
    body = dict(params or {})
    meta = modern_meta(
        capabilities=capabilities,
        log_level=log_level,
        progress_token=progress_token,
        version=version,
    )
    meta.update(body.pop("_meta", None) or {})
    body["_meta"] = meta
    return rpc_request(method, body, id=id)


def modern_notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC notification with the modern envelope."""
    body = dict(params or {})
    body["_meta"] = {**modern_meta(), **(body.pop("_meta", None) or {})}
    return {"jsonrpc": "2.0", "method": method, "params": body}


def b64_header(text: str) -> str:
    """The ``=?base64?…?=`` form of a header value (standard, padded Base64 of UTF-8)."""
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


def modern_headers(
    message: Mapping[str, Any],
    *,
    extra: HeaderList = (),
    version: str = MODERN,
) -> list[tuple[str, str]]:
    """The headers a conforming modern client sends with ``message``: Accept and
    Content-Type, MCP-Protocol-Version, Mcp-Method, and Mcp-Name (raw) for the methods that
    name something. ``extra`` adds headers, or replaces one of these (case-insensitively);
    to leave one out, filter the list this returns."""
    headers = [
        ("accept", POST_ACCEPT),
        ("content-type", "application/json"),
        ("mcp-protocol-version", version),
    ]
    method = message.get("method")
    if isinstance(method, str):
        headers.append(("mcp-method", method))
        field = _NAME_FIELD.get(method)
        value = (message.get("params") or {}).get(field) if field else None
        if isinstance(value, str):
            headers.append(("mcp-name", value))
    replaced = {k.lower() for k, _ in extra}
    return [h for h in headers if h[0] not in replaced] + list(extra)


async def post(
    url: str,
    message: Any,
    *,
    headers: HeaderList | None = None,
    extra: HeaderList = (),
) -> Response:
    """POST one message with the modern headers (``headers`` replaces them all) and read the
    whole response."""
    if headers is None:
        headers = modern_headers(message, extra=extra)
    return await request(url, "POST", headers, dumps(message))


@contextlib.asynccontextmanager
async def open_modern(
    url: str,
    message: Mapping[str, Any],
    *,
    extra: HeaderList = (),
) -> AsyncIterator[SSEStream]:
    """POST one modern request and yield its response as it arrives (JSON or SSE); the
    connection is dropped on exit, wherever the response is."""
    async with open_stream(url, "POST", modern_headers(message, extra=extra), dumps(message)) as s:
        yield s


@contextlib.asynccontextmanager
async def open_raw(
    url: str, message: Mapping[str, Any], *, extra: HeaderList = ()
) -> AsyncIterator[trio.SocketStream]:
    """POST one modern request on a new TCP connection and yield the bare socket, the
    response unread: for tests that half-close the connection (``send_eof()``, which the
    server takes as the client leaving) and then read every byte the server still writes."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    body = dumps(message)
    head = [f"POST {parts.path} HTTP/1.1", f"host: {host}:{port}", f"content-length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in modern_headers(message, extra=extra)]
    sock = await trio.open_tcp_stream(host, port)
    try:
        await sock.send_all(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        yield sock
    finally:
        with trio.CancelScope(shield=True):
            await sock.aclose()


async def read_until(sock: trio.SocketStream, got: bytearray, marker: bytes) -> None:
    """Read from ``sock`` into ``got`` until ``marker`` is in it (EOFError at the end)."""
    while marker not in got:
        chunk = await sock.receive_some(65536)
        if not chunk:
            raise EOFError(f"the connection ended before {marker!r}: {bytes(got)!r}")
        got += chunk


async def read_to_eof(sock: trio.SocketStream) -> bytes:
    """Everything the server writes until it closes the connection."""
    chunks = []
    try:
        while chunk := await sock.receive_some(65536):
            chunks.append(chunk)
    except trio.BrokenResourceError:
        pass  # a reset: the server closed with data unread, which is an end too
    return b"".join(chunks)


def call_tool(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    id: str | int | None = None,
    capabilities: Mapping[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    **params: Any,
) -> dict[str, Any]:
    """A modern tools/call request (``params`` adds fields such as requestState)."""
    body: dict[str, Any] = {"name": name, "arguments": dict(arguments or {}), **params}
    return modern_request(
        "tools/call",
        body,
        id=id,
        capabilities=capabilities,
        log_level=log_level,
        progress_token=progress_token,
    )


def raw_events(body: bytes) -> list[list[str]]:
    """The SSE body split into its events, each the list of its raw lines (comments
    included), so a test can see every field the server wrote."""
    text = body.decode("utf-8").replace("\r\n", "\n")
    return [block.split("\n") for block in text.split("\n\n") if block.strip("\n")]


def messages_of(response: Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a modern answer: its JSON body, or its SSE events' data."""
    if response.content_type == "application/json":
        decoded = response.json()
        return decoded if isinstance(decoded, list) else [decoded]
    assert response.content_type == "text/event-stream", response.headers
    return [json.loads(e.data) for e in response.events() if e.data]
