# A small HTTP/1.1 client on trio and h11, for the few requests the server makes itself: an
# authorization server's JWKS and its token introspection (T-AUTH-VALIDATE). One request per
# connection, bounded in time and size, never blocking the event loop.
from __future__ import annotations

import ssl
from collections.abc import Sequence
from urllib.parse import urlsplit

import attrs
import h11
import trio

__all__ = ["FetchError", "Fetched", "fetch"]

#: The largest response body read: a JWKS or an introspection answer is a few KiB.
MAX_BODY = 1024 * 1024


class FetchError(Exception):
    """The request failed: no connection, a timeout, a malformed or oversized answer."""


@attrs.frozen
class Fetched:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


async def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
) -> Fetched:
    """Make one request to ``url`` (http or https) and read the whole answer.

    Raises:
        FetchError: for anything but a complete HTTP answer within ``timeout``.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request_headers = [("host", parts.netloc), ("connection", "close"), *headers]
    if body or method != "GET":
        request_headers.append(("content-length", str(len(body))))
    try:
        with trio.fail_after(timeout):
            stream: trio.abc.Stream = await trio.open_tcp_stream(parts.hostname, port)
            if parts.scheme == "https":
                stream = trio.SSLStream(
                    stream,
                    ssl_context or ssl.create_default_context(),
                    server_hostname=parts.hostname,
                    https_compatible=True,
                )
            async with stream:
                return await _exchange(stream, method, target, request_headers, body)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, h11.ProtocolError) as exc:
        raise FetchError(f"{method} {url}: {exc!r}") from exc


async def _exchange(
    stream: trio.abc.Stream,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
) -> Fetched:
    conn = h11.Connection(h11.CLIENT)
    out = conn.send(h11.Request(method=method, target=target, headers=headers))
    out += conn.send(h11.Data(data=body)) if body else b""
    out += conn.send(h11.EndOfMessage())
    await stream.send_all(out)
    response: h11.Response | None = None
    chunks: list[bytes] = []
    size = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(bytes(await stream.receive_some(65536)))
        elif isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > MAX_BODY:
                raise FetchError(f"answer larger than {MAX_BODY} bytes")
            chunks.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            break
    if response is None:
        raise FetchError("no response")
    return Fetched(
        status=response.status_code,
        headers=tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers),
        body=b"".join(chunks),
    )
