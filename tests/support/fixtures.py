"""Fixtures shared by every test directory (registered by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
from hypercorn.trio import serve as hypercorn_serve

from trio_mcp import Server, ServerConfig
from trio_mcp._asgi import ASGIApp
from trio_mcp._serve import hypercorn_config
from trio_mcp._trio._manager import SessionManager

__all__ = ["LiveServer", "StartServer", "demo_url", "live_server", "wait_until"]


@attrs.frozen(kw_only=True)
class LiveServer:
    """A server running under real hypercorn on loopback, for the length of one test."""

    app: ASGIApp
    host: str
    port: int
    url: str
    """The MCP endpoint, e.g. ``http://127.0.0.1:PORT/mcp``."""

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def server(self) -> Server:
        return self.app.server

    @property
    def manager(self) -> SessionManager:
        return self.app.manager


StartServer = Callable[..., Awaitable[LiveServer]]


async def wait_until(predicate: Callable[[], bool], *, poll: float = 0.005) -> None:
    """Wait until ``predicate()`` holds: for server state that follows a client action
    asynchronously (a dropped connection is noticed a few task switches later). Bound the
    wait with the test's ``trio.fail_after``."""
    # Polling, because the server's internals offer no event for these (ASYNC110).
    while not predicate():  # noqa: ASYNC110
        await trio.sleep(poll)


async def _serve(
    app: ASGIApp, host: str, *, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED
) -> None:
    # What trio_mcp.serve() does, but with the app in our hands, so tests can look at the
    # session manager. Port 0: the OS picks a free port, reported through task_status.
    hc = hypercorn_config(host=host, port=0)
    # hypercorn types apps with its own TypedDict events; ours takes plain mappings.
    asgi: Any = app
    async with app.running():
        await hypercorn_serve(asgi, hc, task_status=task_status)


@pytest.fixture
async def live_server(nursery: trio.Nursery) -> StartServer:
    """A factory: ``await live_server(server=None, config=None)`` starts a server (the demo
    server by default) in the test's nursery and returns a LiveServer. It stops when the
    test ends."""

    async def start(server: Server | None = None, config: ServerConfig | None = None) -> LiveServer:
        if server is None:
            from trio_mcp.demo import server as demo

            server = demo
        config = config or ServerConfig()
        host = "127.0.0.1"
        app = ASGIApp(server, config, bind_hosts=[host])
        binds = await nursery.start(_serve, app, host)
        port = int(binds[0].rsplit(":", 1)[1])
        return LiveServer(
            app=app,
            host=host,
            port=port,
            url=f"http://{host}:{port}{config.path}",
        )

    return start


@pytest.fixture
async def demo_url(live_server: StartServer) -> str:
    """The MCP endpoint URL of the demo server with the default configuration."""
    return (await live_server()).url
