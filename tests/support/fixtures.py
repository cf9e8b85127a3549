"""Fixtures shared by every test directory (registered by tests/conftest.py)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypercorn.trio import serve as hypercorn_serve

from trio_mcp import Server, ServerConfig
from trio_mcp.edges._asgi import ASGIApp
from trio_mcp.edges._http import HttpServer, serve_relay_port
from trio_mcp.edges._serve import hypercorn_config, listening_socket
from trio_mcp.runtime._runtime import Runtime
from trio_mcp.runtime._stats import as_dict
from trio_mcp.runtime.legacy._table import SessionTable
from trio_mcp.runtime.store._cluster import Cluster
from trio_mcp.runtime.store._stores import with_store

__all__ = [
    "HTTP_SERVERS",
    "LiveServer",
    "OwnApp",
    "StartServer",
    "demo_url",
    "free_port",
    "http_server",
    "jumping_clock",
    "live_server",
    "start_live",
    "wait_until",
]


#: The HTTP servers a live server runs on (issue 19: the suite passes on both).
HTTP_SERVERS = ("trio-mcp", "hypercorn")


@attrs.frozen(kw_only=True)
class OwnApp:
    """What the tests look at of a server on trio-mcp's own HTTP server, with the names an
    ASGIApp has (``runtime``, ``table``, ``server``, ``config``)."""

    server: Server
    config: ServerConfig
    runtime: Runtime

    @property
    def table(self) -> SessionTable:
        return self.runtime.table


@attrs.frozen(kw_only=True)
class LiveServer:
    """A server running on a real HTTP server on loopback, for the length of one test."""

    app: ASGIApp | OwnApp
    host: str
    port: int
    url: str
    """The MCP endpoint, e.g. ``http://127.0.0.1:PORT/mcp``."""
    http_server: str = "hypercorn"
    """Which HTTP server: "trio-mcp" (its own) or "hypercorn"."""

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def server(self) -> Server:
        return self.app.server  # type: ignore[return-value]

    @property
    def runtime(self) -> Runtime:
        return self.app.runtime

    @property
    def table(self) -> SessionTable:
        """The legacy sessions."""
        return self.app.runtime.table

    @property
    def cluster(self) -> Cluster:
        """This worker's part of a cluster (a server with a shared store)."""
        peers = self.app.runtime.peers
        assert isinstance(peers, Cluster), "not a server with a shared store"
        return peers

    def stats(self) -> dict[str, int | float]:
        """The counters of TM-BP-COUNTERS by their names (what the stats port serves)."""
        return as_dict(self.app.runtime.statistics())


StartServer = Callable[..., Awaitable[LiveServer]]


async def wait_until(predicate: Callable[[], bool], *, poll: float = 0.005) -> None:
    """Wait until ``predicate()`` holds: for server state that follows a client action
    asynchronously (a dropped connection is noticed a few task switches later). Bound the
    wait with the test's ``trio.fail_after``."""
    # Polling, because the server's internals offer no event for these (ASYNC110).
    while not predicate():  # noqa: ASYNC110
        await trio.sleep(poll)


async def _serve(
    app: ASGIApp,
    host: str,
    port: int = 0,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    # What trio_mcp.serve() does, but with the app in our hands, so tests can look at the
    # session manager. Port 0: the OS picks a free port, reported through task_status.
    hc = hypercorn_config(host=host, port=port)
    # hypercorn types apps with its own TypedDict events; ours takes plain mappings.
    asgi: Any = app
    async with app.running():
        await hypercorn_serve(asgi, hc, task_status=task_status)


async def _serve_own(
    runtime: Runtime,
    host: str,
    port: int = 0,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    # What trio_mcp.serve(http_server="trio-mcp") does, with the runtime in our hands.
    sock = listening_socket(host, port, user_timeout_ms=None)
    sock.listen(128)
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    http = HttpServer(runtime, runtime.config)
    port = sock.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        if runtime.peers.serves_relays:
            await nursery.start(serve_relay_port, runtime, runtime.config)
        await nursery.start(lambda task_status: http.serve([listener], task_status=task_status))
        task_status.started([f"http://{host}:{port}"])


async def start_live(
    nursery: trio.Nursery,
    server: Server | None = None,
    config: ServerConfig | None = None,
    *,
    http_server: str = "hypercorn",
    port: int = 0,
) -> LiveServer:
    """Start ``server`` (the demo server by default) on ``http_server`` in ``nursery``."""
    if server is None:
        from trio_mcp.demo import server as demo

        server = demo
    config = config or ServerConfig()
    host = "127.0.0.1"
    app: ASGIApp | OwnApp
    if http_server == "hypercorn":
        app = ASGIApp(server, config, bind_hosts=[host])
        binds = await nursery.start(_serve, app, host, port)
    else:
        runtime = Runtime(server, with_store(config), bind_hosts=[host])
        app = OwnApp(server=server, config=config, runtime=runtime)
        binds = await nursery.start(_serve_own, runtime, host, port)
    port = int(binds[0].rsplit(":", 1)[1])
    return LiveServer(
        app=app, host=host, port=port, url=f"http://{host}:{port}{config.path}",
        http_server=http_server,
    )


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a server that must know its URL before it starts
    (one whose configuration names it, as authorization does)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture(params=HTTP_SERVERS)
def http_server(request: pytest.FixtureRequest) -> str:
    """Which HTTP server a test's live server runs on: the suite runs on both."""
    name: str = request.param
    return name


@pytest.fixture
async def live_server(nursery: trio.Nursery, http_server: str) -> StartServer:
    """A factory: ``await live_server(server=None, config=None)`` starts a server (the demo
    server by default) in the test's nursery, on the HTTP server of this run of the test
    (``http_server``: each test runs on trio-mcp's own and on hypercorn), and returns a
    LiveServer. It stops when the test ends."""

    async def start(
        server: Server | None = None, config: ServerConfig | None = None, port: int = 0
    ) -> LiveServer:
        return await start_live(nursery, server, config, http_server=http_server, port=port)

    return start


@pytest.fixture
async def demo_url(live_server: StartServer) -> str:
    """The MCP endpoint URL of the demo server with the default configuration."""
    return (await live_server()).url


@pytest.fixture
def jumping_clock() -> trio.testing.MockClock:
    """The test's clock (pytest-trio runs a test on a Clock fixture it asks for): it keeps
    the wall clock's pace, and the test can move it forward at once with ``jump``. For a test
    over real sockets that must wait out a time to live: the TTL can be far longer than a
    loaded machine could take to do what comes before it, and its passing still costs no
    waiting."""
    return trio.testing.MockClock(rate=1.0)


@pytest.fixture
def no_server_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test if the server logged an error (an unexpected exception) while it ran;
    a module asks for it with ``pytestmark = pytest.mark.usefixtures("no_server_errors")``."""
    with caplog.at_level(logging.WARNING, logger="trio_mcp"):
        yield
    errors = [
        r for r in caplog.records if r.name.startswith("trio_mcp") and r.levelno >= logging.ERROR
    ]
    assert errors == [], [r.getMessage() for r in errors]
