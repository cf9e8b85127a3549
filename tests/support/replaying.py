"""A small 2025-11-25 server on trio and h11 that misbehaves on purpose, for the client's tests
(tests/client/): a tool call's answer is a stream of ``events`` progress notifications and
then the response, each event with an id, and the server drops the connection after the
counts of ``drops`` (one per connection). How it answers a resume (GET with Last-Event-ID) is
its ``resume`` mode: ``replay`` sends the whole stream again from its start (the events the
client has included, as a server without an event store's cursor handling may), ``correct``
sends what follows the cursor, ``empty`` answers with an empty stream, ``gap`` says the
events are lost (a ``resumption-failed`` event and a -31001 answer, as trio-mcp does),
``refuse`` answers 404, and ``window`` is the Python SDK's server 2.3.0: what follows the
cursor, two events of it, then a priming event, then the rest without the next ``window``
events (stored between its replay and its live tail, sent neither way); a second resume
reads its "store", every event after its cursor, and ends (409 with ``catch_up="refuse"``,
as a server that allows one connection a stream answers; with ``"prime"`` it starts with
a priming event of its own). A notifications/cancelled it
receives is kept in ``cancelled``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import h11
import trio
import trio.lowlevel

__all__ = ["Replaying", "serve_replaying"]


@attrs.define
class Replaying:
    events: int = 40
    drops: Sequence[int] = (17,)
    resume: str = "replay"
    retry_ms: int = 0
    with_ids: bool = True
    #: After this many events of the call's POST stream, a `resumption-required` signal (a
    #: stall cut, TM-BP-STALL) and then nothing, the connection left open.
    signal_after: int | None = None
    #: Server requests (ping) sent on the call's stream before its response, and how many
    #: of their answers came back.
    asks: int = 0
    answered: int = 0
    #: An event of this many bytes of data sent after the first progress (and on a resume).
    huge: int = 0
    #: ``window`` mode: how many events the first resume withholds, and how a second
    #: resume is answered ("serve" or "refuse").
    window: int = 3
    catch_up: str = "serve"
    #: Speak 2026-07-28: server/discover lists it, and the call's stream has no ids.
    modern: bool = False
    url: str = ""
    resumes: list[str] = attrs.field(factory=list)
    cancelled: list[Any] = attrs.field(factory=list)
    #: The request id and progress token of the tool call being served.
    call: tuple[Any, Any] = (None, None)
    connections: int = 0

    def stream(self) -> list[bytes]:
        """The call's events, in order: progress 1..events, then the response."""
        request_id, token = self.call
        out = []
        for i in range(self.asks):
            ask = {"jsonrpc": "2.0", "id": f"ask-{i}", "method": "ping"}
            out.append(("data: " + json.dumps(ask) + "\n\n").encode())
        for i in range(1, self.events + 1):
            message = {"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": token, "progress": i, "total": self.events}}
            out.append(self._event(i, message))
        if self.huge:  # after the first progress: a resume point comes before it
            out.insert(1, b"data: " + b"x" * self.huge + b"\n\n")
        response = {"jsonrpc": "2.0", "id": request_id,
                    "result": {"content": [{"type": "text", "text": "done"}]}}
        out.append(self._event(self.events + 1, response))
        return out

    def _event(self, n: int, message: Any) -> bytes:
        head = f"id: e{n}\n" if self.with_ids else ""
        if n == 1:
            head += f"retry: {self.retry_ms}\n"
        return (head + "data: " + json.dumps(message) + "\n\n").encode()


async def _send(conn: h11.Connection, stream: trio.SocketStream, *events: Any) -> None:
    for event in events:
        data = conn.send(event)
        if data:
            await stream.send_all(data)


async def _read_request(conn: h11.Connection, stream: trio.SocketStream) -> tuple[Any, bytes]:
    request = None
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return request, body
        elif isinstance(event, h11.ConnectionClosed):
            raise trio.EndOfChannel


async def _json(conn: h11.Connection, stream: trio.SocketStream, status: int, body: Any,
                extra: Sequence[tuple[str, str]] = ()) -> None:
    data = json.dumps(body).encode() if body is not None else b""
    headers = [("content-type", "application/json"), ("content-length", str(len(data))),
               *extra]
    await _send(conn, stream, h11.Response(status_code=status, headers=headers),
                h11.Data(data=data), h11.EndOfMessage())


