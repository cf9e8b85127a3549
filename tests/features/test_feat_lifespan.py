# The lifespan and dependencies (issue 40, spec/handlers.md TM-HAND-LIFESPAN,
# TM-HAND-DEPENDS), in both eras (dependencies through trio_mcp.Client(server), serving over
# loopback): the lifespan is entered once before the
# first request and left after the server stops, on both HTTP servers and in hypercorn's
# own ASGI lifespan; dependencies are resolved for each request, once each, async or not,
# and their teardowns run after the handler, with its exception.

# No `from __future__ import annotations`: the dependencies here are local functions, which
# string annotations could not name.

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import pytest
import trio
from feat_support import Connect, InProcess
from hypercorn.trio import serve as hypercorn_serve
from support.eras import ERAS, tool_call
from support.fixtures import start_live, wait_until

from trio_mcp import Context, Depends, Server, ServerConfig, ToolError
from trio_mcp.edges._asgi import ASGIApp
from trio_mcp.edges._serve import hypercorn_config

TIMEOUT = 20


class Pool:
    """Stands for a database pool: opened by the lifespan, closed after serving."""

    def __init__(self) -> None:
        self.open = True
        self.queries = 0


def lifespan_server(events: list[str]) -> Server:
    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, Any]]:
        events.append(f"enter {server.name}")
        pool = Pool()
        async with trio.open_nursery() as nursery:
            # A lifespan may run background work: it is entered and left by one task.
            nursery.start_soon(trio.sleep_forever)
            try:
                yield {"pool": pool}
            finally:
                pool.open = False
                events.append("exit")
                nursery.cancel_scope.cancel()

    server = Server("life", lifespan=lifespan)

    @server.tool()
    async def query(ctx: Context) -> int:
        """Use the pool the lifespan opened."""
        pool: Pool = ctx.lifespan["pool"]
        assert pool.open
        pool.queries += 1
        return pool.queries

    return server


@pytest.mark.spec("TM-HAND-LIFESPAN")
@pytest.mark.parametrize("http_server", ["trio-mcp", "hypercorn"])
async def test_the_lifespan_runs_once_around_serving(http_server: str) -> None:
    """Entered once before the first request, shared by the requests of both eras, and
    left once the server stops."""
    events: list[str] = []
    server = lifespan_server(events)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            live = await start_live(nursery, server, http_server=http_server)
            assert ["enter life"] == events
            counts = [(await tool_call(live.url, era, "query"))["structuredContent"]["result"]
                      for era in (*ERAS, *ERAS)]
            nursery.cancel_scope.cancel()
    assert [1, 2, 3, 4] == counts
    assert ["enter life", "exit"] == events


@pytest.mark.spec("TM-HAND-LIFESPAN")
async def test_hypercorns_asgi_lifespan_runs_it_and_a_failed_start_stops_hypercorn() -> None:
    """Under hypercorn serving the ASGI app itself, the ASGI lifespan runs the lifespan; a
    lifespan that raises at start answers startup.failed, and hypercorn does not serve."""
    events: list[str] = []
    app = ASGIApp(lifespan_server(events), ServerConfig(), bind_hosts=["127.0.0.1"])
    asgi: Any = app
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(hypercorn_serve, asgi, hypercorn_config(
                host="127.0.0.1", port=0))
            result = await tool_call(binds[0] + "/mcp", ERAS[1], "query")
            assert 1 == result["structuredContent"]["result"]
            nursery.cancel_scope.cancel()
    assert ["enter life", "exit"] == events

    @contextlib.asynccontextmanager
    async def broken(server: Server) -> AsyncIterator[None]:
        raise RuntimeError("the database is down")
        yield

    failing: Any = ASGIApp(Server("broken", lifespan=broken), ServerConfig(), bind_hosts=[])
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "lifespan.startup"}])

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await failing({"type": "lifespan"}, receive, send)
    assert "lifespan.startup.failed" == sent[0]["type"]
    assert "the database is down" in sent[0]["message"]


@pytest.mark.spec("TM-HAND-LIFESPAN")
async def test_a_lifespan_that_fails_stops_serve_and_one_server_serves_once() -> None:
    """serve() raises what the lifespan raised at start; a server with a lifespan served
    twice at once in one process is refused."""

    @contextlib.asynccontextmanager
    async def broken(server: Server) -> AsyncIterator[None]:
        raise RuntimeError("the database is down")
        yield

    with trio.fail_after(TIMEOUT), pytest.RaisesGroup(
        pytest.RaisesExc(RuntimeError, match="the database is down"), flatten_subgroups=True,
    ):
        await Server("broken", lifespan=broken).serve(port=0, announce=False)

    server = lifespan_server([])
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: server.serve(
                port=0, announce=False, task_status=task_status))
            with pytest.RaisesGroup(
                pytest.RaisesExc(RuntimeError, match="already served in this process"),
                flatten_subgroups=True,
            ):
                await server.serve(port=0, announce=False)
            nursery.cancel_scope.cancel()


# -- dependencies ------------------------------------------------------------------------


