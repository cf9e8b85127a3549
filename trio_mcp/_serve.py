# Serving over HTTP with hypercorn's trio worker: the embedding API (`await serve(...)`, with
# task_status for nursery.start) used by the command line too.
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from ._config import ServerConfig

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["serve"]

logger = logging.getLogger("trio_mcp.serve")


def hypercorn_config(
    *,
    host: str,
    port: int,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> HypercornConfig:
    hc = HypercornConfig()
    bind_host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    hc.bind = [f"{bind_host}:{port}"]
    hc.certfile = certfile
    hc.keyfile = keyfile
    hc.accesslog = None
    # SSE streams are long-lived: hypercorn's keep-alive timeout applies between requests
    # only, and shutdown gives streams this long to finish.
    hc.graceful_timeout = 5.0
    return hc


async def serve(
    server: Server,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    config: ServerConfig | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``server`` over HTTP until cancelled (or until ``shutdown_trigger`` returns).

    T-SEC-4 (SHOULD): the default bind is loopback only. ``task_status.started`` reports
    the bound URLs (port 0 picks a free port), so this works with ``nursery.start``.
    """
    from ._asgi import ASGIApp

    app = ASGIApp(server, config or ServerConfig(), bind_hosts=[host])
    hc = hypercorn_config(host=host, port=port, certfile=certfile, keyfile=keyfile)
    async with app.running():
        # hypercorn types apps with its own TypedDict events; ours takes plain mappings.
        asgi: Any = app
        await hypercorn_serve(asgi, hc, shutdown_trigger=shutdown_trigger, task_status=task_status)