async def _sse(conn: h11.Connection, stream: trio.SocketStream, events: Sequence[bytes],
               *, cut: bool, hold: bool = False) -> None:
    await _send(conn, stream, h11.Response(status_code=200, headers=[
        ("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]))
    for event in events:
        await _send(conn, stream, h11.Data(data=event))
        await trio.lowlevel.checkpoint()
    if hold:  # the connection stays open, silent, until the client leaves
        while await stream.receive_some(1024):
            pass
        raise trio.EndOfChannel
    if cut:
        await stream.aclose()  # mid-body: the client sees the stream drop
        return
    await _send(conn, stream, h11.EndOfMessage())


async def _connection(state: Replaying, stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            request, body = await _read_request(conn, stream)
            await _answer(state, conn, stream, request, body)
            if conn.our_state is h11.MUST_CLOSE or stream.socket.fileno() < 0:
                return
            conn.start_next_cycle()
    except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError,
            h11.RemoteProtocolError, h11.LocalProtocolError):
        return
    finally:
        await stream.aclose()


async def _answer(state: Replaying, conn: h11.Connection, stream: trio.SocketStream,
                  request: Any, body: bytes) -> None:
    headers = {k.decode().lower(): v.decode() for k, v in request.headers}
    if request.method == b"GET":
        last = headers.get("last-event-id")
        if last is None:
            await _sse(conn, stream, [], cut=False)
            return
        state.resumes.append(last)
        drop_index = len(state.resumes)
        full = state.stream()
        cut_at = state.drops[drop_index] if drop_index < len(state.drops) else None
        if state.resume == "refuse":
            await _json(conn, stream, 404, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "no such stream"}})
            return
        if state.resume == "empty":
            await _sse(conn, stream, [], cut=False)
            return
        if state.resume == "gap":
            lost = {"jsonrpc": "2.0", "id": state.call[0],
                    "error": {"code": -31001, "message": "Resumption failed"}}
            await _sse(conn, stream, [b"event: resumption-failed\ndata: {}\n\n",
                                      ("data: " + json.dumps(lost) + "\n\n").encode()],
                       cut=False)
            return
        if state.resume == "window":
            after = int(last.removeprefix("e"))
            if len(state.resumes) > 1:
                if state.catch_up == "refuse":
                    await _json(conn, stream, 409, {"jsonrpc": "2.0", "id": None, "error": {
                        "code": -32600, "message": "the stream has a connection"}})
                    return
                primed = [f"id: p{len(state.resumes)}\ndata: \n\n".encode()]
                await _sse(conn, stream,
                           [*(primed if state.catch_up == "prime" else []), *full[after:]],
                           cut=False)
                return
            priming = f"id: p{len(state.resumes)}\ndata: \n\n".encode()
            await _sse(conn, stream, [*full[after:after + 2], priming,
                                      *full[after + 2 + state.window:]], cut=False)
            return
        events = full
        if state.resume == "correct":
            after = int(last.removeprefix("e"))
            events = full[after:]
        if cut_at is not None:
            await _sse(conn, stream, events[:cut_at], cut=True)
        else:
            await _sse(conn, stream, events, cut=False)
        return
    if request.method != b"POST":  # DELETE: the session ends
        await _json(conn, stream, 200, None)
        return
    message = json.loads(body)
    method = message.get("method")
    if method == "initialize":
        await _json(conn, stream, 200, {"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "replaying", "version": "0"}}},
            [("mcp-session-id", "replaying-session")])
        return
    if method is None and "result" in message:
        state.answered += 1
        await _json(conn, stream, 202, None)
        return
    if "id" not in message or method is None:
        if method == "notifications/cancelled":
            state.cancelled.append(message["params"].get("requestId"))
        await _json(conn, stream, 202, None)
        return
    if method == "tools/call":
        if state.modern:
            state.with_ids = False
        token = message["params"].get("_meta", {}).get("progressToken")
        state.call = (message["id"], token)
        cut_at = state.drops[0] if state.drops else None
        full = state.stream()
        if state.signal_after is not None:
            signal = (f'event: resumption-required\ndata: {{"lastEventId": '
                      f'"e{state.signal_after}"}}\n\n').encode()
            await _sse(conn, stream, [*full[:state.signal_after], signal], cut=False,
                       hold=True)
            return
        await _sse(conn, stream, full if cut_at is None else full[:cut_at],
                   cut=cut_at is not None)
        return
    if method == "server/discover":
        if state.modern:
            await _json(conn, stream, 200, {"jsonrpc": "2.0", "id": message["id"], "result": {
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"}})
            return
        await _json(conn, stream, 400, {"jsonrpc": "2.0", "id": message["id"], "error": {
            "code": -32600, "message": "Bad Request: no session"}})
        return
    result: dict[str, Any] = {}
    if method == "tools/list":
        result = {"tools": [{"name": "count", "inputSchema": {"type": "object"}}]}
    await _json(conn, stream, 200, {"jsonrpc": "2.0", "id": message["id"], "result": result})


async def serve_replaying(
    state: Replaying, *, task_status: trio.TaskStatus[Replaying] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve ``state`` on 127.0.0.1 (a free port; ``state.url`` says which) until cancelled."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    state.url = f"http://127.0.0.1:{port}/mcp"

    async def handle(stream: trio.SocketStream) -> None:
        state.connections += 1
        await _connection(state, stream)

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handle, listeners)
        task_status.started(state)