def depends_server(log: list[str]) -> Server:
    server = Server("deps")
    calls = {"settings": 0}

    def settings() -> dict[str, str]:
        calls["settings"] += 1
        log.append(f"settings in {'main' if _on_main() else 'thread'}")
        return {"dsn": "db://x"}

    async def connection(
        ctx: Context, conf: Annotated[dict[str, str], Depends(settings)]
    ) -> AsyncIterator[str]:
        log.append(f"open {conf['dsn']} for {ctx.method}")
        try:
            yield f"conn#{calls['settings']}"
        except ToolError as exc:
            log.append(f"rollback after {exc}")
            raise
        finally:
            log.append("close")

    def cursor(conn: Annotated[str, Depends(connection)]) -> Iterator[str]:
        log.append("cursor")
        yield f"cursor on {conn}"
        log.append("cursor closed")

    @server.tool()
    async def run(
        q: str,
        cur: Annotated[str, Depends(cursor)],
        conn: Annotated[str, Depends(connection)],
        conf: Annotated[dict[str, str], Depends(settings)],
    ) -> str:
        """Run a query."""
        log.append(f"run {q}")
        if q == "fail":
            raise ToolError("bad query")
        return f"{q} via {cur} / {conn} / {conf['dsn']}"

    @server.tool()
    def run_sync(q: str, conn: Annotated[str, Depends(connection)]) -> str:
        """Run a query in a thread."""
        return f"{q} in thread via {conn}"

    return server


def _on_main() -> bool:
    return threading.current_thread() is threading.main_thread()


@pytest.mark.spec("TM-HAND-DEPENDS")
@pytest.mark.parametrize("era", ERAS)
async def test_dependencies_resolve_once_per_request_and_tear_down_after(
    connect: Connect, era: str
) -> None:
    """Each request resolves its dependencies once (settings is asked for three times, and
    called once), sync ones in a thread; the generators' teardowns run after the handler,
    inner first; the parameters are not in the inputSchema; a second request resolves them
    again."""
    log: list[str] = []
    served = InProcess(connect, depends_server(log))
    with trio.fail_after(TIMEOUT):
        first = await served.tool_call(era, "run", {"q": "select"})
        assert "select via cursor on conn#1 / conn#1 / db://x" == first["content"][0]["text"]
        assert [
            "settings in thread", "open db://x for tools/call", "cursor", "run select",
            "cursor closed", "close",
        ] == log
        log.clear()
        second = await served.tool_call(era, "run_sync", {"q": "x"})
    assert "x in thread via conn#2" == second["content"][0]["text"]
    assert ["settings in thread", "open db://x for tools/call", "close"] == log


@pytest.mark.spec("TM-HAND-DEPENDS")
@pytest.mark.parametrize("era", ERAS)
async def test_a_failing_handler_reaches_its_dependencies_teardown(
    connect: Connect, era: str
) -> None:
    """The handler's exception is thrown into the generator dependencies, which can roll
    back; the tool error still answers the call."""
    log: list[str] = []
    served = InProcess(connect, depends_server(log))
    with trio.fail_after(TIMEOUT):
        result = await served.tool_call(era, "run", {"q": "fail"})
    assert result["isError"] is True and "bad query" == result["content"][0]["text"]
    assert "rollback after bad query" in log and "close" == log[-1]


@pytest.mark.spec("TM-HAND-DEPENDS")
def test_dependencies_are_no_arguments_and_bad_ones_are_refused_at_registration() -> None:
    """Injected parameters are left out of the inputSchema; a dependency with a parameter
    nothing fills, or one that depends on itself, is refused when the tool is
    registered."""
    server = depends_server([])
    schema = server.tools["run"].input_schema
    assert ["q"] == list(schema["properties"]) and ["q"] == schema["required"]

    def needs(x: int) -> int:
        return x

    async def t1(v: Annotated[int, Depends(needs)]) -> int:
        return v

    with pytest.raises(TypeError, match="parameter 'x' is neither the Context"):
        Server("bad").add_tool(t1)

    def a(v: Annotated[int, Depends(lambda: 0)]) -> int:
        return v

    def loop(v: Annotated[int, Depends(a)]) -> int:
        return v

    a.__annotations__["v"] = Annotated[int, Depends(loop)]

    async def t2(v: Annotated[int, Depends(loop)]) -> int:
        return v

    with pytest.raises(TypeError, match="dependency cycle"):
        Server("bad").add_tool(t2)


@pytest.mark.spec("TM-HAND-DEPENDS", "TM-HAND-LIFESPAN")
async def test_a_dependency_reads_the_lifespan(nursery: trio.Nursery) -> None:
    """A dependency takes the Context, and through it what the lifespan yielded."""
    events: list[str] = []
    server = lifespan_server(events)

    def pool(ctx: Context) -> Pool:
        found: Pool = ctx.lifespan["pool"]
        return found

    @server.tool()
    async def queries(p: Annotated[Pool, Depends(pool)]) -> int:
        """How many queries the pool ran."""
        p.queries += 10
        return p.queries

    live = await start_live(nursery, server, http_server="trio-mcp")
    with trio.fail_after(TIMEOUT):
        result = await tool_call(live.url, ERAS[1], "queries")
    assert 10 == result["structuredContent"]["result"]
    await wait_until(lambda: events == ["enter life"])
