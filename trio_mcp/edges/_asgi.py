# The ASGI adapter: translates ASGI scope/receive/send into the runtime's HttpRequest and
# Responder, and back. It makes no protocol decision (spec/transport.md is decided in
# trio_mcp.protocol and executed by trio_mcp.runtime): what is decided about a request before
# the application sees it is trio_mcp.protocol._edge's plan, the same as on trio-mcp's own
# server (trio_mcp.edges._http), carried out here from the scope hypercorn hands over.
from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

import trio

from ..protocol import Headers, HttpRequest, Reply
from ..protocol._edge import (
    LINGER_IDLE,
    Elsewhere,
    Refuse,
    body_too_slow,
    not_found,
    plan_head,
    too_large,
    unserved,
    version_not_supported,
)
from ..protocol._transport import error_reply
from ..runtime._budget import Arrival, BodyPool, bodies_busy
from ..runtime._failures import FailureLog
from ..runtime._runtime import Runtime
from ..runtime.backpressure._responder import Departure
from ..runtime.backpressure._tcpprobe import TcpProbe, TcpSample, find_tcp_socket
from ..runtime.legacy._table import SessionTable
from ..runtime.store._stores import with_store
from ._hypercorn import isolate_connections

if TYPE_CHECKING:
    from ..base._config import ServerConfig
    from ..base._ports import App

__all__ = ["ASGIApp"]

