# Serving over HTTP: the embedding API (`await serve(...)`, with task_status for
# nursery.start) used by the command line too, on trio-mcp's own HTTP/1.1 server (the
# default, TM-HTTP-OWN) or under hypercorn's trio worker (the ASGI app; HTTP/2 over TLS).
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Literal

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from ..base._config import ServerConfig
from ..protocol import Headers, OriginPolicy, RemoteProtocolError, Reply
from ..protocol._edge import version_not_supported
from ..protocol._transport import error_reply
from ..runtime._stats import as_dict
from ..runtime.backpressure._writer import RATE_LOOKBACK
from ._hypercorn import answer_lifespan, isolate_connections
from .observe._inspect import InspectorApp, TaskCounter, TreeBuilder, check_loopback
from .observe._metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .observe._metrics import MetricsExporter

if TYPE_CHECKING:
    from ..base._ports import App
    from ..runtime._runtime import Runtime

__all__ = ["HTTP_SERVERS", "serve"]

#: The HTTP servers `serve` runs on: trio-mcp's own, or hypercorn.
HTTP_SERVERS = ("trio-mcp", "hypercorn")
HttpServerName = Literal["trio-mcp", "hypercorn"]

logger = logging.getLogger("trio_mcp.serve")

#: Linux's TCP_USER_TIMEOUT (milliseconds unacknowledged data may wait before the kernel
#: aborts the connection); not every Python build names it.
TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", 18)


