# Relaying a request to the worker that holds what it names (TM-STORE-STREAMS,
# TM-STORE-TASKS). A stream's log lives in the worker that opened it, and a task in the
# worker that runs it; a client's GET with a Last-Event-ID that names another worker, or a
# tasks/* request for a task another worker runs, is passed to that worker's relay port as
# the client sent it, and the answer comes back byte for byte: the holder answers exactly
# as it would answer the client itself (a stream re-attached strictly after the cursor,
# exactly once, then live). This worker only carries bytes, at the pace its client takes
# them.
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import h11
import trio

from ..protocol import HttpRequest, Reply
from ._responder import Responder, watching_disconnect

__all__ = ["RELAYED_HEADER", "relay"]

logger = logging.getLogger("trio_mcp.relay")

#: Marks a request one worker relayed to another: it is never relayed again, so that a
#: stale address (a port now used by another process) cannot make a loop.
RELAYED_HEADER = "trio-mcp-relayed"
#: Headers that belong to one connection, not to the request (RFC 9110 §7.6.1).
_HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"content-length",
})
#: The most a relayed answer that is not a stream may hold (an error body).
_MAX_REPLY = 64 * 1024


def _response_headers(raw: Sequence[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in raw if k.lower() not in _HOP_BY_HOP
    ]


async def relay(
    address: str,
    request: HttpRequest,
    responder: Responder,
    *,
    connect_timeout: float,
    write_timeout: float,
    on_answer: Callable[[], None] = lambda: None,
) -> bool:
    """Pass ``request`` (a resume's GET, or a tasks/* POST) to the worker listening at
    ``address`` ("host:port") and
    its answer to ``responder``. False, having sent nothing, when that worker cannot be
    reached; True once an answer began (it may then end early, when either side goes), as
    ``on_answer`` is told when it does."""
    host, _, port = address.rpartition(":")
    try:
        with trio.fail_after(connect_timeout):
            upstream = await trio.open_tcp_stream(host, int(port))
    except (OSError, ValueError, trio.TooSlowError):
        return False
    async with upstream:
        conn = h11.Connection(h11.CLIENT)
        headers = [(k, v) for k, v in request.headers.raw if k.lower() not in _HOP_BY_HOP]
        headers += [(RELAYED_HEADER.encode(), b"1"), (b"connection", b"close")]
        if request.body:
            headers.append((b"content-length", str(len(request.body)).encode()))
        if not any(k.lower() == b"host" for k, _ in headers):
            headers.append((b"host", address.encode()))
        try:
            head = h11.Request(method=request.method, target=request.path, headers=headers)
            await upstream.send_all(
                (conn.send(head) or b"")
                + ((conn.send(h11.Data(data=request.body)) or b"") if request.body else b"")
                + (conn.send(h11.EndOfMessage()) or b"")
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        with trio.CancelScope() as scope:
            async with watching_disconnect(responder, scope.cancel):
                return await _carry(conn, upstream, responder, write_timeout, on_answer)
        return True  # the client left: nothing more to carry


async def _next(conn: h11.Connection, upstream: trio.SocketStream) -> object:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            data = await upstream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        conn.receive_data(data)


async def _carry(
    conn: h11.Connection,
    upstream: trio.SocketStream,
    responder: Responder,
    write_timeout: float,
    on_answer: Callable[[], None],
) -> bool:
    try:
        head = await _next(conn, upstream)
    except h11.RemoteProtocolError:
        return False
    if not isinstance(head, h11.Response):
        return False
    on_answer()
    headers = _response_headers(head.headers)
    streaming = any(
        k.lower() == "content-type" and v.startswith("text/event-stream") for k, v in headers
    )
    if not streaming:
        body = bytearray()
        while isinstance(event := await _next(conn, upstream), h11.Data):
            body += event.data
            if len(body) > _MAX_REPLY:
                return False
        await responder.reply(Reply(status=head.status_code, headers=tuple(headers),
                                    body=bytes(body)))
        return True
    await responder.start_stream(head.status_code, headers)
    while True:
        try:
            event = await _next(conn, upstream)
        except h11.RemoteProtocolError:
            break  # the holder went mid-stream: the client's stream ends, to be resumed
        if not isinstance(event, h11.Data):
            break
        # A client that takes nothing for this long is let go, as the holder's own stall
        # judgement would (TM-BP-STALL); the holder keeps the stream for a resume.
        with trio.move_on_after(write_timeout):
            await responder.write(bytes(event.data))
            continue
        logger.info("relayed stream: the client took nothing for %.0f s; cut", write_timeout)
        return True
    await responder.end()
    return True
