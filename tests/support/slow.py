# Slow and stalled readers for the backpressure tests (tests/backpressure/), in memory and
# over loopback.
#
# In memory: `PacedResponder` is a Responder whose reader drains `rate` bytes per second
# through a pipe of `buffer` bytes (what the kernel's socket buffers hold), and whose
# write() cannot be cancelled, like hypercorn's: it returns once its bytes are in the pipe,
# or when the connection is closed (and then, like hypercorn's, without an error).
# `MemoryServer` runs a runtime's legacy sessions and hands them HTTP requests with such
# responders, so the whole runtime (session, view, writer) runs under trio's MockClock.
#
# Over loopback: `SlowClient` is a raw trio socket with a small SO_RCVBUF that sends one
# HTTP request and reads the response at a given rate, or not at all, decoding SSE as it
# goes.
#
# `make_server()` builds the test server both use: a `stream` tool that sends numbered
# notifications of a given size, and tools that wait, forever or for a while, recording
# what happened to them.
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
import struct
import termios
from collections.abc import AsyncIterator, Sequence
from typing import Any

import attrs
import h11
import trio

from support.client import POST_ACCEPT, rpc_request
from support.client import dumps as json_body
from support.fixtures import wait_until
from trio_mcp import Context, Server, ServerConfig
from trio_mcp.edges._asgi import ASGIApp
from trio_mcp.protocol import (
    LATEST_LEGACY_VERSION,
    Headers,
    HttpRequest,
    Reply,
    SSEDecoder,
    SSEEvent,
)
from trio_mcp.runtime._runtime import Runtime
from trio_mcp.runtime._stats import as_dict
from trio_mcp.runtime.backpressure._writer import ConnectionWriter
from trio_mcp.runtime.legacy._session import Session
from trio_mcp.runtime.legacy._table import SessionTable

__all__ = [
    "MemoryServer",
    "PacedResponder",
    "Record",
    "SlowClient",
    "make_server",
    "numbered",
    "open_slow",
    "request_writer",
    "tasks_named",
]


# -- the test server ------------------------------------------------------------------------


@attrs.define
class Record:
    """What the test server's tools did, by the ``tag`` each call was given."""

    started: dict[str, float] = attrs.Factory(dict)
    finished: dict[str, float] = attrs.Factory(dict)
    cancelled: dict[str, float] = attrs.Factory(dict)
    sent: dict[str, int] = attrs.Factory(dict)
    """How many notifications each ``stream`` call has appended so far."""
    sent_at: dict[str, list[float]] = attrs.Factory(dict)
    """When each of them was appended (the send returned)."""
    hook_cancelled: list[float] = attrs.Factory(list)


def make_server(name: str = "bp-tests") -> tuple[Server, Record]:
    """A server with tools whose progress the returned Record shows."""
    server = Server(name)
    record = Record()

    @server.tool()
    async def stream(
        ctx: Context,
        n: int,
        size: int = 2000,
        tag: str = "",
        delay: float = 0.0,
        timed: bool = False,
    ) -> str:
        """Send n numbered notifications of about size bytes, then return.

        Progress notifications when the call has a progress token, log messages otherwise.

        Args:
            n: how many notifications.
            size: padding bytes in each.
            tag: the name under which the Record keeps this call.
            delay: seconds between notifications.
            timed: keep the time of each send in the Record's sent_at.
        """
        record.started[tag] = trio.current_time()
        record.sent[tag] = 0
        record.sent_at[tag] = []
        pad = "x" * size
        try:
            for i in range(n):
                if ctx.progress_token is not None:
                    await ctx.report_progress(i + 1, n, f"{i}:{pad}")
                else:
                    await ctx.log("info", {"i": i, "pad": pad})
                record.sent[tag] = i + 1
                if timed:
                    record.sent_at[tag].append(trio.current_time())
                # No checkpoint of its own when delay is 0, like most tools: the sends are
                # the only awaits (and they must let other tasks run, TM-BP-PRODUCER).
                if delay:
                    await trio.sleep(delay)
        except trio.Cancelled:
            record.cancelled[tag] = trio.current_time()
            raise
        record.finished[tag] = trio.current_time()
        return f"sent {n}"

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged.

        Args:
            text: what to echo back.
        """
        return text

    @server.tool()
    async def wait(seconds: float = -1.0, tag: str = "") -> str:
        """Sleep for seconds (forever when negative), recording a cancellation.

        Args:
            seconds: how long; negative waits forever.
            tag: the name under which the Record keeps this call.
        """
        record.started[tag] = trio.current_time()
        try:
            if seconds < 0:
                await trio.sleep_forever()
            await trio.sleep(seconds)
        except trio.Cancelled:
            record.cancelled[tag] = trio.current_time()
            raise
        record.finished[tag] = trio.current_time()
        return "slept"

    @server.on_notification("notifications/initialized")
    async def linger(session: Any, params: Any) -> None:
        # A session task that is no request: it runs until the session ends.
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            record.hook_cancelled.append(trio.current_time())
            raise

    return server, record


def numbered(message: dict[str, Any]) -> int | None:
    """The number ``i`` carried by one of ``stream``'s notifications, else None."""
    params = message.get("params") or {}
    if message.get("method") == "notifications/message":
        data = params.get("data")
        if isinstance(data, dict) and isinstance(data.get("i"), int):
            return int(data["i"])
    if message.get("method") == "notifications/progress":
        text = params.get("message", "")
        head, sep, _ = text.partition(":")
        if sep and head.isdigit():
            return int(head)
    return None


