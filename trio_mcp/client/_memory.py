# Client(server): an HTTP transport for httpx2 that drives a server's ASGI application in
# this process, with no socket. httpx2's own ASGITransport reads the whole response before
# it returns one, which would hold an SSE stream (a progress callback, a listen) until its
# end; this one hands each body piece over as the application sends it, and tells the
# application the client left (http.disconnect) when the response is closed, so
# cancellation, resumption and backpressure take the same paths in the runtime as over HTTP.
from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from typing import Any, Final

import httpx2
import trio

__all__ = ["PIECES_HELD", "MemoryTransport"]

#: Body pieces the application may have written ahead of the client's reading.
PIECES_HELD: Final = 64



class _Exchange:
    """One request's way through the application: its body in, its response out."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body
        self.left = trio.Event()
        self.started = trio.Event()
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        # Bounded: a client that reads slowly holds the application's writes back, as a
        # socket's buffers would, and the runtime's judges see a slow reader (TM-BP-STALL).
        self._send_pieces, self.pieces = trio.open_memory_channel[bytes](PIECES_HELD)

    async def receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if self.left.is_set():
            raise trio.BrokenResourceError("the client closed the response")
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = list(message.get("headers", []))
            self.started.set()
        elif message["type"] == "http.response.body":
            body = bytes(message.get("body", b""))
            if body:
                try:
                    await self._send_pieces.send(body)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    raise trio.BrokenResourceError("the client closed the response") from None
            if not message.get("more_body", False):
                self.finish()

    def finish(self) -> None:
        """The application is done with this exchange (sent its end, or returned)."""
        self.started.set()
        self._send_pieces.close()


class _Body(httpx2.AsyncByteStream):
    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._exchange.pieces:
            yield piece

    async def aclose(self) -> None:
        self._exchange.left.set()
        self._exchange.pieces.close()


class MemoryTransport(httpx2.AsyncBaseTransport):
    """Serves httpx2 requests by calling ``app`` (an ASGI 3 application) in ``nursery``."""

    def __init__(self, app: Any, nursery: trio.Nursery) -> None:
        self._app = app
        self._nursery = nursery

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        exchange = _Exchange(body)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": None,
            "client": None,
        }

        async def run() -> None:
            try:
                await self._app(scope, exchange.receive, exchange.send)
            finally:
                exchange.finish()

        self._nursery.start_soon(run)
        try:
            await exchange.started.wait()
        except BaseException:
            exchange.left.set()
            raise
        return httpx2.Response(exchange.status, headers=exchange.headers, stream=_Body(exchange))