def listening_socket(
    host: str, port: int, *, user_timeout_ms: int | None, reuse_port: bool = False
) -> socket.socket:
    """A bound socket for hypercorn (passed as ``fd://``), with TCP_USER_TIMEOUT set.

    Accepted connections inherit the option, so the kernel itself aborts a connection whose
    peer stopped acknowledging data (a zero window or a vanished host) after that long: a
    last line of defence behind the stall detector (TM-BP-RELEASE), for the writes no
    connection writer watches (a plain reply) and for connections already closed.
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        # TM-WORK-PROCESSES: the workers of one pool each listen on the port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if user_timeout_ms is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT, user_timeout_ms)
        except OSError:  # not Linux: the stall detector alone applies
            logger.debug("TCP_USER_TIMEOUT is not available here")
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        # The address in the message: the bare errno text does not say which port is taken.
        raise OSError(exc.errno, f"{exc.strerror}: {host}:{port}") from None
    sock.set_inheritable(True)
    return sock


def user_timeout(cfg: ServerConfig) -> float:
    """TCP_USER_TIMEOUT for the accepted connections, in seconds (TM-BP-RELEASE).

    Linux aborts a connection whose unsent data has waited on a closed window this long,
    however fast its reader drains between window probes: readers at 2.5 and 4 KiB/s, kept
    behind by a faster handler, were aborted at exactly the timeout while reading (measured
    on loopback). So it is only the last line, far behind the stall detector, which judges
    by rate and sends the signal: never before the detector's latest cut plus
    ``signal_timeout``, and at least 30 stall budgets (5 minutes by default).
    """
    latest_cut = (RATE_LOOKBACK + 1) * cfg.stall_budget + cfg.signal_timeout
    return max(30 * cfg.stall_budget, latest_cut)


def hypercorn_config(
    *,
    host: str,
    port: int,
    certfile: str | None = None,
    keyfile: str | None = None,
    fd: int | None = None,
) -> HypercornConfig:
    hc = HypercornConfig()
    if fd is not None:
        hc.bind = [f"fd://{fd}"]
    else:
        bind_host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        hc.bind = [f"{bind_host}:{port}"]
    hc.certfile = certfile
    hc.keyfile = keyfile
    # TM-SEC-H2: the app answers HTTP/2 with 505; a TLS client that offers both is steered
    # to HTTP/1.1 instead.
    hc.alpn_protocols = ["http/1.1"]
    if certfile is None:
        # hypercorn times every connection's TLS handshake, plain ones too: a 60 s deadline
        # that trio keeps in its deadline heap, with the connection's cancel scope, for a
        # minute after the connection closed (TM-SESS-RELEASE). Without TLS there is no
        # handshake to time.
        hc.ssl_handshake_timeout = math.inf
    hc.accesslog = None
    # One logger, no handler of hypercorn's own: the application decides where logs go.
    hc.errorlog = logging.getLogger("hypercorn.error")
    # Shutdown closes our streams first (SessionTable.shutdown); this bounds the rest.
    hc.graceful_timeout = 5.0
    return hc


async def serve(
    server: App,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    config: ServerConfig | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    stats_port: int | None = None,
    http_server: HttpServerName = "trio-mcp",
    sock: socket.socket | None = None,
    inspect_port: int | None = None,
    inspect_host: str = "127.0.0.1",
    announce: bool = True,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``server`` over HTTP until cancelled, or until ``shutdown_trigger`` returns.

    T-SEC-4 (SHOULD): the default bind is loopback only. ``task_status.started`` reports
    the URLs served (port 0 picks a free port), so this works with ``nursery.start``: the
    MCP endpoint first, with its path (``http://127.0.0.1:8000/mcp``), then the counters'
    and the inspector's when asked for. With ``announce`` (the default) each is logged at
    start-up (INFO, logger ``trio_mcp.serve``), and written to stderr when the program has
    not configured logging.

    ``http_server`` chooses the HTTP server: ``"trio-mcp"`` (the default), trio-mcp's own
    HTTP/1.1 server, which owns its connections (TM-HTTP-OWN); or ``"hypercorn"``, which
    hosts the ASGI app (and speaks HTTP/2 over TLS).

    When ``shutdown_trigger`` returns, the shutdown is graceful (TM-SESS-SHUTDOWN): every
    SSE connection gets a ``retry`` field and is closed, running handlers get
    ``config.shutdown_grace`` seconds to finish, then every session ends.

    With ``stats_port``, the counters of ``Runtime.statistics()`` are served as JSON on
    ``http://127.0.0.1:<stats_port>/`` (always loopback, whatever ``host`` is), and in the
    Prometheus text format at ``/metrics`` there.

    ``sock``, a bound socket, is served instead of binding ``host`` and ``port``: a worker
    of ``trio-mcp serve --workers`` serves the one its parent listens on.

    With ``inspect_port``, the live task tree (TM-SEC-INSPECT) is served on
    ``http://<inspect_host>:<inspect_port>/``: a page, ``/tree.json`` and ``/events``.
    ``inspect_host`` must be a loopback address (ValueError otherwise, before anything is
    bound); its URL is the last of those reported, and ends in ``/``.
    """
    cfg = config or ServerConfig()
    inspect_at = None
    if inspect_port is not None:
        check_loopback(inspect_host)
        inspect_at = (inspect_host, inspect_port)
    if http_server not in HTTP_SERVERS:
        raise ValueError(f"http_server is one of {', '.join(HTTP_SERVERS)}, not {http_server!r}")
    status: trio.TaskStatus[list[str]] = _Announcing(
        task_status, server.name if announce else None
    )
    if http_server == "hypercorn":
        await _serve_hypercorn(
            server, host, port, cfg, certfile, keyfile, shutdown_trigger, stats_port, sock,
            status, inspect_at=inspect_at,
        )
        return
    await _serve_own(
        server, host, port, cfg, certfile, keyfile, shutdown_trigger, stats_port, sock,
        status, inspect_at=inspect_at,
    )


class _Announcing:
    """The caller's task status, which also tells the URLs served (when given a name)."""

    def __init__(self, inner: trio.TaskStatus[list[str]], name: str | None) -> None:
        self._inner = inner
        self._name = name

    def started(self, value: list[str] | None = None) -> None:
        assert value is not None
        if self._name is not None:
            for index, url in enumerate(value):
                what = self._name if index == 0 else (
                    "counters" if url.endswith("/stats") else "the live task tree"
                )
                logger.info("serving %s at %s", what, url)
                if not logger.hasHandlers():
                    # No logging configured: the URL would be lost, so it goes to stderr.
                    print(f"trio-mcp: serving {what} at {url}", file=sys.stderr, flush=True)
        self._inner.started(value)