logger = logging.getLogger("trio_mcp.asgi")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class ASGIResponder:
    """The Responder of one ASGI HTTP exchange.

    Given the scope's ``server`` and ``client`` addresses, it is also a TcpProbing
    responder: the stall detector may ask the kernel about the connection's socket.
    """

    def __init__(
        self, send: Send, *, server: object = None, client: object = None
    ) -> None:
        self._send = send
        #: A send failed: nothing more is sent.
        self._broken = False
        self._departure = Departure()
        self.disconnected = self._departure.event
        self.started = False
        self.finished = False
        self._addresses = (server, client) if server and client else None
        self._probe: TcpProbe | None = None
        #: Starts the task that waits for http.disconnect; called once, when the runtime
        #: first needs to know (TM-HTTP-OWN's lean path, under hypercorn).
        self._start_watch: Callable[[], None] | None = None

    def watch_with(self, start: Callable[[], None] | None) -> None:
        """Give the responder the way to start watching for the client's leaving. It is
        started when the runtime first asks to hear of it (``on_disconnect``) or starts a
        stream; a complete answer sent without either needs no watching task. None takes
        back a way not used, once the response is over."""
        self._start_watch = start

    def _watch(self) -> None:
        start, self._start_watch = self._start_watch, None
        if start is not None:
            start()

    def tcp_sample(self) -> TcpSample | None:
        """TM-BP-STALL: the kernel's figures for this connection's socket, looked up (once,
        on first use) by the scope's addresses; None when it cannot be found, off Linux,
        or once released."""
        if self._probe is None:
            if self._addresses is None:
                return None
            self._probe = find_tcp_socket(*self._addresses)
            if self._probe is None:
                return None
        return self._probe.sample()

    def reset_on_close(self) -> bool:
        """Resettable (TM-BP-CLOSE): hypercorn's close of the connection, after a cut,
        resets it (the option is set through the duplicate, on the socket both share)."""
        if self._probe is None and self._addresses is not None:
            self._probe = find_tcp_socket(*self._addresses)
        return self._probe is not None and self._probe.reset_on_close()

    def release_tcp_probe(self) -> None:
        """Close the duplicate of the socket that ``tcp_sample`` holds (it would keep the
        connection open after hypercorn closed it); no lookup is made again."""
        self._addresses = None
        if self._probe is not None:
            self._probe.close()

    def on_disconnect(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the client has gone (at once if it has already).

        The runtime uses it instead of a task of its own that waits for ``disconnected``
        (see trio_mcp.runtime.backpressure._responder.watching_disconnect).
        """
        self._departure.on(callback)
        if not self.disconnected.is_set():
            self._watch()

    def gone(self) -> None:
        """The client closed the connection."""
        self._departure.happened()

    async def _safe_send(self, message: MutableMapping[str, Any]) -> bool:
        """Send ``message``; False when the connection failed under it (then, or at an
        earlier send: hypercorn refuses a body whose response start did not go out)."""
        if self.finished or self._broken:
            return False
        try:
            await self._send(message)
        except (
            OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError
        ):
            # The client went away under us: the runtime learns it from `disconnected`.
            # (BusyResourceError: hypercorn closing the connection while this sends, as it
            # does when h11 refuses what the client sent next: pgjones/hypercorn#203.)
            self._broken = True
            self.gone()
            return False
        return True

    async def reply(self, reply: Reply) -> None:
        if self.started:
            return
        self.started = True
        await self._safe_send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [
                    *((k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers),
                    # RFC 9110 §8.6: a 204 carries no Content-Length.
                    *(
                        [(b"content-length", str(len(reply.body)).encode())]
                        if reply.status != 204
                        else []
                    ),
                ],
            }
        )
        # Finished only if it went out: hypercorn reports the client's leaving once a
        # response is complete, so `disconnected` cannot tell a reply that failed.
        self.finished = await self._safe_send({"type": "http.response.body", "body": reply.body})

    async def refuse(
        self, reply: Reply, receive: Receive, *, close: bool, timeout: float, limit: int
    ) -> None:
        """Answer ``reply`` to a request refused before its body was read, then read and
        discard what the client still sends (for at most ``timeout`` seconds and ``limit``
        bytes, and no longer than LINGER_IDLE without anything arriving) before the
        response ends (TM-HTTP-LINGER): hypercorn closes a connection
        whose request was not read at once when the response ends, and a socket closed with
        bytes unread is reset, which can destroy the answer before the client reads it.
        ``close``: the connection ends after it (RFC 9112 §6.3)."""
        if self.started:
            return
        self.started = True
        headers = [
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers),
            (b"content-length", str(len(reply.body)).encode()),
        ]
        if close:
            headers.append((b"connection", b"close"))
        start = {"type": "http.response.start", "status": reply.status, "headers": headers}
        if not await self._safe_send(start) or not await self._safe_send(
            {"type": "http.response.body", "body": reply.body, "more_body": True}
        ):
            return
        with trio.move_on_after(timeout):
            discarded = 0
            while discarded <= limit:
                with trio.move_on_after(LINGER_IDLE) as idle:
                    message = await receive()
                if idle.cancelled_caught or message["type"] != "http.request":
                    break
                discarded += len(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        self.finished = await self._safe_send({"type": "http.response.body", "body": b""})

    async def start_stream(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        self.started = True
        self._watch()
        await self._safe_send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
            }
        )

    async def write(self, data: bytes) -> None:
        await self._safe_send({"type": "http.response.body", "body": data, "more_body": True})

    async def end(self) -> None:
        await self._safe_send({"type": "http.response.body", "body": b""})
        self.finished = True


class ASGIApp:
    """An MCP server as an ASGI 3 application.

    Under hypercorn (``hypercorn --worker-class trio module:app``) the lifespan protocol
    starts and stops the runtime. When embedding, ``async with app.running():`` does the
    same.
    """

    def __init__(self, server: App, config: ServerConfig, *, bind_hosts: list[str]) -> None:
        self.server = server
        self.config = config
        self.runtime = Runtime(server, with_store(config), bind_hosts=bind_hosts)
        #: What the guard around each request caught (TM-SEC-ISOLATE).
        self.failures = FailureLog(logger, "a request failed in the ASGI adapter; answered 400")
        # TM-SEC-ISOLATE: under hypercorn (whoever starts it), one connection's failure
        # must not end the server.
        isolate_connections()

    @property
    def table(self) -> SessionTable:
        """The legacy era's sessions."""
        return self.runtime.table

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Runtime]:
        """Run the runtime for the duration of the block (idempotent)."""
        if self.runtime.running:
            yield self.runtime
            return
        async with trio.open_nursery() as nursery:
            await nursery.start(self.runtime.run)
            if self.runtime.peers.serves_relays:
                from ._http import serve_relay_port

                await nursery.start(serve_relay_port, self.runtime, self.runtime.config)
            try:
                yield self.runtime
            finally:
                nursery.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:
            # Not an HTTP endpoint: refuse websockets and anything else.
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        started = False
        try:
            async with self.running():
                started = True
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:
            # TM-HAND-LIFESPAN: an application whose lifespan failed to start is not served
            # (hypercorn stops on startup.failed); one that failed to stop says so.
            logger.exception("the application's lifespan failed")
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            cause: BaseException = exc
            while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
                cause = cause.exceptions[0]
            await send({"type": failed, "message": f"{type(cause).__name__}: {cause}"[:500]})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        # ASGI: a scope without http_version is HTTP/1.1.
        if scope.get("http_version", "1.1") in ("1.0", "1.1"):
            # One response at a time on the connection: its socket's progress is this
            # response's (under HTTP/2 it would be every stream's).
            responder = ASGIResponder(send, server=scope.get("server"), client=scope.get("client"))
        else:
            responder = ASGIResponder(send)
            # TM-SEC-H2: hypercorn buffers whatever an HTTP/2 stream is sent, whether or not
            # the client grants flow-control credit, so no judge could tell a stalled reader
            # and the server's memory would be the client's to fill. Refused, in a few bytes.
            await responder.reply(error_reply(version_not_supported()))
            return
        try:
            await self._respond(scope, receive, responder)
        except* Exception as failure:
            # TM-SEC-ISOLATE: what escapes this request's handling (the runtime's own errors
            # are answered inside it) ends it with 400 when nothing was sent, and is logged
            # per place, rate-limited; hypercorn would log each one whole, and answer 500.
            self.failures.caught(failure)
            if not responder.started:
                with contextlib.suppress(Exception):
                    await self._refuse(responder, receive, error_reply(unserved()), close=True)
        finally:
            responder.release_tcp_probe()

    async def _refuse(
        self, responder: ASGIResponder, receive: Receive, reply: Reply, *, close: bool = False
    ) -> None:
        cfg = self.config
        await responder.refuse(
            reply, receive, close=close, timeout=cfg.http_linger_timeout,
            limit=cfg.http_linger_bytes,
        )

    async def _refuse_body(
        self, responder: ASGIResponder, receive: Receive, *, evicted: bool
    ) -> None:
        """TM-SEC-BODIES: the pool of bodies arriving cannot hold this one, or took it for
        another client's: 503, the rest of the body is not read, and hypercorn closes the
        connection once the answer is out."""
        await self._refuse(
            responder, receive, error_reply(bodies_busy(evicted=evicted)), close=True
        )

    async def _respond(self, scope: Scope, receive: Receive, responder: ASGIResponder) -> None:
        cfg = self.config
        headers = Headers(list(scope.get("headers", [])))
        server_addr = scope.get("server")
        local_host = str(server_addr[0]) if server_addr else None
        raw_path = scope.get("raw_path")
        target = raw_path.decode("latin-1") if raw_path else scope.get("path", "")
        root = scope.get("root_path", "")
        if root and target.startswith(root):
            # TM-HAND-ROUTE: mounted under a prefix, the endpoint is the path below it.
            target = target[len(root):]
        plan = plan_head(
            http_version=scope.get("http_version", "1.1"),
            method=scope["method"],
            target=target,
            headers=headers,
            policy=self.runtime.policy_for(local_host),
            endpoint=cfg.path,
            max_body=cfg.max_body_bytes,
        )
        if isinstance(plan, Refuse):
            await self._refuse(responder, receive, plan.reply, close=plan.close)
            return
        if isinstance(plan, Elsewhere):
            known = await self.runtime.well_known(plan.method, plan.path)
            await self._refuse(responder, receive, known or error_reply(not_found(cfg.path)))
            return
        limit = plan.limit
        peer = _client_host(scope)
        bodies = self.runtime.bodies
        try:
            # TM-SEC-BODIES: as on trio-mcp's own server, a body has http_body_timeout to
            # arrive; hypercorn's read_timeout would also end idle SSE streams. The same
            # scope is the one an eviction cancels (one scope a body: each costs
            # microseconds, and every POST under hypercorn takes this path).
            with trio.move_on_after(cfg.http_body_timeout) as body_deadline:
                arrival = bodies.arrival(
                    # TM-SEC-UNIT: by address (through a trusted proxy's header): the
                    # principal is not known before the body is.
                    self.runtime.units.of_request(None, peer, headers).key, body_deadline
                )
                body, complete = await _read_body(receive, limit, bodies, arrival)
        except _BodiesBusy:
            await self._refuse_body(responder, receive, evicted=False)
            return
        if arrival.evicted:
            await self._refuse_body(responder, receive, evicted=True)
            return
        if body_deadline.cancelled_caught:
            self.runtime.bodies.count_timeout()
            await self._refuse(responder, receive, error_reply(body_too_slow()))
            return
        if not complete:
            if body is None:
                return  # the client left before sending its body
            await self._refuse(responder, receive, error_reply(too_large(limit)))
            return
        path = plan.path
        request = HttpRequest(
            method=scope["method"].upper(),
            path=path,
            headers=headers,
            body=body or b"",
            local_host=local_host,
            peer_host=peer,
            peer_port=_client_port(scope),
            http_version=str(scope.get("http_version", "1.1")),
        )
        async with trio.open_nursery() as nursery:
            responder.watch_with(lambda: nursery.start_soon(_watch_disconnect, receive, responder))
            try:
                served = await self.runtime.serve_guarded(request, responder)
                if not served and responder.started and not responder.finished:
                    # A stream that failed midway ends (a response left unfinished on
                    # purpose, a cut stream, is closed by hypercorn instead).
                    await responder.end()
            finally:
                # The closure holds the responder: left on it, the two would make a cycle
                # that only the garbage collector frees, with hypercorn's request state
                # hanging from it, and its collections would take a fifth of the CPU.
                responder.watch_with(None)
            nursery.cancel_scope.cancel()


