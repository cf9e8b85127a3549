# Serving over HTTP with hypercorn's trio worker: the embedding API (`await serve(...)`, with
# task_status for nursery.start) used by the command line too.
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from ._config import ServerConfig
from ._trio._writer import RATE_LOOKBACK

if TYPE_CHECKING:
    from ._ports import App
    from ._trio._runtime import Runtime

__all__ = ["serve"]

logger = logging.getLogger("trio_mcp.serve")

#: Linux's TCP_USER_TIMEOUT (milliseconds unacknowledged data may wait before the kernel
#: aborts the connection); not every Python build names it.
TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", 18)


def listening_socket(host: str, port: int, *, user_timeout_ms: int | None) -> socket.socket:
    """A bound socket for hypercorn (passed as ``fd://``), with TCP_USER_TIMEOUT set.

    Accepted connections inherit the option, so the kernel itself aborts a connection whose
    peer stopped acknowledging data (a zero window or a vanished host) after that long: a
    last line of defence behind the stall detector (TM-BP-RELEASE), for the writes no
    connection writer watches (a plain reply) and for connections already closed.
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if user_timeout_ms is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT, user_timeout_ms)
        except OSError:  # not Linux: the stall detector alone applies
            logger.debug("TCP_USER_TIMEOUT is not available here")
    sock.bind((host.strip("[]"), port))
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
    if certfile is None:
        # hypercorn times every connection's TLS handshake, plain ones too: a 60 s deadline
        # that trio keeps in its deadline heap, with the connection's cancel scope, for a
        # minute after the connection closed (TM-SESS-RELEASE). Without TLS there is no
        # handshake to time.
        hc.ssl_handshake_timeout = math.inf
    hc.accesslog = None
    # One logger, no handler of hypercorn's own: the application decides where logs go.
    hc.errorlog = logging.getLogger("hypercorn.error")
    # Shutdown closes our streams first (SessionManager.shutdown); this bounds the rest.
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
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``server`` over HTTP until cancelled, or until ``shutdown_trigger`` returns.

    T-SEC-4 (SHOULD): the default bind is loopback only. ``task_status.started`` reports
    the bound URLs (port 0 picks a free port), so this works with ``nursery.start``.

    When ``shutdown_trigger`` returns, the shutdown is graceful (TM-SESS-SHUTDOWN): every
    SSE connection gets a ``retry`` field and is closed, running handlers get
    ``config.shutdown_grace`` seconds to finish, then every session ends.

    With ``stats_port``, the counters of ``SessionManager.statistics()`` are served as JSON
    on ``http://127.0.0.1:<stats_port>/`` (always loopback, whatever ``host`` is).
    """
    from ._asgi import ASGIApp

    cfg = config or ServerConfig()
    app = ASGIApp(server, cfg, bind_hosts=[host])
    sock = listening_socket(host, port, user_timeout_ms=int(user_timeout(cfg) * 1000))
    # hypercorn wraps the descriptor it is given and closes it when it stops: it gets a
    # duplicate, so each side closes only its own.
    fd = os.dup(sock.fileno())
    sock.close()
    hc = hypercorn_config(host=host, port=port, certfile=certfile, keyfile=keyfile, fd=fd)
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
            urls: list[str] = await nursery.start(
                lambda task_status: hypercorn_serve(
                    asgi, hc, shutdown_trigger=graceful, task_status=task_status
                )
            )
            started = True
            if stats_port is not None:
                stats_hc = hypercorn_config(host="127.0.0.1", port=stats_port)
                stats_app: Any = StatsApp(app.runtime)
                urls += [
                    u + "/stats"
                    for u in await nursery.start(
                        lambda task_status: hypercorn_serve(
                            stats_app, stats_hc, shutdown_trigger=stopped.wait,
                            task_status=task_status,
                        )
                    )
                ]
            task_status.started(urls)
    finally:
        if not started:
            with contextlib.suppress(OSError):
                os.close(fd)


class StatsApp:
    """A read-only ASGI app that answers every GET with the runtime's counters as JSON."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        ok = scope["method"] == "GET"
        body = json.dumps(self.runtime.statistics() if ok else {"error": "GET only"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200 if ok else 405,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
