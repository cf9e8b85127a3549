# What trio-mcp changes in hypercorn when it hosts the ASGI app (TM-SEC-ISOLATE): one
# connection's failure inside hypercorn's trio worker ends that connection, not the server.
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .protocol._logtext import LogLimiter

__all__ = ["answer_lifespan", "isolate_connections"]

logger = logging.getLogger("trio_mcp.hypercorn")
_failures = LogLimiter(interval=10.0)


def isolate_connections() -> None:
    """Make each of hypercorn's trio connections end by itself when it fails.

    hypercorn's trio worker (0.18; pgjones/hypercorn#203) lets an error raised while it
    serves one connection (an HTTP/1.0 request followed by more bytes makes its error
    response race its own close: ``BusyResourceError``) escape into the nursery of every
    connection, which ends the whole server: one crafted request of a few KiB took it down.
    The wrapper catches what one connection raises (not a cancellation), after hypercorn's
    own clean-up has run. Idempotent; it changes hypercorn for the whole process.
    """
    try:
        from hypercorn.trio.tcp_server import TCPServer
    except ImportError:  # pragma: no cover - hypercorn is a dependency
        return
    run: Any = TCPServer.run
    if getattr(run, "_trio_mcp_isolated", False):
        return

    async def isolated_run(self: Any) -> None:
        try:
            await run(self)
        except Exception as exc:
            tail = _failures.tail()
            if tail is not None:
                logger.info("a connection failed inside hypercorn and was closed: %r%s", exc, tail)

    isolated_run._trio_mcp_isolated = True  # type: ignore[attr-defined]
    TCPServer.run = isolated_run  # type: ignore[method-assign]


async def answer_lifespan(
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
) -> None:
    """The ASGI lifespan protocol of an app with nothing to start or stop (the side ports:
    counters, inspector): every startup and shutdown is acknowledged at once."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return