async def request_writer(table: SessionTable, session_id: str) -> ConnectionWriter:
    """The writer of the session's one POST-stream connection (its GET stream is stream 0),
    once it exists."""
    views = table.sessions[session_id].views

    def writers() -> list[ConnectionWriter]:
        return [v.writer for s, v in views.items() if s != 0 and v.writer is not None]

    await wait_until(lambda: bool(writers()))
    [writer] = writers()
    return writer


def tasks_named(prefix: str) -> list[trio.lowlevel.Task]:
    """Every task in this trio run whose name starts with ``prefix``."""
    found: list[trio.lowlevel.Task] = []
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        if task.name.startswith(prefix):
            found.append(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


# -- in memory ------------------------------------------------------------------------------


class PacedResponder:
    """A Responder read by a client that drains ``rate`` bytes per second.

    ``rate`` None reads at once; 0 has stopped reading. The bytes go through a pipe of
    ``buffer`` bytes (at least one ``piece``), as through the kernel's socket buffers: a
    write returns when its last piece is in the pipe. With ``wake``, a write that found the
    pipe full waits until that fraction of it is free, as Linux wakes a writer blocked on a
    full socket only once a third of its send buffer is free: progress then comes in bursts,
    seconds apart for a slow reader. With ``period``, the reader reads in bursts: ``rate`` x
    ``period`` bytes at each multiple of ``period`` (of trio's clock), nothing between. Like
    hypercorn's, a write is shielded from cancellation, and it returns, without an error,
    once the connection is closed. Everything that entered the pipe reaches the client,
    which decodes it as SSE.
    """

    def __init__(
        self,
        rate: float | None = None,
        *,
        buffer: int = 0,
        piece: int = 256,
        wake: float = 0.0,
        period: float = 0.0,
    ) -> None:
        self.rate = rate
        self.period = period
        self.capacity = max(buffer, piece)
        self.piece = piece
        self.wake = wake
        self.disconnected = trio.Event()
        self.connection_closed = trio.Event()
        self.reply_: Reply | None = None
        self.status: int | None = None
        self.headers: tuple[tuple[str, str], ...] = ()
        self.ended = False
        """Whether the server finished the response (rather than the connection closing)."""
        self.body = bytearray()
        self.events: list[tuple[float, SSEEvent]] = []
        """(arrival time, event) of every complete SSE event (comments included)."""
        self.started = trio.Event()
        self._decoder = SSEDecoder()
        self._unread = 0.0
        self._checked = 0.0
        self._rate_changed = trio.Event()

    # -- the test's side --------------------------------------------------------------------

    def set_rate(self, rate: float | None) -> None:
        self._drain()
        self.rate = rate
        self._rate_changed.set()
        self._rate_changed = trio.Event()

    def client_leaves(self) -> None:
        """The client closes its connection (the ASGI adapter would see http.disconnect)."""
        self.disconnected.set()
        self.connection_closed.set()

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(e.data) for _, e in self.events if e.data and e.event is None]

    def named(self, name: str) -> list[SSEEvent]:
        return [e for _, e in self.events if e.event == name]

    def ids(self) -> list[str]:
        return [e.id for _, e in self.events if e.id]

    # -- the server's side (the Responder protocol) ------------------------------------------

    @property
    def finished(self) -> bool:
        return self.ended

    async def reply(self, reply: Reply) -> None:
        self.reply_ = reply
        self.status = reply.status
        self.headers = reply.headers
        self._receive(reply.body)
        self.ended = True
        self.started.set()

    async def start_stream(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        self.status = status
        self.headers = tuple(headers)
        self._checked = trio.current_time()
        self.started.set()

    async def write(self, data: bytes) -> None:
        with trio.CancelScope(shield=True):
            for start in range(0, len(data), self.piece):
                piece = data[start : start + self.piece]
                if not await self._room_for(len(piece)):
                    return
                self._unread += len(piece)
                self._receive(piece)

    async def end(self) -> None:
        self.ended = True

    # -- the pipe ------------------------------------------------------------------------------

    def _drain(self) -> None:
        now = trio.current_time()
        if self.rate is None:
            self._unread = 0.0
        elif self.rate > 0 and self.period:
            ticks = math.floor(now / self.period) - math.floor(self._checked / self.period)
            self._unread = max(0.0, self._unread - self.rate * self.period * ticks)
        elif self.rate > 0:
            self._unread = max(0.0, self._unread - self.rate * (now - self._checked))
        self._checked = now

    async def _room_for(self, n: int) -> bool:
        """Wait until ``n`` more bytes fit in the pipe; False if the connection closed."""
        blocked = False
        while True:
            if self.connection_closed.is_set():
                return False
            self._drain()
            free_needed = max(n, self.wake * self.capacity) if blocked else n
            excess = self._unread + free_needed - self.capacity
            if excess <= 1e-9:
                return True
            blocked = True
            excess = self._unread + max(n, self.wake * self.capacity) - self.capacity
            rate_changed = self._rate_changed
            wait = excess / self.rate if self.rate else float("inf")
            if self.rate and self.period:
                # Until the burst that frees enough.
                now = trio.current_time()
                bursts = math.ceil(excess / (self.rate * self.period))
                wait = (math.floor(now / self.period) + bursts) * self.period - now
            with trio.move_on_after(wait):
                await _either(self.connection_closed, rate_changed)

    def _receive(self, data: bytes) -> None:
        self.body += data
        now = trio.current_time()
        self.events.extend((now, e) for e in self._decoder.feed(bytes(data)))


async def _either(a: trio.Event, b: trio.Event) -> None:
    async with trio.open_nursery() as nursery:

        async def watch(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch, a)
        nursery.start_soon(watch, b)


class MemoryServer:
    """A runtime's legacy sessions fed HTTP requests in memory (no ASGI, no sockets)."""

    def __init__(self, app: ASGIApp, nursery: trio.Nursery) -> None:
        self.app = app
        self.table: SessionTable = app.table
        self.config: ServerConfig = app.config
        self._nursery = nursery
        self.protocol_version = LATEST_LEGACY_VERSION

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, server: Server, config: ServerConfig) -> AsyncIterator[MemoryServer]:
        app = ASGIApp(server, config, bind_hosts=["127.0.0.1"])
        async with app.running(), trio.open_nursery() as nursery:
            yield cls(app, nursery)
            nursery.cancel_scope.cancel()

    def session(self, session_id: str) -> Session:
        return self.table.sessions[session_id]

    def stats(self) -> dict[str, int | float]:
        """The counters of TM-BP-COUNTERS by their names (what the stats port serves)."""
        return as_dict(self.app.runtime.statistics())

    @property
    def runtime(self) -> Runtime:
        return self.app.runtime

    def headers(
        self, session_id: str | None, *, method: str = "POST", extra: Sequence[tuple[str, str]] = ()
    ) -> list[tuple[str, str]]:
        accept = POST_ACCEPT if method == "POST" else "text/event-stream"
        headers = [("host", "127.0.0.1:8000"), ("accept", accept)]
        if method == "POST":
            headers.append(("content-type", "application/json"))
        if session_id is not None:
            headers += [
                ("mcp-session-id", session_id),
                ("mcp-protocol-version", self.protocol_version),
            ]
        return headers + list(extra)

    def send(
        self,
        method: str,
        headers: Sequence[tuple[str, str]],
        body: bytes = b"",
        responder: PacedResponder | None = None,
        *,
        peer_host: str | None = None,
    ) -> PacedResponder:
        """Start one HTTP exchange in the background (from ``peer_host``, if given); its
        responder shows the answer.

        When the runtime returns from the request, the connection is closed, as hypercorn
        does with a response the application left unfinished.
        """
        responder = responder if responder is not None else PacedResponder()
        request = HttpRequest(
            method=method,
            path=self.config.path,
            headers=Headers([(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]),
            body=body,
            local_host="127.0.0.1",
            peer_host=peer_host,
        )

        async def exchange() -> None:
            try:
                await self.app.runtime.handle(request, responder)
            finally:
                responder.connection_closed.set()

        self._nursery.start_soon(exchange)
        return responder

    def post(
        self,
        session_id: str | None,
        message: Any,
        responder: PacedResponder | None = None,
        *,
        peer_host: str | None = None,
    ) -> PacedResponder:
        return self.send(
            "POST", self.headers(session_id), json_body(message), responder, peer_host=peer_host
        )

    def get(
        self,
        session_id: str,
        last_event_id: str | None = None,
        responder: PacedResponder | None = None,
    ) -> PacedResponder:
        extra = [("last-event-id", last_event_id)] if last_event_id is not None else []
        return self.send("GET", self.headers(session_id, method="GET", extra=extra), b"", responder)

    async def complete(
        self, session_id: str | None, message: Any, *, peer_host: str | None = None
    ) -> tuple[PacedResponder, list[dict[str, Any]]]:
        """POST and wait for the whole response (a fast reader)."""
        responder = self.post(session_id, message, peer_host=peer_host)
        await responder.connection_closed.wait()
        return responder, responder.messages()

    async def complete_delete(self, session_id: str) -> tuple[PacedResponder, None]:
        """DELETE the session and wait for the answer."""
        responder = self.send("DELETE", self.headers(session_id, method="DELETE"))
        await responder.connection_closed.wait()
        return responder, None

    async def initialize(
        self, *, initialized: bool = True, peer_host: str | None = None
    ) -> str:
        params = {
            "protocolVersion": self.protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "bp-tests", "version": "0"},
        }
        responder, messages = await self.complete(
            None, rpc_request("initialize", params), peer_host=peer_host
        )
        assert 200 == responder.status, responder.reply_
        session_id = dict(responder.headers).get("mcp-session-id")
        assert session_id, responder.headers
        assert "result" in messages[-1], messages
        if initialized:
            ack, _ = await self.complete(
                session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
            assert 202 == ack.status
        return session_id

    def call(
        self,
        session_id: str,
        tool: str,
        arguments: dict[str, Any],
        responder: PacedResponder | None = None,
        *,
        progress: bool = False,
    ) -> tuple[PacedResponder, dict[str, Any]]:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if progress:
            params["_meta"] = {"progressToken": "p"}
        message = rpc_request("tools/call", params)
        return self.post(session_id, message, responder), message


# -- over loopback ----------------------------------------------------------------------------


class _Pace:
    """``rate`` bytes a second, counted from the first bytes taken: after ``took(n)``, the
    reader waits until the time at which all it took so far was due (at once when behind)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.start: float | None = None
        self.taken = 0

    async def took(self, nbytes: int) -> None:
        if self.rate is None or not nbytes:
            return
        if self.start is None:
            self.start = trio.current_time()
        self.taken += nbytes
        await trio.sleep_until(self.start + self.taken / self.rate)


class SlowClient:
    """One HTTP/1.1 exchange on a raw socket whose reader is slow on purpose.

    ``rcvbuf`` is set before connecting, so the TCP window stays small and the server's
    writes block as soon as the kernel's buffers are full. ``read(rate)`` takes at most
    ``rate`` bytes per second; not calling it is a reader that stopped.
    """

    def __init__(self, sock: trio.socket.SocketType, conn: h11.Connection) -> None:
        self._sock = sock
        self._conn = conn
        self._decoder = SSEDecoder()
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.events: list[tuple[float, SSEEvent]] = []
        self.received = 0
        self.eof = False
        self.reset = False
        self.ended = False
        """Whether the server finished the response properly (not just closed)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(e.data) for _, e in self.events if e.data and e.event is None]

    def named(self, name: str) -> list[SSEEvent]:
        return [e for _, e in self.events if e.event == name]

    @property
    def last_id(self) -> str | None:
        ids = [e.id for _, e in self.events if e.id]
        return ids[-1] if ids else None

    async def _recv(self, n: int) -> bytes:
        """Up to ``n`` bytes, with no checkpoint between taking them from the kernel and
        returning them, so that a caller that counts them at once (``_feed``) never lets
        another task see them gone from ``unread()`` and not yet in ``received``. trio's
        ``recv`` checkpoints after a receive that succeeds at once: a task that looked
        then saw the two short by what was in hand, a whole read."""
        fd = self._sock.fileno()
        while True:
            await trio.lowlevel.wait_readable(self._sock)
            try:
                data = os.read(fd, n)
            except BlockingIOError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                self.reset = True
                data = b""
            break
        if not data:
            self.eof = True
        return data

    def unread(self) -> int:
        """What the client's kernel holds for it that it has not read (SIOCINQ)."""
        raw = fcntl.ioctl(self._sock.fileno(), termios.FIONREAD, struct.pack("i", 0))
        unread: int = struct.unpack("i", raw)[0]
        return unread

    def _feed(self, data: bytes) -> None:
        self.received += len(data)
        self._conn.receive_data(data)
        now = trio.current_time()
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError:
                # The connection closed in the middle of a chunk: what came is all there is.
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Response):
                self.status = event.status_code
                self.headers = {
                    k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers
                }
            elif isinstance(event, h11.Data):
                self.events.extend((now, e) for e in self._decoder.feed(bytes(event.data)))
            elif isinstance(event, h11.EndOfMessage):
                self.ended = True
            elif isinstance(event, h11.ConnectionClosed):
                return

    async def read_head(self) -> None:
        """Read until the response head has arrived (at full speed: it is small)."""
        while self.status is None and not self.eof:
            self._feed(await self._recv(4096))

    async def read(self, rate: float | None, *, until: trio.Event | None = None) -> None:
        """Read at ``rate`` bytes per second (None: as fast as it comes) until EOF, or until
        ``until`` is set.

        The pace is kept against the clock from the first read, not read by read: a reader
        whose sleeps ran late (this process waiting for a CPU on a loaded machine) catches
        up, so that over any stretch its rate is ``rate``, as the tests' premise says, and
        not whatever is left of it once the machine's delays are added to every sleep."""
        pace = _Pace(rate)
        while not self.eof and not (until is not None and until.is_set()):
            n = 65536 if rate is None else max(1, min(256, int(rate)))
            if until is None:
                data = await self._recv(n)
            else:
                data = b""
                with trio.move_on_after(0.05):
                    data = await self._recv(n)
                if not data and not self.eof:
                    continue
            self._feed(data)
            await pace.took(len(data))

    async def wait_for(self, predicate: Any, rate: float | None = None) -> None:
        """Read (at ``rate``, kept as ``read`` keeps it) until ``predicate(self)`` holds or
        the connection ends."""
        pace = _Pace(rate)
        while not predicate(self) and not self.eof:
            n = 65536 if rate is None else max(1, min(256, int(rate)))
            data = await self._recv(n)
            self._feed(data)
            await pace.took(len(data))

    def close(self) -> None:
        self._sock.close()