class _BodiesBusy(Exception):
    """The pool of bodies arriving cannot hold the next piece (TM-SEC-BODIES)."""


async def _read_body(
    receive: Receive, limit: int, bodies: BodyPool, arrival: Arrival
) -> tuple[bytes | None, bool]:
    """The request body; (body, False) when it exceeds ``limit``, or when the pool took it
    for another client's (``arrival.evicted``: its scope is cancelled, so this returns
    only if the message came first); (None, False) on disconnect. Its bytes are held in
    ``bodies`` while it arrives; raises _BodiesBusy when the pool cannot hold the next
    piece."""
    try:
        while True:
            message = await receive()
            if arrival.evicted:
                return b"", False
            if message["type"] == "http.disconnect":
                return None, False
            chunk = message.get("body", b"")
            if arrival.size + len(chunk) > limit:
                return b"", False
            if not bodies.take(arrival, chunk):
                raise _BodiesBusy
            del chunk  # the pool's now: an eviction frees it at once
            if not message.get("more_body", False):
                return arrival.body(), True
            del message
    finally:
        bodies.done(arrival)


async def _watch_disconnect(receive: Receive, responder: ASGIResponder) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            responder.gone()
            return


def _client_port(scope: Mapping[str, Any]) -> int | None:
    client = scope.get("client")
    if isinstance(client, list | tuple) and len(client) > 1 and isinstance(client[1], int):
        return client[1]
    return None


def _client_host(scope: Mapping[str, Any]) -> str | None:
    client = scope.get("client")
    if isinstance(client, list | tuple) and client and isinstance(client[0], str):
        return client[0]
    return None
