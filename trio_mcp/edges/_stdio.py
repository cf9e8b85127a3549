# The stdio edge (spec/stdio.md): one host, one process, newline-delimited JSON-RPC on the
# process's stdin and stdout. It is an edge like the HTTP ones: it turns what arrives into
# the requests the runtime serves (a POST per line, on one legacy session; a GET that keeps
# the session's standalone stream), and writes what the runtime answers, one message a line.
# So a stdio connection is a 2025-11-25 session with every rule, budget and pool of one,
# and a line that carries 2026-07-28 ``_meta`` is served statelessly (ML-COMPAT-3).
#
# Bounds (TM-STDIO-BOUND): one line is held at a time, and never more than max_body_bytes
# of it; at most ``max_exchanges`` requests are in flight (more are answered busy); every
# message goes out through one writer, so a host that does not read blocks the writer, the
# streams behind it (backpressure, as on a socket) and, once the in-flight bound is reached,
# the reading of stdin.
from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from ..protocol import ErrorCode, Reply
from ..protocol._era import MCP_METHOD, MCP_NAME, has_modern_claim, header_text
from ..protocol._headers import Headers
from ..protocol._methods import NAME_PARAM, ScopeKind, named
from ..protocol._modern import mirror_params
from ..protocol._sse import SSEDecoder
from ..protocol._transport import HttpRequest
from ..runtime.backpressure._responder import Departure

if TYPE_CHECKING:
    from ..base._config import ServerConfig
    from ..base._ports import App
    from ..runtime._runtime import Runtime

__all__ = ["StdioEdge", "serve_stdio"]

logger = logging.getLogger("trio_mcp.stdio")

_CHUNK: Final = 65536
#: Requests of the host in flight at once, at most (TM-STDIO-BOUND); more are answered busy.
MAX_EXCHANGES: Final = 256
_META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"


def _error_line(code: int, message: str, request_id: Any = None) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
        separators=(",", ":"),
    ).encode()


@attrs.frozen
class _Line:
    """What the edge reads of one line before the runtime does: enough to route it."""

    body: bytes
    request_id: Any = None
    is_request: bool = False
    method: str | None = None
    modern_version: str | None = None
    cancels: Any = None
    """A ``notifications/cancelled``'s requestId."""
    name: str | None = None
    """What a 2026-07-28 request names (a tool's, a prompt's name, a resource's URI)."""
    arguments: Any = None
    """A 2026-07-28 request's ``params.arguments`` (a tools/call's), for its Mcp-Param
    headers (TM-STDIO-PARAMS)."""


#: A line longer than this is parsed in a worker thread, as the runtime decodes a large body
#: (TM-SEC-DECODE): a 4 MiB line would otherwise hold the event loop for tens of milliseconds.
_THREAD_AT: Final = 64 * 1024


def _key(value: Any) -> str | int | None:
    """A JSON-RPC id the edge can track: a string or an integer; anything else (a host's
    bad id) is tracked as none, and the runtime words its refusal."""
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


async def _parse(body: bytes) -> _Line | bytes:
    """The line's routing facts, or the error line that answers it (TM-STDIO-MALFORMED)."""
    try:
        if len(body) > _THREAD_AT:
            message = await trio.to_thread.run_sync(json.loads, body)
        else:
            message = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return _error_line(ErrorCode.PARSE_ERROR, f"Parse error: {type(exc).__name__}.")
    return _classify(body, message)


def _classify(body: bytes, message: Any) -> _Line | bytes:
    if isinstance(message, list):
        return _Line(body=body, is_request=any(
            isinstance(m, dict) and "method" in m and "id" in m for m in message
        ))
    if not isinstance(message, dict):
        return _error_line(ErrorCode.INVALID_REQUEST, "Invalid Request: not a JSON-RPC message.")
    method = message.get("method")
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    modern = meta.get(_META_VERSION) if isinstance(meta, dict) and has_modern_claim(
        message
    ) else None
    cancels = None
    if method == "notifications/cancelled" and isinstance(params, dict):
        cancels = _key(params.get("requestId"))
    return _Line(
        body=body,
        request_id=_key(message.get("id")),
        is_request=isinstance(method, str) and "id" in message,
        method=method if isinstance(method, str) else None,
        modern_version=modern if isinstance(modern, str) else None,
        cancels=cancels,
        name=_name_of(method, params),
        arguments=params.get("arguments") if modern is not None and isinstance(
            params, dict
        ) else None,
    )


