# What trio-mcp changes in hypercorn when it runs it (TM-SEC-ISOLATE): one connection's failure
# inside hypercorn's trio worker ends that connection, not the server, on every port
# hypercorn serves for trio-mcp (the MCP endpoint under --server hypercorn, the stats port
# and the inspector's).
from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..runtime._failures import FailureLog

__all__ = ["answer_lifespan", "failures", "isolate_connections"]

logger = logging.getLogger("trio_mcp.hypercorn")
#: What the guard caught, in every hypercorn this process runs: a failure of hypercorn's (its
#: issue #203 above, or another), hence a warning where trio-mcp's own server logs an error.
failures = FailureLog(
    logger, "a connection failed inside hypercorn and was closed", level=logging.WARNING
)


def isolate_connections() -> None:
    """Make each of hypercorn's trio connections end by itself when it fails.

    hypercorn's trio worker (0.18; pgjones/hypercorn#203) lets an error raised while it
    serves one connection (an HTTP/1.0 request followed by more bytes makes its error
    response race its own close: ``BusyResourceError``) escape into the nursery of every
    connection, which ends the whole server: one crafted request of a few KiB took it down.
    The wrapper catches what one connection raises (not a cancellation), after hypercorn's
    own clean-up has run, and logs it (trio_mcp.runtime._failures: per place, rate-limited).
    Idempotent; it changes hypercorn for the whole process.
    """
    try:
        from hypercorn.trio.tcp_server import TCPServer
    except ImportError:  # pragma: no cover - hypercorn is a dependency
        return
    run: Any = TCPServer.run
    if getattr(run, "_trio_mcp_isolated", False):
        return

    @functools.wraps(run)
    async def isolated_run(self: Any) -> None:
        try:
            await run(self)
        except Exception as exc:
            failures.caught(exc)

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
