# trio-mcp's own HTTP/1.1 server: trio sockets, one task per connection and none per request
# (spec/transport.md TM-HTTP-OWN). It owns each connection: the runtime's writes to it are
# cancellable, the stall detector reads the kernel's figures from its socket directly, and a
# cut closes it at once. hypercorn remains the way to host the ASGI app (trio_mcp.edges._asgi).
#
# What the client sends is read by a maintained parser (trio_mcp.edges._h1, TM-HTTP-PARSER):
# httptools by default, h11 on request. What the server sends it frames itself
# (`_response_head`, `HttpResponder`): its own status lines and headers, a Content-Length or
# chunks. What the server decides about a request before the application sees it (the
# version, the framing, Origin and Host, the path, the declared size) is decided by
# trio_mcp.protocol._edge, as it is under hypercorn; this module carries it out.
#
# One connection's life: read a request head within the header deadline (or the idle
# deadline between keep-alive requests), plan it (protocol._edge.plan_head), answer
# `Expect: 100-continue`, read the body within the body deadline and the size limit, then
# serve it; keep the connection for the next request when both sides allow it, else end it,
# in stages when the client may still be sending (TM-HTTP-LINGER). The connection's own task
# reads the socket while nothing is being served. Once the runtime needs to hear of the
# client leaving while it serves (a stream, a request that waits), a reader task takes the
# reading over for the rest of the connection's life (`_Connection.watch`): a request
# answered at once costs no task and no hand-over.
#
# Every connection runs under a guard (`HttpServer._connection`, TM-SEC-ISOLATE): whatever it
# raises ends that connection, answered 400 if nothing was sent on it yet, and is logged
# (trio_mcp.runtime._failures); the server goes on.
from __future__ import annotations

import contextlib
import http
import logging
import re
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from email.utils import formatdate
from typing import TYPE_CHECKING, Final

import trio

from ..base._config import HttpParser
from ..protocol import Headers, HttpRequest, RemoteProtocolError, Reply
from ..protocol._edge import (
    LINGER_IDLE,
    Elsewhere,
    Refuse,
    body_too_slow,
    connections_busy,
    not_found,
    plan_head,
    too_large,
    unserved,
)
from ..protocol._transport import error_reply
from ..runtime._budget import bodies_busy
from ..runtime._failures import FailureLog
from ..runtime._pools import Pool
from ..runtime._runtime import Runtime
from ..runtime.backpressure._responder import Departure
from ..runtime.backpressure._tcpprobe import TcpProbe, TcpSample
from ._h1 import (
    BadRequest,
    Event,
    RequestHead,
    RequestReader,
    Signal,
    make_reader,
    resolve_parser,
)

if TYPE_CHECKING:
    from ..base._config import ServerConfig

__all__ = ["HttpResponder", "HttpServer"]

logger = logging.getLogger("trio_mcp.http")

#: What one read asks of the socket.
_READ_SIZE: Final = 65536
#: Bytes of a next, pipelined request buffered while a response goes out; beyond, the
#: connection stops reading until the response is done (so a client cannot make it hold more).
_PIPELINE_BUFFER: Final = 65536
#: What a stream's write adds to its data on the wire, at most: a chunk's size line and end,
#: and the headers of the TLS records around it (SendRoom).
_FRAMING_ROOM: Final = 256


class _Closed(Exception):
    """The connection is over: the client left, broke the protocol, or a deadline passed."""