def _name_of(method: Any, params: Any) -> str | None:
    field = NAME_PARAM.get(method) if isinstance(method, str) else None
    value = params.get(field) if field is not None and isinstance(params, dict) else None
    return value if isinstance(value, str) else None


def _header_value(text: str) -> bytes:
    """``text`` as a header holds it: itself, or its Base64 form (MT-HDR-21)."""
    if header_text(text) and text == text.strip(" \t") and not text.startswith("=?base64?"):
        return text.encode("ascii")
    return b"=?base64?" + base64.b64encode(text.encode("utf-8")) + b"?="


class _Out:
    """The one writer of stdout: whole messages, one a line, in the order they are handed
    over (T-STDIO-1). A message is handed to the writer's task whole, through a channel
    of a few places, so that a cancelled sender never leaves half a line on the pipe; a
    sender waits while the host does not read (TM-STDIO-BACKPRESSURE)."""

    def __init__(self, stream: trio.abc.SendStream, capacity: int = 8) -> None:
        self._stream = stream
        self._send, self._receive = trio.open_memory_channel[bytes](capacity)
        #: The host closed its end: nothing more can be said.
        self.broken = trio.Event()
        #: Cancelled when it does: the edge stops reading.
        self.broken_scope: trio.CancelScope | None = None
        #: Everything handed over was written (or the host is gone).
        self.done = trio.Event()
        self.written = 0

    async def line(self, data: bytes) -> None:
        if self.broken.is_set():
            return
        if b"\n" in data or b"\r" in data:
            # A message never holds a line break (JSON escapes them in strings; only
            # whitespace between tokens could, and that goes here).
            data = json.dumps(json.loads(data), separators=(",", ":")).encode()
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self._send.send(data)

    def close(self) -> None:
        """Take no more: the writer ends once what it holds is written."""
        self._send.close()

    async def run(self) -> None:
        try:
            async for data in self._receive:
                try:
                    await self._stream.send_all(data + b"\n")
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self._gone()
                    return
                self.written += 1
        finally:
            self.done.set()

    def _gone(self) -> None:
        self.broken.set()
        self._receive.close()
        if self.broken_scope is not None:
            self.broken_scope.cancel()


