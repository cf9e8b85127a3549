# The application's own routes and mounting (issue 40, spec/handlers.md TM-HAND-ROUTE):
# @server.route("/health") answers beside the MCP endpoint on both HTTP servers, and the ASGI
# app mounted under a prefix beside another ASGI app (hypercorn's dispatcher) serves its
# endpoint below the prefix, with its lifespan.
from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from hypercorn.middleware.dispatcher import TrioDispatcherMiddleware
from hypercorn.trio import serve as hypercorn_serve
from support.client import request
from support.eras import ERAS, tool_call
from support.fixtures import StartServer
from support.modern import modern_request, post

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.edges._serve import hypercorn_config

TIMEOUT = 20

pytestmark = pytest.mark.spec("TM-HAND-ROUTE")


def routed_server(state: dict[str, Any]) -> Server:
    server = Server("routed")

    @server.route("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok"}

    @server.route("/ready")
    async def ready() -> tuple[int, str]:
        return (200, "ready") if state.get("ready") else (503, "starting")

    @server.route("/broken", methods=("GET", "POST"))
    async def broken() -> str:
        raise RuntimeError("the database is down: password=hunter2")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return server


async def test_routes_answer_beside_the_endpoint(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """GET /health is JSON, /ready says 503 then 200, a POST of a GET route is 405 with
    Allow, a failing route is 500 telling nothing, an unknown path stays 404, and the MCP
    endpoint still serves."""
    state: dict[str, Any] = {}
    live = await live_server(routed_server(state))
    base = live.url.removesuffix("/mcp")
    with trio.fail_after(TIMEOUT):
        health = await request(base + "/health", "GET")
        starting = await request(base + "/ready", "GET")
        state["ready"] = True
        ready = await request(base + "/ready", "GET")
        wrong = await request(base + "/health", "POST", [("content-type", "application/json")],
                              b"{}")
        broken = await request(base + "/broken", "GET")
        missing = await request(base + "/nothing", "GET")
        echoed = await tool_call(live.url, ERAS[1], "echo", {"text": "hi"})
    assert (200, {"status": "ok"}) == (health.status, json.loads(health.body))
    assert "application/json" == health.content_type
    assert (503, b"starting") == (starting.status, starting.body)
    assert (200, b"ready") == (ready.status, ready.body)
    assert 405 == wrong.status and "GET" == wrong.header("allow")
    assert 500 == broken.status and b"hunter2" not in broken.body
    assert 404 == missing.status and b"-32" in missing.body
    assert "hi" == echoed["content"][0]["text"]


def test_a_route_is_an_async_function_of_no_arguments_at_an_absolute_path() -> None:
    """A relative path, a sync function, a function with parameters, or a path taken
    twice are refused when the route is registered."""
    server = Server("r")

    async def ok() -> str:
        return ""

    def sync() -> str:
        return ""

    async def takes(x: int) -> str:
        return ""

    with pytest.raises(ValueError, match="absolute path"):
        server.route("health")(ok)
    with pytest.raises(TypeError, match="async function"):
        server.route("/a")(sync)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no arguments"):
        server.route("/b")(takes)  # type: ignore[arg-type]
    server.route("/c")(ok)
    with pytest.raises(ValueError, match="already registered"):
        server.route("/c")(ok)


async def test_the_asgi_app_mounts_under_a_prefix_beside_another_app() -> None:
    """Under hypercorn's trio dispatcher, the app mounted at /api serves its endpoint at
    /api/mcp in both eras and its routes below /api, the other app keeps its paths, and the
    dispatcher's lifespan runs the server's."""
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[str]:
        events.append("enter")
        try:
            yield "pool"
        finally:
            events.append("exit")

    server = Server("mounted", lifespan=lifespan)

    @server.tool()
    async def whose(ctx: Context) -> str:
        """The lifespan's value."""
        return str(ctx.lifespan)

    @server.route("/health")
    async def health() -> str:
        return "mounted ok"

    async def other(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": f"other {scope['path']}".encode()})

    app: Any = TrioDispatcherMiddleware({
        "/api": server.asgi_app(ServerConfig(), bind=["127.0.0.1"]), "": other,
    })
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            [base] = await nursery.start(hypercorn_serve, app, hypercorn_config(
                host="127.0.0.1", port=0))
            results = [await tool_call(base + "/api/mcp", era, "whose") for era in ERAS]
            health = await request(base + "/api/health", "GET")
            elsewhere = await request(base + "/site/index.html", "GET")
            listed = await post(base + "/api/mcp", modern_request("tools/list"))
            nursery.cancel_scope.cancel()
    assert ["pool", "pool"] == [r["content"][0]["text"] for r in results]
    assert (200, b"mounted ok") == (health.status, health.body)
    assert (200, b"other /site/index.html") == (elsewhere.status, elsewhere.body)
    assert 200 == listed.status
    assert ["enter", "exit"] == events
