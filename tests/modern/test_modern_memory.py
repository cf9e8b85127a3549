# What a modern request costs the server once it is over: nothing. Thousands of 2026-07-28
# requests of every kind (JSON, streamed, input_required, cancelled by a dropped connection,
# listeners dropped after their acknowledgment) over real sockets, measured with tracemalloc
# (exact per allocation, unaffected by allocator caching; the server runs in this process).
from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
import trio
from support.fixtures import StartServer, wait_until
from support.modern import call_tool, modern_request, open_raw, post, read_until
from support.slow import tasks_named

from trio_mcp import Context, Server
from trio_mcp.runtime._runtime import Runtime
from trio_mcp.runtime._stats import as_dict

#: The name of the task trio's serve_listeners runs each of hypercorn's connections in.
CONNECTION_TASK = "trio._highlevel_serve_listeners._run_handler"
#: Concurrent clients.
WORKERS = 8
#: Retained growth allowed over all the measured requests, and over the second half alone.
BOUND = 1024 * 1024
SECOND_HALF_BOUND = 256 * 1024


def make_server() -> Server:
    server = Server("memory-tests")

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text.

        Args:
            text: what to return.
        """
        return text

    @server.tool()
    async def steps(ctx: Context, n: int = 5) -> str:
        """Report n steps of progress, then return.

        Args:
            n: how many steps.
        """
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i} " + "x" * 200)
        await ctx.log("info", {"done": n})
        return f"{n} steps"

    @server.tool()
    async def ask(ctx: Context, who: str) -> str:
        """Ask the user's name.

        Args:
            who: whom to greet besides.
        """
        answer = await ctx.elicit(
            "Name?",
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            key="name",
        )
        return f"{who} and {(answer.content or {}).get('name')}"

    @server.tool()
    async def hold(ctx: Context) -> str:
        """Report once, then wait until cancelled."""
        await ctx.report_progress(1, None, "holding")
        await trio.sleep_forever()
        return "never"

    return server


async def one(url: str, i: int, counts: dict[str, int]) -> None:
    """Request number ``i`` of the mix: 3 in 10 JSON, 2 streamed, 2 input_required (one of
    them retried to completion), 2 cancelled by a dropped connection, 1 listener dropped."""
    kind = i % 10
    if kind < 3:
        response = await post(url, call_tool("echo", {"text": f"hello {i}"}))
        assert 200 == response.status and b'"complete"' in response.body
        counts["json"] += 1
    elif kind < 5:
        message = call_tool("steps", {"n": 5}, progress_token=f"p{i}", log_level="info")
        response = await post(url, message)
        assert "text/event-stream" == response.content_type and not response.truncated
        counts["streamed"] += 1
    elif kind < 7:
        caps = {"elicitation": {}}
        response = await post(url, call_tool("ask", {"who": f"w{i}"}, capabilities=caps))
        result: dict[str, Any] = response.json()["result"]
        assert "input_required" == result["resultType"]
        counts["input_required"] += 1
        if kind == 6:
            retry = call_tool(
                "ask", {"who": f"w{i}"}, capabilities=caps,
                requestState=result["requestState"],
                inputResponses={"name": {"action": "accept", "content": {"name": "Ada"}}},
            )
            done = await post(url, retry)
            assert b"and Ada" in done.body
            counts["retried"] += 1
    elif kind < 9:
        got = bytearray()
        async with open_raw(url, call_tool("hold", progress_token=f"h{i}")) as sock:
            await read_until(sock, got, b"notifications/progress")
        counts["cancelled"] += 1
    else:
        got = bytearray()
        listen = modern_request(
            "subscriptions/listen",
            {"notifications": {"toolsListChanged": True, "resourceSubscriptions": [f"x://{i}"]}},
        )
        async with open_raw(url, listen) as sock:
            await read_until(sock, got, b"acknowledged")
        counts["listeners"] += 1


async def batch(url: str, start: int, n: int, counts: dict[str, int]) -> None:
    """Requests start .. start+n-1, WORKERS at a time."""
    queue = iter(range(start, start + n))

    async def worker() -> None:
        for i in queue:
            await one(url, i, counts)

    async with trio.open_nursery() as nursery:
        for _ in range(WORKERS):
            nursery.start_soon(worker)


def traced_after_gc() -> int:
    for _ in range(3):
        gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def quiesce(runtime: Runtime, lingering: list[int]) -> int:
    """Wait until no modern request or listener is left, then until hypercorn has closed
    every connection, and return the traced memory after garbage collection.

    hypercorn keeps many connections whose chunked (SSE) response ended and whose client
    closed open until its keep-alive timeout (5 s), with or without trio-mcp (a bare ASGI
    app that streams three chunks shows it too); the traced memory while they linger is
    appended to ``lingering``, for the report."""
    await wait_until(lambda: not runtime.modern.running and not runtime.listeners.live)
    await trio.sleep(0.1)
    lingering.append(traced_after_gc())
    await wait_until(lambda: not tasks_named(CONNECTION_TASK), poll=0.1)
    await trio.sleep(0.1)
    return traced_after_gc()


@pytest.mark.slow
@pytest.mark.spec(
    "TM-BP-BOUNDED", "MT-SSE-6", "ML-STATE-1", "MU-CANCEL-1", "MU-CANCEL-3", "TM-MOD-LISTEN",
    "TM-BP-COUNTERS",
)
async def test_modern_requests_retain_no_memory_once_they_are_over(
    live_server: StartServer,
) -> None:
    """2,000 modern requests of every kind leave under 1 MiB of traced memory behind."""
    # And under 256 KiB over their second 1,000 (no growth per request), with no request or
    # listener left running.
    n = 2000
    counts = dict.fromkeys(
        ("json", "streamed", "input_required", "retried", "cancelled", "listeners"), 0
    )
    warm = dict(counts)
    with trio.fail_after(240):
        live = await live_server(make_server())
        runtime = live.app.runtime
        tracemalloc.start()
        try:
            # Warm up: imports, caches, the connection machinery, interned strings.
            await batch(live.url, 0, 200, warm)
            lingering: list[int] = []
            await quiesce(runtime, lingering)
            # Taken first, so that what the snapshot itself holds is in every figure alike.
            snap_before = tracemalloc.take_snapshot()
            before = traced_after_gc()
            tracemalloc.reset_peak()
            await batch(live.url, 1000, n // 2, counts)
            middle = await quiesce(runtime, lingering)
            await batch(live.url, 1000 + n // 2, n // 2, counts)
            after = await quiesce(runtime, lingering)
            peak = tracemalloc.get_traced_memory()[1]
            snap_after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()

    growth, second_half, held_at_peak = after - before, after - middle, peak - before
    top = snap_after.compare_to(snap_before, "lineno")[:8]
    report = "\n".join(str(stat) for stat in top)
    print(
        f"\nmodern memory: {n} requests {counts}; traced before {before} B, middle {middle} B, "
        f"after {after} B; retained {growth} B ({growth / n:.1f} B/request), second half "
        f"{second_half} B; peak {held_at_peak} B above the start; while hypercorn's "
        f"connections lingered: {[m - before for m in lingering[1:]]} B above the start\n{report}"
    )
    assert n == sum(v for k, v in counts.items() if k != "retried")
    stats = runtime.modern.stats
    assert set() == runtime.modern.running
    assert set() == runtime.listeners.live
    assert (warm["cancelled"] + counts["cancelled"]) == stats.requests_cancelled
    assert (warm["input_required"] + counts["input_required"]) == stats.input_required
    assert 0 == as_dict(runtime.statistics())["sessions_created"]
    assert growth < BOUND, report
    assert second_half < SECOND_HALF_BOUND, report