class _LineResponder:
    """The Responder of one exchange the edge makes: each message the runtime sends (a
    reply's body, or an SSE event's data) becomes one line of stdout."""

    def __init__(
        self, out: _Out, *, on_first: Callable[[], None] | None = None, replies: bool = True
    ) -> None:
        self._out = out
        #: Whether a complete reply's body is a message for the host: it is for a request's
        #: POST; for a notification, a response or one of the edge's own GETs it is an
        #: HTTP-level refusal that no message of the host asked for (JSON-RPC answers no
        #: notification), logged instead.
        self._replies = replies
        self._decoder = SSEDecoder()
        self._departure = Departure()
        self.disconnected = self._departure.event
        self.started = False
        self.finished = False
        self.session_id: str | None = None
        self.last_event_id: str | None = None
        self.reply_body: bytes = b""
        #: The last message handed to stdout (an initialize's answer, for its version).
        self.last_message: bytes = b""
        self._on_first = on_first
        #: JSON-RPC ids whose response went out on this exchange.
        self.answered: set[Any] = set()
        #: The exchange is over for the edge (close): a write still waiting is let go.
        self._closed = False
        self._waiting: set[trio.CancelScope] = set()

    def close(self) -> None:
        """The exchange is over: the runtime returned from it. A stream cut as stalled
        returns while its writer still waits to hand a message over (on HTTP the closing of
        the connection lets such a write go, TM-BP-RELEASE): it is let go here, the message
        not handed over, so it is still in the log for the re-attached stream."""
        self._closed = True
        for scope in self._waiting:
            scope.cancel()

    def _first(self) -> None:
        first, self._on_first = self._on_first, None
        if first is not None:
            first()

    def _headers(self, headers: Sequence[tuple[str, str]]) -> None:
        for name, value in headers:
            if name.lower() == "mcp-session-id":
                self.session_id = value

    def on_disconnect(self, callback: Callable[[], None]) -> None:
        self._departure.on(callback)

    def gone(self) -> None:
        self._departure.happened()

    async def reply(self, reply: Reply) -> None:
        self.started = True
        self._headers(reply.headers)
        self._first()
        if reply.body:
            self.reply_body = reply.body
            content_type = dict(reply.headers).get("content-type", "")
            if content_type.startswith("text/event-stream"):
                await self.write(reply.body)
            elif self._replies:
                await self._message(reply.body)
            else:
                logger.debug("stdio: %d %r not forwarded", reply.status, reply.body[:200])
        self.finished = True

    async def start_stream(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        self.started = True
        self._headers(headers)
        self._first()

    async def write(self, data: bytes) -> None:
        for event in self._decoder.feed(data):
            if event.event not in (None, "message"):
                # A named event (resumption-required, TM-BP-SIGNAL) is for HTTP clients:
                # the edge re-attaches on its own, from the last event it handed over.
                continue
            if event.data and not await self._message(event.data.encode()):
                return
            if event.id is not None:
                self.last_event_id = event.id

    async def _message(self, data: bytes) -> bool:
        """Hand ``data`` to stdout's writer; False when it was not (the edge let the
        exchange go, TM-STDIO-BACKPRESSURE)."""
        if self._closed:
            return False
        if self.disconnected.is_set():
            return True  # the host cancelled it: no answer (MU-CANCEL-3)
        with trio.CancelScope() as waiting:
            self._waiting.add(waiting)
            try:
                await self._out.line(data)
            finally:
                self._waiting.discard(waiting)
        if waiting.cancelled_caught:
            return False
        self.last_message = data
        if data[:1] == b"{" and (b'"result"' in data or b'"error"' in data):
            with contextlib.suppress(ValueError, AttributeError):
                self.answered.add(_key(json.loads(data).get("id")))
        return True

    async def end(self) -> None:
        self.finished = True


class StdioEdge:
    """Serves one host on ``stdin``/``stdout`` through ``runtime`` (which must be running)."""

    def __init__(
        self,
        runtime: Runtime,
        stdin: trio.abc.ReceiveStream,
        stdout: trio.abc.SendStream,
        *,
        max_exchanges: int = MAX_EXCHANGES,
    ) -> None:
        self.runtime = runtime
        self._stdin = stdin
        self.out = _Out(stdout)
        self._max_line = runtime.config.max_body_bytes
        self._max_exchanges = max_exchanges
        self.session_id: str | None = None
        self.version: str | None = None
        #: Requests in flight, by id: a notifications/cancelled of a 2026-07-28 one ends its
        #: exchange (MU-CANCEL-1 on HTTP; the responder's departure is that signal here).
        self._running: dict[Any, _LineResponder] = {}
        #: Requests in flight, batches included (TM-STDIO-BOUND).
        self._exchanges = 0
        self._standalone = False
        #: The responders of 2026-07-28 requests in flight (by id()).
        self._modern_ids: set[int] = set()
        self.lines_refused = 0

    @property
    def in_flight(self) -> int:
        """Requests of the host in flight now (at most ``max_exchanges``)."""
        return self._exchanges

    # -- reading --------------------------------------------------------------------------

    async def lines(self) -> Any:
        """Each line of stdin, without its line break; a line longer than the limit as
        None, read through to its end but never held (TM-STDIO-LONG); a last line without a
        line break as a line (TM-STDIO-EOF)."""
        buffer = bytearray()
        skipping = False
        while True:
            chunk = await self._stdin.receive_some(_CHUNK)
            if not chunk:
                if buffer and not skipping:
                    yield bytes(buffer)
                elif skipping:
                    yield None
                return
            start = 0
            while True:
                idx = chunk.find(b"\n", start)
                if idx < 0:
                    if not skipping:
                        buffer += chunk[start:]
                        if len(buffer) > self._max_line:
                            buffer = bytearray()
                            skipping = True
                    break
                if skipping:
                    skipping = False
                    yield None
                else:
                    buffer += chunk[start:idx]
                    if len(buffer) > self._max_line:
                        yield None
                    else:
                        yield bytes(buffer)
                    buffer = bytearray()
                start = idx + 1

    async def run(self, grace: float) -> None:
        """Serve until stdin ends (or the host closes stdout); then the runtime's graceful
        shutdown: running requests get ``grace`` seconds, then are cancelled (TM-STDIO-EOF)."""
        async with trio.open_nursery() as outer:
            outer.start_soon(self.out.run, name="trio_mcp.stdio writer")
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                with trio.CancelScope() as reading:
                    self.out.broken_scope = reading
                    await self._read(nursery)
                with trio.move_on_after(grace + 1):
                    await self.runtime.shutdown(grace)
                nursery.cancel_scope.cancel()
            # What was answered before the end still reaches a host that reads.
            self.out.close()
            with trio.move_on_after(max(grace, 1.0)):
                await self.out.done.wait()
            outer.cancel_scope.cancel()

    async def _read(self, nursery: trio.Nursery) -> None:
        async for raw in self.lines():
            if raw is None:
                self.lines_refused += 1
                await self.out.line(_error_line(
                    ErrorCode.INVALID_REQUEST,
                    f"Invalid Request: a line longer than {self._max_line} bytes "
                    "(max_body_bytes) was refused unread.",
                ))
                continue
            line = raw.rstrip(b"\r")
            if not line.strip():
                continue
            await self._serve_line(nursery, line)

    async def _serve_line(self, nursery: trio.Nursery, raw: bytes) -> None:
        line = await _parse(raw)
        if isinstance(line, bytes):
            self.lines_refused += 1
            await self.out.line(line)
            return
        if line.cancels is not None and line.cancels in self._running:
            responder = self._running[line.cancels]
            if self._modern(responder):
                # TM-STDIO-MODERN: a 2026-07-28 request has no session to tell; its
                # exchange ends, as the close of its HTTP stream would end it.
                responder.gone()
                return
        if not line.is_request:
            # Notifications and responses: served in order, in the reader's task.
            await self._exchange(line, _LineResponder(self.out, replies=False))
            return
        if self._exchanges >= self._max_exchanges:
            await self.out.line(_error_line(
                ErrorCode.SERVER_BUSY,
                f"Server busy: {self._max_exchanges} requests are in flight already.",
                line.request_id,
            ))
            return
        if line.modern_version is not None:
            # A 2026-07-28 request belongs to no session, so nothing it could race with:
            # the next line is read at once (its answer may not start before its handler
            # ends, and a notifications/cancelled for it may be that next line). Known
            # before its task runs, so that a cancellation right behind it finds it.
            responder = _LineResponder(self.out)
            self._modern_ids.add(id(responder))
            self._track(line, responder)
            self._exchanges += 1
            nursery.start_soon(self._counted, line, responder)
            return
        # The next line is read once this one has been received by its session (its first
        # answer, a stream's start or a reply), as an HTTP client's next POST would be.
        await nursery.start(self._request, line)

    def _track(self, line: _Line, responder: _LineResponder) -> None:
        if line.request_id is not None:
            self._running[line.request_id] = responder

    async def _counted(self, line: _Line, responder: _LineResponder) -> None:
        try:
            await self._exchange(line, responder)
        finally:
            self._exchanges -= 1

    async def _request(self, line: _Line, task_status: trio.TaskStatus[None]) -> None:
        started = [False]

        def first() -> None:
            if not started[0]:
                started[0] = True
                task_status.started()

        responder = _LineResponder(self.out, on_first=first)
        self._track(line, responder)
        self._exchanges += 1
        try:
            await self._counted(line, responder)
        finally:
            if not started[0]:
                task_status.started()

    # -- the exchanges --------------------------------------------------------------------

    def _headers(self, line: _Line | None, *, last_event_id: str | None = None) -> Headers:
        raw: list[tuple[bytes, bytes]] = [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ]
        if line is not None and line.modern_version is not None:
            # The headers a 2026-07-28 HTTP client repeats the body in (MT-HDR-6): here the
            # body is all there is, so they repeat it by construction.
            raw.append((b"mcp-protocol-version", _header_value(line.modern_version)))
            if line.method is not None:
                raw.append((MCP_METHOD.encode(), _header_value(line.method)))
            if line.name is not None:
                raw.append((MCP_NAME.encode(), _header_value(line.name)))
                if isinstance(line.arguments, dict):
                    # TM-STDIO-PARAMS: the tool's mirrored parameters, from the body too.
                    mirrored = self.runtime.app.mirrored_params(line.name)
                    if mirrored and line.method is not None and named(
                        line.method, {"name": line.name}, ScopeKind.TOOL
                    ):
                        raw.extend(
                            (k.encode("ascii"), v.encode("ascii"))
                            for k, v in mirror_params(mirrored, line.arguments)
                        )
        elif self.session_id is not None:
            raw.append((b"mcp-session-id", self.session_id.encode("latin-1")))
            if self.version is not None:
                raw.append((b"mcp-protocol-version", self.version.encode("latin-1")))
        if last_event_id is not None:
            raw.append((b"last-event-id", last_event_id.encode("latin-1")))
        return Headers(raw)

    async def _exchange(self, line: _Line, responder: _LineResponder) -> None:
        runtime = self.runtime
        request = HttpRequest(
            method="POST", path=runtime.config.path, headers=self._headers(line), body=line.body,
            local_host="stdio", peer_host="stdio",
        )
        tracked = line.is_request and line.request_id is not None
        try:
            await runtime.serve_guarded(request, responder)
            responder.close()
            if line.method == "initialize" and responder.session_id is not None:
                self._initialized(responder)
            elif line.method == "notifications/initialized" and self.session_id is not None:
                self._open_standalone()
            if (
                tracked and line.request_id not in responder.answered
                and responder.last_event_id is not None and line.modern_version is None
            ):
                # The stream was cut before its response (TM-STDIO-BACKPRESSURE): the edge
                # re-attaches after the last event it wrote, as a client would.
                await self._reattach(responder, line.request_id)
        finally:
            self._modern_ids.discard(id(responder))
            if tracked and self._running.get(line.request_id) is responder:
                del self._running[line.request_id]

    def _modern(self, responder: _LineResponder) -> bool:
        return id(responder) in self._modern_ids

    def _initialized(self, responder: _LineResponder) -> None:
        self.session_id = responder.session_id
        try:
            result = json.loads(responder.last_message or b"{}").get("result", {})
        except ValueError:
            result = {}
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self.version = version if isinstance(version, str) else None

    async def _reattach(self, first: _LineResponder, request_id: Any) -> None:
        """Resume a request's stream after the last event handed to stdout, until its
        response went out: a host that reads slowly, or not for a while, has its stream cut
        as any slow reader (TM-BP-STALL), and gets what follows once it reads. Ends when the
        stream cannot be resumed (the answer is a refusal), has nothing more, or the server
        stops."""
        cursor = first.last_event_id
        answered = first.answered
        idle = 0
        while cursor is not None and request_id not in answered:
            if self.out.broken.is_set() or self.runtime.table.shutting_down:
                return
            responder = _LineResponder(self.out, replies=False)
            responder.answered = answered
            await self.runtime.serve_guarded(HttpRequest(
                method="GET", path=self.runtime.config.path,
                headers=self._headers(None, last_event_id=cursor),
                local_host="stdio", peer_host="stdio",
            ), responder)
            responder.close()
            if responder.reply_body:
                # Its events left the window, or its session ended: an explicit failure,
                # never a silent gap (TM-STDIO-BACKPRESSURE).
                logger.info("stdio: request %r: its stream cannot be resumed", request_id)
                await self.out.line(_error_line(
                    ErrorCode.RESUMPTION_FAILED,
                    "Resumption failed: the host read too slowly for the server's replay "
                    "window, and what this request sent is lost.",
                    request_id,
                ))
                return
            if responder.last_event_id not in (None, cursor):
                cursor, idle = responder.last_event_id, 0
            elif responder.finished:
                return  # the stream ended with nothing more for it
            else:
                idle += 1
                await trio.sleep(min(1.0, 0.05 * 2**idle))

    def _open_standalone(self) -> None:
        """The session's standalone stream (what the server says outside any request), held
        open by the edge for the session's life, re-attached when cut."""
        if self._standalone:
            return
        self._standalone = True
        self._nursery.start_soon(self._standalone_loop, name="trio_mcp.stdio standalone")

    async def _standalone_loop(self) -> None:
        cursor: str | None = None
        while not self.out.broken.is_set() and not self.runtime.table.shutting_down:
            responder = _LineResponder(self.out, replies=False)
            await self.runtime.serve_guarded(HttpRequest(
                method="GET", path=self.runtime.config.path,
                headers=self._headers(None, last_event_id=cursor),
                local_host="stdio", peer_host="stdio",
            ), responder)
            responder.close()
            if responder.reply_body:
                # Refused (the session ended, the cursor left retention): open it afresh
                # once, after a pause; a session that is gone stays gone.
                if cursor is None:
                    return
                cursor = None
            else:
                cursor = responder.last_event_id or cursor
            await trio.sleep(0.05)


def stdio_config(config: ServerConfig) -> ServerConfig:
    """The settings of a stdio server: SSE answers (a request's messages go out while it
    runs), no authorization (T-SEC-6: stdio takes its credentials from the environment)
    and no shared store (one host, one process). The stall budget stays: a stream cut for
    a host that does not read is re-attached by the edge (TM-STDIO-BACKPRESSURE)."""
    from ..base._config import ResponseMode

    return attrs.evolve(
        config, response_mode=ResponseMode.SSE, auth=None, store=None,
    )


async def serve_stdio(
    server: App,
    *,
    config: ServerConfig | None = None,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    max_exchanges: int = MAX_EXCHANGES,
    ready: Callable[[StdioEdge], Awaitable[None] | None] | None = None,
) -> None:
    """Serve ``server`` to the host on this process's stdin and stdout (or the streams
    given) until stdin ends; then shut down gracefully (TM-STDIO-EOF)."""
    from ..base._config import ServerConfig
    from ..runtime._runtime import Runtime

    cfg = stdio_config(config or ServerConfig.from_environment())
    own = stdin is None and stdout is None
    saved: int | None = None
    if own:
        out_fd, saved = reserve_stdout()
        stdin = trio.lowlevel.FdStream(os.dup(0))
        stdout = trio.lowlevel.FdStream(out_fd)
    assert stdin is not None and stdout is not None
    runtime = Runtime(server, cfg, bind_hosts=["stdio"])
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(runtime.run)
            edge = StdioEdge(runtime, stdin, stdout, max_exchanges=max_exchanges)
            logger.info("serving %s on stdio", server.server_info().get("name"))
            if ready is not None:
                maybe = ready(edge)
                if maybe is not None:
                    await maybe
            await edge.run(cfg.shutdown_grace)
            nursery.cancel_scope.cancel()
    finally:
        if own:
            with trio.CancelScope(shield=True):
                await stdin.aclose()
                await stdout.aclose()
            if saved is not None:
                _restore_stdout(saved)


#: What reserve_stdout kept, once it has run: (the messages' descriptor, the original's).
_RESERVED: list[tuple[int, int]] = []


def reserve_stdout() -> tuple[int, int]:
    """Keep the real stdout for the messages alone (TM-STDIO-STDOUT): file descriptor 1
    and ``sys.stdout`` are pointed at stderr, so that a print() of the application or of a
    library, at import or in a handler, cannot corrupt the stream. The command line calls it
    before it imports the server's module. Returns a descriptor for the messages, and one
    that restores descriptor 1."""
    if not _RESERVED:
        sys.stdout.flush()
        out_fd, saved = os.dup(1), os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        _RESERVED.append((out_fd, saved))
    return _RESERVED[0]


def _restore_stdout(saved: int) -> None:
    _RESERVED.clear()
    os.dup2(saved, 1)
    os.close(saved)
    sys.stdout = sys.__stdout__
