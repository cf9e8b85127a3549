# What `serve()` adds around the runtime, end to end on loopback: the graceful shutdown, the
# counters endpoint, and TCP_USER_TIMEOUT on the listening socket (the kernel's own cut of a
# reader that stopped).
from __future__ import annotations

import gc
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from support.client import McpSession, open_session, open_stream, request, rpc_request
from support.client import dumps as json_body
from support.fixtures import wait_until
from support.slow import make_server, open_slow

from trio_mcp import ResponseMode, Server, ServerConfig, serve
from trio_mcp.edges._serve import user_timeout
from trio_mcp.protocol import SSEEvent
from trio_mcp.runtime._runtime import Runtime
from trio_mcp.runtime.legacy._table import SessionTable

#: The size of the reply no one reads.
BIG = 3_000_000


def table_of(server: Server) -> SessionTable:
    [runtime] = server._hubs
    assert isinstance(runtime, Runtime)
    return runtime.table


async def read_all(
    session: McpSession, method: str, message: Any, into: list[SSEEvent], ended: dict[str, bool]
) -> None:
    headers = session.headers() if method == "POST" else [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.id),
        ("mcp-protocol-version", session.protocol_version),
    ]
    body = json_body(message) if message is not None else b""
    async with open_stream(session.url, method, headers, body) as stream:
        async for event in stream.events():
            into.append(event)
        ended[method + str(id(into))] = stream.ended


@pytest.mark.spec("TM-SESS-SHUTDOWN", "T-PSSE-4", "T-GET-8")
async def test_graceful_shutdown_closes_streams_with_retry_and_bounds_handlers() -> None:
    """When serve()'s shutdown_trigger returns: every open SSE stream (a GET stream and
    two POST streams) gets an event with `retry` and is ended; a new request gets 503; a
    handler that finishes within shutdown_grace completes, one that does not is cancelled
    once the grace is over; then serve() returns."""
    server, record = make_server()
    config = ServerConfig(shutdown_grace=1.5)
    trigger = trio.Event()

    async def shutdown_trigger() -> None:
        await trigger.wait()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            served = trio.Event()

            async def run(task_status: trio.TaskStatus[list[str]]) -> None:
                await serve(
                    server, host="127.0.0.1", port=0, config=config,
                    shutdown_trigger=shutdown_trigger, task_status=task_status,
                )
                served.set()

            [url] = await nursery.start(run)
            session = await open_session(url)
            streams: dict[str, list[SSEEvent]] = {"get": [], "quick": [], "forever": []}
            ended: dict[str, bool] = {}
            table = table_of(server)
            nursery.start_soon(read_all, session, "GET", None, streams["get"], ended)
            # "quick" last, and the trigger as soon as its stream is open: the second it
            # runs must still be running then, however slowly a loaded machine opened the
            # streams before it.
            for views, tag, seconds in ((2, "forever", -1.0), (3, "quick", 1.0)):
                call = rpc_request(
                    "tools/call", {"name": "wait", "arguments": {"seconds": seconds, "tag": tag}}
                )
                nursery.start_soon(read_all, session, "POST", call, streams[tag], ended)
                await wait_until(
                    lambda tag=tag, views=views: tag in record.started
                    and sum(len(s.views) for s in table.sessions.values()) == views
                )
            trigger.set()
            triggered = trio.current_time()
            await wait_until(lambda: len(ended) == 3)
            closed_after = trio.current_time() - triggered
            refused = await session.post(rpc_request("ping"))
            await served.wait()
            stopped_after = trio.current_time() - triggered

    assert closed_after <= 1.0
    for name, events in streams.items():
        assert [config.retry_ms] == [e.retry for e in events if e.retry is not None], name
    assert all(ended.values())
    assert 503 == refused.status
    assert record.finished["quick"] - triggered <= config.shutdown_grace
    cancelled_after = record.cancelled["forever"] - triggered
    assert config.shutdown_grace <= cancelled_after <= config.shutdown_grace + 0.5
    assert "quick" not in record.cancelled
    assert stopped_after <= config.shutdown_grace + 6.0


@pytest.mark.spec("TM-BP-COUNTERS")
async def test_stats_endpoint_answers_json_on_loopback() -> None:
    """With stats_port, serve() answers GET on 127.0.0.1 with statistics() as JSON (and
    405 to anything else); the figures are the live ones."""
    server, _record = make_server()
    config = ServerConfig()
    trigger = trio.Event()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            urls: list[str] = await nursery.start(
                lambda task_status: serve(
                    server, host="127.0.0.1", port=0, config=config, stats_port=0,
                    shutdown_trigger=trigger.wait, task_status=task_status,
                )
            )
            mcp_url, stats_url = urls
            session = await open_session(mcp_url)
            answer = await request(stats_url, "GET")
            post = await request(stats_url, "POST")
            trigger.set()

    assert stats_url.startswith("http://127.0.0.1:")
    assert 200 == answer.status
    assert "application/json" == answer.content_type
    stats = json.loads(answer.body)
    assert 1 == stats["sessions_created"] == stats["sessions_open"]
    assert session.id not in json.dumps(stats)
    assert set(stats) >= {"streams_cut", "streams_open", "bytes_retained", "sessions_expired"}
    assert 405 == post.status