async def _serve_own(
    server: App,
    host: str,
    port: int,
    cfg: ServerConfig,
    certfile: str | None,
    keyfile: str | None,
    shutdown_trigger: Callable[[], Awaitable[None]] | None,
    stats_port: int | None,
    sock: socket.socket | None,
    task_status: trio.TaskStatus[list[str]],
    *,
    inspect_at: tuple[str, int] | None = None,
) -> None:
    from ..runtime._runtime import Runtime
    from ..runtime.store._stores import with_store
    from ._http import HttpServer, serve_relay_port

    runtime = Runtime(server, with_store(cfg), bind_hosts=[host])
    if sock is None:
        sock = listening_socket(host, port, user_timeout_ms=int(user_timeout(cfg) * 1000))
    sock.listen(1024)
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    ssl_context = None
    if certfile is not None:
        import ssl

        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_context.load_cert_chain(certfile, keyfile)
        # HTTP/1.1 only: no h2 on this server (TM-HTTP-OWN).
        ssl_context.set_alpn_protocols(["http/1.1"])
    http = HttpServer(runtime, cfg)
    bound = sock.getsockname()
    scheme = "https" if ssl_context is not None else "http"
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    stopped = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        if runtime.peers.serves_relays:
            await nursery.start(serve_relay_port, runtime, cfg)
        await nursery.start(lambda task_status: http.serve(
            [listener], ssl_context=ssl_context, task_status=task_status
        ), name="HttpServer.serve")
        urls = [f"{scheme}://{shown}:{bound[1]}{cfg.path}"]
        if stats_port is not None:
            urls += await nursery.start(_serve_stats, runtime, stats_port, stopped)
        if inspect_at is not None:
            urls += await nursery.start(_serve_inspector, runtime, inspect_at, stopped)
        task_status.started(urls)
        if shutdown_trigger is None:
            await trio.sleep_forever()
        await shutdown_trigger()
        # TM-SESS-SHUTDOWN: no new connection, idle ones closed, streams told to retry,
        # running requests given the grace; then what is left ends.
        http.stop_accepting()
        await runtime.shutdown(cfg.shutdown_grace)
        with trio.move_on_after(1.0):
            await http.drain()
        stopped.set()
        nursery.cancel_scope.cancel()