@contextlib.asynccontextmanager
async def open_slow(
    url_base: tuple[str, int],
    method: str,
    path: str,
    headers: Sequence[tuple[str, str]],
    body: bytes = b"",
    *,
    rcvbuf: int | None = 4096,
    maxseg: int | None = None,
) -> AsyncIterator[SlowClient]:
    """Connect with a small receive buffer (None: the kernel's default, autotuned) and send
    one request; closes on exit. ``maxseg`` clamps the segment size the client announces
    (TCP_MAXSEG), as a network path's MTU would; loopback's is about 64 KB."""
    host, port = url_base
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            # Before connect(): the window scale is fixed at the handshake.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if maxseg is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, maxseg)
        await sock.connect((host, port))
        conn = h11.Connection(our_role=h11.CLIENT)
        names = {k.lower() for k, _ in headers}
        all_headers = list(headers)
        if "host" not in names:
            all_headers.insert(0, ("host", f"{host}:{port}"))
        if body or method == "POST":
            all_headers.append(("content-length", str(len(body))))
        raw = conn.send(
            h11.Request(
                method=method,
                target=path,
                headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in all_headers],
            )
        ) or b""
        if body:
            raw += conn.send(h11.Data(data=body)) or b""
        raw += conn.send(h11.EndOfMessage()) or b""
        await _send_all(sock, raw)
        yield SlowClient(sock, conn)
    finally:
        sock.close()


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        sent = await sock.send(view)
        view = view[sent:]
