# Resumption under random disconnects, end to end: real hypercorn on loopback, the raw h11
# client closing the TCP connection after a random number of events and re-attaching with
# GET + Last-Event-ID, as the SDK clients do (no de-duplication on their side, so the server
# must deliver every message after the cursor exactly once).
from __future__ import annotations

import os
import random

import pytest
import trio
import trio.lowlevel
from support.client import McpSession, open_session
from support.fixtures import StartServer
from support.resume import CallRecord, call_with_drops

from trio_mcp import Context, Server

server = Server("resume-drops")


@server.tool()
async def burst(n: int, ctx: Context, size: int = 0, pause_every: int = 0) -> str:
    """Send n numbered log notifications on the request's stream, then return.

    Args:
        n: how many notifications.
        size: padding bytes per notification.
        pause_every: sleep a millisecond after every this many (0: only yield).
    """
    pad = "x" * size
    for i in range(n):
        await ctx.log("info", {"i": i, "pad": pad})
        if pause_every and i % pause_every == pause_every - 1:
            await trio.sleep(0.001)
        else:
            await trio.lowlevel.checkpoint()
    return f"burst {n}"


SESSIONS = 5
CALLS_PER_SESSION = 8
N = 100


@pytest.mark.slow
@pytest.mark.spec("T-RESUME-5", "T-RESUME-6", "T-PSSE-12", "T-RESUME-2", "T-RESUME-3")
async def test_random_drops_lose_and_double_nothing(live_server: StartServer) -> None:
    """A client that drops its TCP connection after a random number of events, over and
    over, and re-attaches each time with GET + Last-Event-ID from the last event id it got,
    receives every notification of the call exactly once and in order, and the result
    exactly once: zero duplicates and zero gaps over more than a thousand drop points.
    A disconnect does not cancel the request (T-PSSE-12)."""
    seed = int(os.environ.get("TRIO_MCP_RESUME_SEED", "20251125"))
    live = await live_server(server)
    records: list[tuple[int, CallRecord, int]] = []

    async def client(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        session: McpSession = await open_session(live.url)
        for call in range(CALLS_PER_SESSION):
            pause_every = rng.choice([0, 0, 3, 10])
            size = rng.choice([0, 0, 200, 3000])
            record = await call_with_drops(
                session,
                "burst",
                {"n": N, "size": size, "pause_every": pause_every},
                rng=rng,
                max_events=rng.choice([2, 6, 12]),
            )
            records.append((k * 100 + call, record, N))

    # A guard against a hang, not a speed bound: the run is a few seconds of CPU, which a
    # loaded machine (beside seven other test workers) stretched past 30 s.
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for k in range(SESSIONS):
                nursery.start_soon(client, k)

    drops = sum(r.drops for _, r, _ in records)
    duplicates = sum(r.duplicates for _, r, _ in records)
    gaps = sum(r.gaps(n) for _, r, n in records)
    results = sum(len(r.results) for _, r, _ in records)
    out_of_order = [c for c, r, n in records if r.wire.numbers != list(range(n))]
    repeated_ids = sum(len(r.wire.ids) - len(set(r.wire.ids)) for _, r, _ in records)
    bad_results = [
        c for c, r, n in records
        if [m.get("result", {}).get("content", [{}])[0].get("text") for m in r.results]
        != [f"burst {n}"]
    ]
    print(
        f"seed={seed} calls={len(records)} drop points={drops} duplicates={duplicates} "
        f"gaps={gaps} results={results}"
    )

    assert (0, 0, [], 0, []) == (duplicates, gaps, out_of_order, repeated_ids, bad_results), (
        f"seed={seed} (rerun with TRIO_MCP_RESUME_SEED={seed})"
    )
    assert drops >= 1000, f"only {drops} drop points (seed={seed})"
    assert {200} == {s for _, r, _ in records for s in r.statuses}