async def _serve_stats(
    runtime: Runtime,
    port: int,
    stopped: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    # TM-SEC-ISOLATE: hypercorn runs this port inside the server's nursery: one connection's
    # failure must end that connection, not the MCP server beside it.
    isolate_connections()
    stats_hc = hypercorn_config(host="127.0.0.1", port=port)
    stats_hc.keep_alive_timeout = runtime.config.http_idle_timeout
    stats_app: Any = side_port(StatsApp(runtime))
    urls: list[str] = []

    async def run(task_status: trio.TaskStatus[list[str]]) -> None:
        await hypercorn_serve(
            stats_app, stats_hc, shutdown_trigger=stopped.wait, task_status=task_status
        )

    async with trio.open_nursery() as nursery:
        urls = await nursery.start(run)
        task_status.started([u + "/stats" for u in urls])


async def _serve_inspector(
    runtime: Runtime,
    at: tuple[str, int],
    stopped: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """TM-SEC-INSPECT: the live task tree on loopback, its task counter installed in trio for as
    long as it runs, and only then."""
    host, port = at
    check_loopback(host)
    isolate_connections()  # TM-SEC-ISOLATE, as for the stats port
    counter = TaskCounter()
    app: Any = side_port(InspectorApp(TreeBuilder(runtime, counter), stopped))
    hc = hypercorn_config(host=host, port=port)
    hc.keep_alive_timeout = runtime.config.http_idle_timeout

    async def run(task_status: trio.TaskStatus[list[str]]) -> None:
        await hypercorn_serve(app, hc, shutdown_trigger=stopped.wait, task_status=task_status)

    trio.lowlevel.add_instrument(counter)
    try:
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(run, name="inspector: hypercorn.trio.serve")
            task_status.started([u + "/" for u in urls])
    finally:
        trio.lowlevel.remove_instrument(counter)


async def _serve_hypercorn(
    server: App,
    host: str,
    port: int,
    cfg: ServerConfig,
    certfile: str | None,
    keyfile: str | None,
    shutdown_trigger: Callable[[], Awaitable[None]] | None,
    stats_port: int | None,
    sock: socket.socket | None,
    task_status: trio.TaskStatus[list[str]],
    *,
    inspect_at: tuple[str, int] | None = None,
) -> None:
    from ._asgi import ASGIApp

    app = ASGIApp(server, cfg, bind_hosts=[host])
    if sock is None:
        sock = listening_socket(host, port, user_timeout_ms=int(user_timeout(cfg) * 1000))
    # hypercorn wraps the descriptor it is given and closes it when it stops: it gets a
    # duplicate, so each side closes only its own.
    fd = os.dup(sock.fileno())
    sock.close()
    hc = hypercorn_config(host=host, port=port, certfile=certfile, keyfile=keyfile, fd=fd)
    # How long a kept-alive connection may wait for its next request, as on trio-mcp's own
    # server (hypercorn's default is the same 5 s); hypercorn also keeps a connection whose
    # client has closed it until then.
    hc.keep_alive_timeout = cfg.http_idle_timeout
    stopped = trio.Event()

    async def graceful() -> None:
        if shutdown_trigger is None:
            await trio.sleep_forever()
        else:
            await shutdown_trigger()
        await app.runtime.shutdown(cfg.shutdown_grace)
        stopped.set()

    # hypercorn types apps with its own TypedDict events; ours takes plain mappings.
    asgi: Any = app
    started = False
    try:
        async with app.running(), trio.open_nursery() as nursery:
            bound: list[str] = await nursery.start(
                lambda task_status: hypercorn_serve(
                    asgi, hc, shutdown_trigger=graceful, task_status=task_status
                )
            )
            started = True
            urls = [url + cfg.path for url in bound]
            if stats_port is not None:
                urls += await nursery.start(_serve_stats, app.runtime, stats_port, stopped)
            if inspect_at is not None:
                urls += await nursery.start(_serve_inspector, app.runtime, inspect_at, stopped)
            task_status.started(urls)
    finally:
        if not started:
            with contextlib.suppress(OSError):
                os.close(fd)


AsgiApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]


def side_port(app: AsgiApp) -> AsgiApp:
    """``app`` as a side port serves it (the counters, the inspector), under hypercorn.

    hypercorn serves HTTP/2 with prior knowledge on any port and cannot be told not to, so
    every HTTP/2 request is answered 505, as at the endpoint (TM-SEC-H2): an HTTP/2 stream
    whose client grants no credit would have hypercorn buffer the inspector's snapshots
    without end. And a send that fails because hypercorn is closing the connection under
    the app (pgjones/hypercorn#203: a ``BusyResourceError``), or because the client left,
    ends the request quietly, as the ASGI adapter's responder does (TM-SEC-ISOLATE)."""

    async def serve_side(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        async def sending(message: MutableMapping[str, Any]) -> None:
            try:
                await send(message)
            except (
                OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                trio.BusyResourceError,
            ) as exc:
                raise _Gone from exc

        http2 = scope["type"] == "http" and scope.get("http_version", "1.1") not in ("1.0", "1.1")
        serving = _refuse_http2 if http2 else app
        try:
            await serving(scope, receive, sending)
        except* _Gone:
            pass  # the connection is over: nothing to answer, nothing to log

    return serve_side


class _Gone(Exception):
    """A side port's connection went while its app was sending."""


async def _refuse_http2(
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
) -> None:
    await _send_reply(send, error_reply(version_not_supported()))


async def _send_reply(
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]], reply: Reply
) -> None:
    await send({
        "type": "http.response.start",
        "status": reply.status,
        "headers": [
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers),
            (b"content-length", str(len(reply.body)).encode()),
        ],
    })
    await send({"type": "http.response.body", "body": reply.body})


#: The stats port listens on loopback only, so it checks Origin and Host as a loopback MCP
#: endpoint does (TM-SEC-HOST): a page elsewhere cannot read it through DNS rebinding.
_STATS_POLICY = OriginPolicy.for_bind(["127.0.0.1"])


class StatsApp:
    """A read-only ASGI app that answers every GET with the runtime's counters: as JSON, or
    at ``/metrics`` in the Prometheus text format. A request whose Host is not a loopback
    name gets 421, one from a foreign Origin 403, as at the MCP endpoint (TM-BP-COUNTERS)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.metrics = MetricsExporter(runtime.statistics, runtime.requests)

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        try:
            _STATS_POLICY.check(Headers(list(scope.get("headers", []))))
        except RemoteProtocolError as exc:
            await _send_reply(send, error_reply(exc))
            return
        ok = scope["method"] == "GET"
        content_type = b"application/json"
        if ok and scope.get("path") == "/metrics":
            # The same counters in the Prometheus text format.
            body = self.metrics.render()
            content_type = METRICS_CONTENT_TYPE.encode()
        else:
            stats = as_dict(self.runtime.statistics()) if ok else {"error": "GET only"}
            body = json.dumps(stats).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200 if ok else 405,
                "headers": [(b"content-type", content_type),
                            (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