class HttpResponder:
    """The Responder of one request on a connection this server owns (trio_mcp.runtime.
    _responder.Responder, with TcpProbing and on_disconnect). It frames what it sends itself:
    a reply with its Content-Length, a stream in chunks (to an HTTP/1.0 client, up to the
    connection's close), with ``connection: close`` when the connection ends after it."""

    def __init__(self, connection: _Connection, head: RequestHead) -> None:
        self._connection = connection
        self._departure = Departure()
        self.disconnected = self._departure.event
        self.started = False
        self.finished = False
        self._probing = True
        # RFC 9112 §9.3: HTTP/1.1 connections persist unless either side says close; no
        # HTTP/1.0 connection is kept alive.
        self.keep_alive = head.http_version == b"1.1" and not _says_close(head)
        self._chunked = head.http_version == b"1.1"
        self._bodyless = head.method == b"HEAD"

    # -- the client's leaving --------------------------------------------------------------

    def on_disconnect(self, callback: Callable[[], None]) -> None:
        self._departure.on(callback)
        if not self.disconnected.is_set():
            self._connection.watch()

    def gone(self) -> None:
        self._departure.happened()

    # -- the kernel's view of the reader (TcpProbing) ------------------------------------------

    def tcp_sample(self) -> TcpSample | None:
        """The kernel's figures for the connection's socket, read directly: the probe is
        made at the first sample of the connection's life, never for small answers."""
        if not self._probing:
            return None
        probe = self._connection.probe()
        return None if probe is None else probe.sample()

    def release_tcp_probe(self) -> None:
        self._probing = False

    def reset_on_close(self) -> bool:
        """Resettable (TM-BP-CLOSE): the connection's close, which follows a cut, resets it."""
        probe = self._connection.probe()
        return probe is not None and probe.reset_on_close()

    def send_room(self) -> int:
        """SendRoom: what the socket takes now, less what framing a chunk (and, under TLS,
        its records) adds."""
        probe = self._connection.probe()
        if probe is None:
            return 0
        return probe.room() - _FRAMING_ROOM

    # -- writing ---------------------------------------------------------------------------

    def _closing(self) -> bool:
        """Whether the connection ends with this response: the client asked it to, the plan
        said so (RFC 9112 §6.3), or the request was not read to its end (a request refused
        before its body)."""
        self.keep_alive = self.keep_alive and self._connection.request_read
        return not self.keep_alive

    async def _write(self, data: bytes, *, eager: bool = False) -> bool:
        try:
            await self._connection.write(data, eager=eager)
        except _Closed:
            self.gone()
            return False
        return True

    async def reply(self, reply: Reply) -> None:
        if self.started:
            return
        self.started = True
        status = reply.status
        # RFC 9110 §8.6: no Content-Length on a 204 (nor a body).
        length = None if status == 204 else len(reply.body)
        head = _response_head(status, reply.headers, length=length, close=self._closing())
        # One write for the whole answer: a system call each for head and body cost more
        # than the rest of a small answer's trip through this server.
        whole = head if self._bodyless or status == 204 else head + reply.body
        if await self._write(whole, eager=True):
            self.finished = True

    async def start_stream(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        self.started = True
        # A stream lasts: from now on the connection's reader notices the client leaving.
        self._connection.watch()
        if not self._chunked:
            self.keep_alive = False  # RFC 9112 §6.3: the body ends where the connection does
        head = _response_head(
            status, headers, chunked=self._chunked, close=self._closing()
        )
        await self._write(head)

    async def write(self, data: bytes) -> None:
        if self.finished or self.disconnected.is_set() or not data:
            return
        if self._chunked:
            data = b"%x\r\n%b\r\n" % (len(data), data)
        await self._write(data)

    async def end(self) -> None:
        if self.finished:
            return
        if self._chunked:
            await self._write(b"0\r\n\r\n")
        self.finished = True


class _Connection:
    """One accepted connection: its stream, the reader of its requests (trio_mcp.edges._h1), its
    socket, and (once started, ``watch``) the task that reads it, which feeds the reader and
    notices the client leaving at any time."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        config: ServerConfig,
        nursery: trio.Nursery,
        parser: HttpParser,
    ) -> None:
        self.stream = stream
        self.config = config
        self.reader: RequestReader = make_reader(
            parser, max_head=config.http_max_header_bytes, max_body=config.max_body_bytes
        )
        self._nursery = nursery
        self._send_lock = trio.StrictFIFOLock()
        self.closed = False
        #: Whether anything was written to the connection (the guard answers 400 only
        #: before that).
        self.sent = False
        #: The connection must end after the current response, whatever was read
        #: (a plan's Refuse(close=True): RFC 9112 §6.3).
        self.must_close = False
        self._probe: TcpProbe | None = None
        self._probed = False
        #: When the connection is between requests (a keep-alive idle): shutdown closes it.
        self.idle = True
        #: The request being served, told when the client leaves.
        self.responder: HttpResponder | None = None
        #: The client closed its side (or the connection broke): nothing more will arrive.
        self.eof = False
        #: Whether the reader task runs (``watch``): until it does, the connection's own
        #: task reads the socket when the reader needs more.
        self.reading = False
        #: Set by the reader task when it has fed the reader (or seen the end); replaced by
        #: whoever waits.
        self._arrived = trio.Event()
        #: Bytes fed to the reader since the serving side last ran out of them, and the
        #: event that lets a reader task paused at _PIPELINE_BUFFER go on.
        self._unread = 0
        self._wanted = trio.Event()
        #: A lingering close in progress (TM-HTTP-LINGER): the reader task discards what
        #: arrives, and tells ``_drained`` when it has seen the end or read enough.
        self._discarding = False
        self._discarded = 0
        self._drained = trio.Event()
        #: Where the connection arrived (the Host policy's key), read once.
        self.local_host = _local_host(stream)
        self.peer_host = _peer_host(stream)
        self.peer_port = _peer_port(stream)

    @property
    def request_read(self) -> bool:
        """Whether the current request has been read to its end and the connection may
        carry another."""
        return self.reader.request_read and not self.must_close

    def next_cycle(self) -> None:
        """Start reading the next request, from what arrived after the last."""
        self.reader.next_cycle()

    def probe(self) -> TcpProbe | None:
        """A probe of the connection's own socket (TM-BP-STALL), when it is a TCP socket:
        made once, when first asked for."""
        if not self._probed:
            self._probed = True
            stream = self.stream
            if isinstance(stream, trio.SSLStream):
                stream = stream.transport_stream
            if isinstance(stream, trio.SocketStream):
                self._probe = TcpProbe.of_socket(stream.socket)
        return self._probe

    async def write(self, data: bytes, *, eager: bool = False) -> None:
        """Send ``data`` (raises _Closed if the connection is over). Writes of several tasks
        (a stream's writer, the task ending its response) go out one at a time.

        A stream's write first lets the other tasks run, as taking a lock does: what its
        producers add meanwhile goes out with the next write, in one system call, and a
        stream of small events went out a fifth slower without it. An ``eager`` write, a
        whole answer that nothing will follow, goes out at once when no write is under way.
        """
        lock = self._send_lock
        if eager:
            try:
                lock.acquire_nowait()
            except trio.WouldBlock:
                await lock.acquire()
        else:
            await lock.acquire()
        try:
            if self.closed:
                raise _Closed
            self.sent = True
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self.closed = True
                raise _Closed from exc
        finally:
            lock.release()

    def watch(self) -> None:
        """Start the reader task, if it is not running: from now on it does the reading,
        into the reader, after what arrived already."""
        if not self.reading and not self.eof:
            self.reading = True
            self._nursery.start_soon(self._read)

    async def _receive(self) -> bytes:
        """What the client sends next (b"" at its end, or when the connection broke)."""
        try:
            return bytes(await self.stream.receive_some(_READ_SIZE))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return b""

    def _fed(self, data: bytes) -> None:
        self.reader.receive_data(data)  # b"": the end of the client's side
        if not data:
            self.eof = True
            if self.responder is not None:
                self.responder.gone()

    async def _read(self) -> None:
        """The connection's reader task, from ``watch`` to its end: feeds the reader what
        arrives, holding at most _PIPELINE_BUFFER bytes the serving side has not asked for
        (a client pipelining requests while one is served cannot make it hold more), and
        tells the request being served when the client leaves. During a lingering close it
        discards what arrives instead."""
        while True:
            while self._unread >= _PIPELINE_BUFFER and not self._discarding:
                self._wanted = trio.Event()
                await self._wanted.wait()
            data = await self._receive()
            if self._discarding:
                if self._discard(data):
                    return
                continue
            self._fed(data)
            self._unread += len(data)
            self._arrived.set()
            if not data:
                return

    def _discard(self, data: bytes) -> bool:
        """Count ``data`` as discarded by a lingering close: True when the close may go on
        (the client's end came, or the bound of bytes was reached)."""
        self._discarded += len(data)
        if data and self._discarded <= self.config.http_linger_bytes:
            return False
        self.eof = self.eof or not data
        self._drained.set()
        return True

    async def next_event(self, deadline: float = float("inf")) -> Event | None:
        """The reader's next event, reading (or waiting for the reader task) as needed,
        until ``deadline``: None once it has passed. A request that cannot be read is
        refused (``refuse``) and raises _Closed, as the client's end does."""
        reader = self.reader
        while True:
            try:
                event = reader.next_event()
            except BadRequest as exc:
                await self.refuse(exc.error)
                raise _Closed from None
            if event is not Signal.NEED_DATA:
                return event
            if self.eof:
                raise _Closed
            # The deadline costs a cancel scope only when there is something to wait for.
            with trio.CancelScope(deadline=deadline):
                if self.reading:
                    self._unread = 0
                    self._wanted.set()
                    self._arrived = trio.Event()
                    await self._arrived.wait()
                else:
                    self._fed(await self._receive())
                continue
            return None

    async def refuse(self, error: RemoteProtocolError) -> None:
        """Answer a request that could not be read, when no response has started on the
        connection; the connection then ends, in stages (``linger``)."""
        self.must_close = True
        if not (self.responder is not None and self.responder.started):
            reply = error_reply(error)
            head = _response_head(reply.status, reply.headers, length=len(reply.body), close=True)
            with contextlib.suppress(_Closed):
                await self.write(head + reply.body)
        await self.linger()

    async def linger(self) -> None:
        """End the connection in stages (RFC 9112 §9.6, TM-HTTP-LINGER): stop sending
        (a half-close, where the stream has one), then read and discard what still arrives
        until the client's end, for at most ``http_linger_timeout`` seconds and
        ``http_linger_bytes`` bytes, and no longer than LINGER_IDLE without anything
        arriving; then close. Closed at once, a socket with unread bytes
        is reset, and the reset can destroy the answer before the client has read it."""
        cfg = self.config
        if not self.closed and not self.eof:
            with trio.move_on_after(cfg.http_linger_timeout):
                stream = self.stream
                if isinstance(stream, trio.abc.HalfCloseableStream):
                    async with self._send_lock:
                        with contextlib.suppress(
                            trio.BrokenResourceError, trio.ClosedResourceError, OSError
                        ):
                            await stream.send_eof()
                if self.reading:
                    self._discarding = True
                    self._wanted.set()
                    while not self._drained.is_set():
                        before = self._discarded
                        with trio.move_on_after(LINGER_IDLE):
                            await self._drained.wait()
                        if self._discarded == before:
                            break  # nothing came for LINGER_IDLE: the client is not sending
                else:
                    while True:
                        with trio.move_on_after(LINGER_IDLE) as idle:
                            data = await self._receive()
                        if idle.cancelled_caught or self._discard(data):
                            break
        await self.close()

    async def end(self) -> None:
        """End the connection after a response that went out whole: in stages when the
        client may still be sending (a plain socket: always, since the kernel resets a
        socket closed with bytes unread; under TLS, which cannot half-close, when the
        request was not read to its end), else at once."""
        if isinstance(self.stream, trio.SSLStream) and self.reader.request_read:
            await self.close()
        else:
            await self.linger()

    def close_now(self) -> None:
        """Close the socket from outside the connection's tasks: its reader sees the end, and
        a write on it fails."""
        self.closed = True
        stream = self.stream
        if isinstance(stream, trio.SSLStream):
            stream = stream.transport_stream
        if isinstance(stream, trio.SocketStream):
            stream.socket.close()

    async def close(self) -> None:
        """Close the connection now, whatever it was doing (a stuck write fails with it)."""
        if not self.closed:
            self.closed = True
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await trio.aclose_forcefully(self.stream)


async def serve_relay_port(
    runtime: Runtime,
    config: ServerConfig,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """TM-STORE-STREAMS: with a shared session store, a port of this worker's own, at
    ``config.relay_host``, where other workers relay the resumes of streams this worker
    holds. It is the endpoint again, on trio-mcp's own server whatever serves the public
    side, with every check of the endpoint (and its connection guard), for requests that
    carry a relay seal in place of a token (T-AUTH-17); its address is kept in the store."""
    listeners = await trio.open_tcp_listeners(0, host=config.relay_host)
    host, port = listeners[0].socket.getsockname()[:2]
    runtime.peers.advertise(host, port)
    await HttpServer(runtime, config, relay_port=True).serve(listeners, task_status=task_status)


class _Seat:
    """A connection's place in the pool of connections (TM-SEC-FAIR): its stream from the
    moment it is accepted, and its _Connection once its TLS handshake is done."""

    __slots__ = ("connection", "stream")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.connection: _Connection | None = None

    def evict(self) -> None:
        """Close the connection for another client's (a request it was serving ends as if
        its client had left)."""
        if self.connection is not None:
            self.connection.close_now()
            return
        stream = self.stream
        if isinstance(stream, trio.SocketStream):
            stream.socket.close()


def _idle_first(seats: dict[_Seat, None]) -> _Seat:
    """Which connection of the client holding the most goes: its oldest idle one (between
    requests) among its first 64, else its oldest."""
    for _, seat in zip(range(64), seats, strict=False):
        if seat.connection is not None and seat.connection.idle:
            return seat
    return next(iter(seats))


class HttpServer:
    """Serves a Runtime over HTTP/1.1 on listeners this server owns (TM-HTTP-OWN)."""

    def __init__(
        self, runtime: Runtime, config: ServerConfig, *, relay_port: bool = False
    ) -> None:
        self.runtime = runtime
        self.config = config
        #: The parser of every connection (TM-HTTP-PARSER), settled once: ValueError here
        #: when the one asked for is not installed.
        self.parser = resolve_parser(config.http_parser)
        #: Whether this is a worker's relay port (serve_relay_port): it serves only requests
        #: other workers relayed, sealed (T-AUTH-17).
        self.relay_port = relay_port
        self.connections: set[_Connection] = set()
        self._emptied = trio.Event()
        self._stopping = False
        self._nursery: trio.Nursery | None = None
        #: What the connection guard caught (TM-SEC-ISOLATE).
        self.failures = FailureLog(
            logger, "a connection failed; it was closed and the server goes on"
        )
        #: TM-SEC-FAIR: every connection open (in its TLS handshake or not), by client; a
        #: full server closes one of the client holding the most, idle first.
        self.seats: Pool[_Seat] = Pool(
            "connections", config.http_max_connections, evict=_Seat.evict, pick=_idle_first
        )
        runtime.count_pool(self.seats)

    async def serve(
        self,
        listeners: Sequence[trio.SocketListener],
        *,
        ssl_context: ssl.SSLContext | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections on ``listeners`` until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for listener in listeners:
                nursery.start_soon(self._accept, listener, ssl_context)
            task_status.started()

    async def _accept(
        self, listener: trio.SocketListener, ssl_context: ssl.SSLContext | None
    ) -> None:
        assert self._nursery is not None
        async with listener:
            while not self._stopping:
                try:
                    stream: trio.abc.Stream = await listener.accept()
                except OSError as exc:
                    # Out of descriptors, say: wait a moment instead of spinning on it.
                    logger.warning("accept failed: %s", exc)
                    await trio.sleep(0.1)
                    continue
                self._nursery.start_soon(self._connection, stream, ssl_context)

    def stop_accepting(self) -> None:
        """Shutdown: accept no more connections, and close the ones between requests."""
        self._stopping = True
        for connection in list(self.connections):
            if connection.idle:
                connection.close_now()

    async def _connection(
        self, stream: trio.abc.Stream, ssl_context: ssl.SSLContext | None
    ) -> None:
        """One connection's task, under the connection guard (TM-SEC-ISOLATE): whatever it
        raises (not a cancellation) ends this connection, answered 400 if nothing was sent
        on it yet, and is logged; the server goes on."""
        seat: _Seat | None = None
        connection: _Connection | None = None
        try:
            # TM-HTTP-OWN / TM-SEC-FAIR: open connections are a pool (those in their TLS
            # handshake count): a full one makes room at the expense of the client holding
            # the most, or the new one gets a clear refusal, then is closed.
            seat = self._seat(stream)
            if seat is None:
                await self._refuse_busy(stream)
                return
            opened = await self._handshake(stream, ssl_context)
            if opened is None:
                return
            stream = opened
            async with trio.open_nursery() as nursery:
                connection = seat.connection = _Connection(
                    stream, self.config, nursery, self.parser
                )
                self.connections.add(connection)
                with contextlib.suppress(_Closed):
                    await self._serve_connection(connection)
                nursery.cancel_scope.cancel()
        except* Exception as failure:
            self.failures.caught(failure)
            if connection is not None and not connection.sent and not connection.closed:
                reply = error_reply(unserved())
                head = _response_head(400, reply.headers, length=len(reply.body), close=True)
                with trio.move_on_after(1), contextlib.suppress(Exception):
                    await connection.write(head + reply.body)
        finally:
            if seat is not None:
                self.seats.discard(seat)
            if connection is not None:
                self.connections.discard(connection)
                await connection.close()
            else:
                await trio.aclose_forcefully(stream)
            if not self.connections:
                self._emptied.set()
                self._emptied = trio.Event()

    async def _handshake(
        self, stream: trio.abc.Stream, ssl_context: ssl.SSLContext | None
    ) -> trio.abc.Stream | None:
        """The accepted connection's stream, past its TLS handshake (within the header
        deadline) when it has one: None when that failed, and the stream is closed."""
        if ssl_context is None:
            return stream
        tls = trio.SSLStream(stream, ssl_context, server_side=True)
        try:
            with trio.move_on_after(self.config.http_header_timeout) as handshake:
                await tls.do_handshake()
        except (trio.BrokenResourceError, ssl.SSLError, OSError):
            await trio.aclose_forcefully(tls)
            return None
        if handshake.cancelled_caught:
            await trio.aclose_forcefully(tls)
            return None
        return tls

    def _seat(self, stream: trio.abc.Stream) -> _Seat | None:
        """The new connection's seat in the pool of connections (TM-SEC-FAIR), by its
        client's address (TM-SEC-UNIT); None when it is refused. A trusted proxy's
        connections speak for many clients: they are not counted."""
        peer = _peer_host(stream)
        units = self.runtime.units
        seat = _Seat(stream)
        if units.trusted(peer):
            return seat
        unit = units.of_address(peer).key
        if not self.seats.admit(unit):
            return None
        self.seats.add(unit, seat)
        return seat

    async def drain(self) -> None:
        """Wait until no connection is open."""
        while self.connections:
            await self._emptied.wait()

    async def _refuse_busy(self, stream: trio.abc.Stream) -> None:
        reply = error_reply(connections_busy())
        head = _response_head(503, reply.headers, length=len(reply.body), close=True)
        with trio.move_on_after(1), contextlib.suppress(
            trio.BrokenResourceError, trio.ClosedResourceError, OSError
        ):
            await stream.send_all(head + reply.body)
        await trio.aclose_forcefully(stream)

    async def _serve_connection(self, connection: _Connection) -> None:
        cfg = self.config
        first = True
        # Shutdown closes a connection between requests: one whose request finished meanwhile
        # is closed now, not kept for a next request (nor left to drain()'s timeout); one
        # accepted meanwhile has its first request answered (503, TM-SESS-SHUTDOWN).
        while first or not self._stopping:
            connection.idle = True
            # TM-HTTP-OWN: a head must come within the header deadline (slowloris), and a
            # kept-alive connection may wait for its next request only so long.
            wait = cfg.http_header_timeout if first else cfg.http_idle_timeout
            head = await connection.next_event(trio.current_time() + wait)
            if head is None:
                return
            if not isinstance(head, RequestHead):
                raise _Closed  # the client's end (CLOSED), between requests
            connection.idle = False
            first = False
            responder = HttpResponder(connection, head)
            await self._serve_request(connection, head, responder)
            if connection.closed:
                return
            if not (responder.finished and responder.keep_alive):
                if responder.finished:
                    await connection.end()
                return
            connection.next_cycle()

    async def _serve_request(
        self, connection: _Connection, head: RequestHead, responder: HttpResponder
    ) -> None:
        cfg = self.config
        headers = Headers(head.headers)  # as the reader gives them: names lower-cased
        local = connection.local_host
        plan = plan_head(
            http_version=head.http_version.decode("latin-1"),
            method=head.method.decode("latin-1"),
            target=head.target.decode("latin-1"),
            headers=headers,
            policy=self.runtime.policy_for(local),
            endpoint=cfg.path,
            max_body=cfg.max_body_bytes,
        )
        if isinstance(plan, Refuse):
            connection.must_close = plan.close
            await responder.reply(plan.reply)
            return
        if isinstance(plan, Elsewhere):
            known = await self.runtime.well_known(plan.method, plan.path)
            await responder.reply(known or error_reply(not_found(cfg.path)))
            return
        body = head.body if head.body is not None else await self._read_body(
            connection, head, responder, headers
        )
        if body is None:
            return
        request = HttpRequest(
            method=head.method.decode("latin-1").upper(),
            path=plan.path,
            headers=headers,
            body=body,
            local_host=local,
            peer_host=connection.peer_host,
            peer_port=connection.peer_port,
            http_version=head.http_version.decode("latin-1"),
        )
        # The connection (its reader, once the runtime asks for one) tells the responder if
        # the client leaves meanwhile.
        connection.responder = responder
        if connection.eof:
            responder.gone()
        try:
            await self.runtime.serve_guarded(request, responder, relay_port=self.relay_port)
        finally:
            connection.responder = None
        if not responder.finished:
            # A response left unfinished (a cut stream, a client gone): the connection ends
            # here, which also releases a write stuck on it (TM-BP-RELEASE).
            await connection.close()

    async def _read_body(
        self, connection: _Connection, head: RequestHead, responder: HttpResponder,
        headers: Headers,
    ) -> bytes | None:
        """The request's body, within the size limit and the body deadline, its bytes held
        in the pool of bodies arriving (TM-SEC-BODIES) by its client's address (TM-SEC-UNIT:
        the head is read, so a trusted proxy's forwarding header is at hand; the principal
        is not known before the body is); None when the request was refused (413, 408,
        503: the pool is full and this client holds its share, or it gave up this body for
        another client's) or the client left."""
        cfg = self.config
        if connection.reader.waiting_for_continue and _expects_continue(head):
            await connection.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        bodies = self.runtime.bodies
        arrival = bodies.arrival(
            self.runtime.units.of_request(None, connection.peer_host, headers).key,
            trio.CancelScope(),
        )
        deadline = trio.current_time() + cfg.http_body_timeout
        refusal: RemoteProtocolError | None = None
        try:
            # An eviction (another client's body took this one's room) cancels the scope.
            with arrival.scope:
                while True:
                    event = await connection.next_event(deadline)
                    if arrival.evicted:
                        break  # taken as the read returned, before the scope could say so
                    if isinstance(event, bytes):
                        if arrival.size + len(event) > cfg.max_body_bytes:
                            # TM-HTTP-OWN: the limit holds while the body streams in.
                            refusal = too_large(cfg.max_body_bytes)
                            break
                        if not bodies.take(arrival, event):
                            refusal = bodies_busy()
                            break
                        del event  # the pool's now: an eviction frees it at once
                    elif event is Signal.END:
                        return arrival.body()
                    elif event is None:
                        bodies.count_timeout()
                        refusal = body_too_slow()
                        break
                    else:
                        raise _Closed  # the client left (or a head where a body was due)
        finally:
            # Once read, the body is the request's; only what is still arriving counts.
            bodies.done(arrival)
        if arrival.evicted:
            if connection.must_close:
                # Taken while the reader refused a malformed body and lingered: that
                # request has its answer, and its connection is ending.
                raise _Closed
            refusal = bodies_busy(evicted=True)
        assert refusal is not None
        await responder.reply(error_reply(refusal))
        return None


#: The reason phrase of each status (RFC 9110 §15), for readers of the wire.
_REASONS: Final = {s.value: s.phrase.encode("ascii") for s in http.HTTPStatus}


#: Header names as this server writes them: HTTP tokens (RFC 9110 §5.1).
_TOKEN: Final = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
#: Names checked already: the server writes the same few on every response.
_NAMES_SEEN: set[str] = set()
_NAMES_SEEN_MAX: Final = 256


class _Date:
    """The Date header's value (RFC 9110 §6.6.1: an origin server with a clock MUST send
    it), made once a second."""

    second = -1
    value = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.second = second
            cls.value = formatdate(second, usegmt=True).encode("ascii")
        return cls.value


def _response_head(
    status: int,
    headers: Iterable[tuple[str, str]],
    *,
    length: int | None = None,
    chunked: bool = False,
    close: bool = False,
) -> bytes:
    """A response's status line and header block, with its framing: ``length`` for a
    Content-Length, ``chunked`` for chunks, else none (the body ends with the connection,
    or there is none); ``close`` says the connection ends after it. A name that is not an
    HTTP token, or a value with a line break, is a bug of ours: never written."""
    lines = [b"HTTP/1.1 %d %s\r\ndate: %s\r\n" % (status, _REASONS.get(status, b""), _Date.now())]
    for name, value in headers:
        if name not in _NAMES_SEEN:
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"not a header name: {name!r}")
            if len(_NAMES_SEEN) < _NAMES_SEEN_MAX:
                _NAMES_SEEN.add(name)
        if "\r" in value or "\n" in value or "\0" in value:
            raise ValueError(f"a line break in the value of {name}")
        lines.append(f"{name}: {value}\r\n".encode("latin-1"))
    if length is not None:
        lines.append(b"content-length: %d\r\n" % length)
    elif chunked:
        lines.append(b"transfer-encoding: chunked\r\n")
    if close:
        lines.append(b"connection: close\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def _says_close(head: RequestHead) -> bool:
    """Whether the request's Connection header has the close option (RFC 9112 §9.6)."""
    for name, value in head.headers:
        if name == b"connection" and b"close" in (o.strip() for o in value.lower().split(b",")):
            return True
    return False


def _expects_continue(head: RequestHead) -> bool:
    return any(k == b"expect" and v.lower() == b"100-continue" for k, v in head.headers)


def _peer_host(stream: trio.abc.Stream) -> str | None:
    return _host(stream, peer=True)


def _local_host(stream: trio.abc.Stream) -> str | None:
    return _host(stream, peer=False)


def _peer_port(stream: trio.abc.Stream) -> int | None:
    """The port of the connection's other end, when known (a span's client.port)."""
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if isinstance(stream, trio.SocketStream):
        with contextlib.suppress(OSError):
            address = stream.socket.getpeername()
            if isinstance(address, tuple) and len(address) > 1:
                return int(address[1])
    return None


def _host(stream: trio.abc.Stream, *, peer: bool) -> str | None:
    """The address of the connection's other end (``peer``) or of ours, when known."""
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if isinstance(stream, trio.SocketStream):
        with contextlib.suppress(OSError):
            sock = stream.socket
            return str((sock.getpeername() if peer else sock.getsockname())[0])
    return None