@pytest.mark.spec("TM-BP-COUNTERS")
async def test_stats_port_serves_the_counters_as_prometheus_metrics() -> None:
    """GET /metrics on the stats port answers the same counters in the Prometheus text
    format, which prometheus-client's parser reads back: levels as gauges, the rest as
    counters, every value the one the JSON gives; and requests by method and outcome with a
    histogram of their handlers' time."""
    from prometheus_client.parser import text_string_to_metric_families

    from trio_mcp.runtime._runtime import RuntimeStatistics
    from trio_mcp.runtime._stats import declared

    server, _record = make_server()
    config = ServerConfig()
    trigger = trio.Event()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            urls: list[str] = await nursery.start(
                lambda task_status: serve(
                    server, host="127.0.0.1", port=0, config=config, stats_port=0,
                    shutdown_trigger=trigger.wait, task_status=task_status,
                )
            )
            mcp_url, stats_url = urls
            session = await open_session(mcp_url)
            await session.call("ping")
            await session.call("tools/list")
            await session.call("no/such-method-" + "x" * 40)
            metrics = await request(stats_url.removesuffix("/stats") + "/metrics", "GET")
            stats = json.loads((await request(stats_url, "GET")).body)
            trigger.set()

    assert 200 == metrics.status
    assert metrics.content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(metrics.body.decode())}
    assert {f"trio_mcp_{name}" for name in stats} | {
        "trio_mcp_requests", "trio_mcp_handler_seconds"} == set(families)
    # Requests by method and outcome; a method the server does not know is "other", so that
    # a client cannot grow the table.
    requests = {(s.labels["method"], s.labels["outcome"]): s.value
                for s in families["trio_mcp_requests"].samples if s.name.endswith("_total")}
    assert {("ping", "ok"): 1, ("tools/list", "ok"): 1, ("other", "error"): 1} == requests
    histogram = families["trio_mcp_handler_seconds"]
    assert "histogram" == histogram.type
    counts = {s.labels["method"]: s.value for s in histogram.samples
              if s.name.endswith("_count")}
    assert {"ping": 1, "tools/list": 1, "other": 1} == counts
    # Each figure is exported as the kind its statistics record declares.
    kinds = {name: kind.value for name, kind in declared(RuntimeStatistics) if kind is not None}
    for name, value in stats.items():
        family = families[f"trio_mcp_{name}"]
        assert kinds[name] == family.type, name
        (sample,) = [s for s in family.samples if not s.name.endswith("_created")]
        assert float(value) == sample.value, name
    assert 1 == families["trio_mcp_sessions_open"].samples[0].value


@pytest.mark.slow
@pytest.mark.spec("TM-BP-RELEASE")
async def test_under_serve_the_kernel_aborts_a_write_nobody_watches() -> None:
    """serve() sets TCP_USER_TIMEOUT on its listening socket (user_timeout: 30 stall
    budgets at least, here 3 s) and the accepted connections inherit it: a 3 MB JSON reply
    (no connection writer watches a plain reply) to a client that never reads is aborted
    by the kernel, which hypercorn's shielded write alone would wait on forever; the
    client, reading at last, gets part of the body and a reset."""
    server, _record = make_server()
    config = ServerConfig(
        stall_budget=0.1, signal_timeout=0.5, response_mode=ResponseMode.JSON
    )
    timeout = user_timeout(config)
    trigger = trio.Event()
    with trio.fail_after(2 * timeout + 15):
        async with trio.open_nursery() as nursery:
            [url] = await nursery.start(
                lambda task_status: serve(
                    server, host="127.0.0.1", port=0, config=config,
                    shutdown_trigger=trigger.wait, task_status=task_status,
                )
            )
            port = urlsplit(url).port or 0
            session = await open_session(url)
            call = rpc_request("tools/call", {"name": "echo", "arguments": {"text": "x" * BIG}})
            async with open_slow(
                ("127.0.0.1", port), "POST", config.path, session.headers(), json_body(call)
            ) as client:
                # Linux checks the timeout when it probes the closed window, at intervals
                # that double from 200 ms: the abort comes by about twice the timeout.
                await trio.sleep(2 * timeout + 2)
                await client.read(None)
            trigger.set()

    assert client.reset or not client.ended
    assert client.received < BIG


@pytest.mark.spec("TM-SESS-RELEASE")
async def test_a_closed_plain_connection_leaves_no_deadline_behind() -> None:
    """A plain-HTTP connection that has closed leaves nothing waiting in trio's deadline heap:
    hypercorn times a TLS handshake on every connection, and untimed without TLS a
    connection's cancel scope would stay in the heap for a minute after it closed."""
    server, _record = make_server()
    config = ServerConfig()
    trigger = trio.Event()

    def lingering() -> int:
        now = trio.current_time()
        return sum(
            1
            for obj in gc.get_objects()
            if type(obj) is trio.CancelScope and obj.deadline - now > 30
        )

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            urls: list[str] = await nursery.start(
                lambda task_status: serve(
                    server, host="127.0.0.1", port=0, config=config,
                    shutdown_trigger=trigger.wait, task_status=task_status,
                )
            )
            before = lingering()
            for _ in range(20):
                answer = await request(urls[0], "GET")
                assert answer.status in (400, 405, 406)
            await trio.sleep(0.1)
            after = lingering()
            trigger.set()

    assert after - before < 5, f"{after - before} cancel scopes wait a minute or more"
