# Abandoned sessions seen from outside: a served process's resident size, the figure an
# operator watches, after a wave of clients that vanished (a small benchmarks/run.py
# "abandoned"). The server runs as `trio-mcp serve` would, in a process of its own that
# chose its allocator with use_allocator (TM-SESS-ALLOCATOR) and its cycle collector's
# threshold with use_collector_threshold (TM-SESS-GC).
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from support.client import McpSession, open_session, open_stream, rpc_request
from support.client import dumps as json_body

#: Longer than the server's own timers of a connection (hypercorn's keep-alive, 5 s; the
#: stall budget, 10 s), as the default 30 minutes is: measured with 6 s, what those timers
#: still held when the sessions expired was freed after the release, and a few percent
#: more stayed resident.
TTL = 12.0
WINDOW_BYTES = 64 * 1024
WAVE = 500
AT_ONCE = 50

LAUNCHER = f"""
import json
from trio_mcp import use_allocator, use_collector_threshold
use_allocator()
use_collector_threshold()
import trio
from trio_mcp import Context, Server, ServerConfig, serve
from trio_mcp.base._allocator import running_allocator
from trio_mcp.protocol import Retention

server = Server("abandoned-rss")

@server.tool()
async def stream(ctx: Context, n: int, size: int = 2000) -> str:
    '''Send n log messages of about size bytes, then return.

    Args:
        n: how many messages.
        size: padding bytes in each.
    '''
    for i in range(n):
        await ctx.log("info", {{"i": i, "pad": "x" * size}})
    return f"sent {{n}}"

config = ServerConfig(
    retention=Retention(max_events=256, max_bytes={WINDOW_BYTES}), session_idle_ttl={TTL},
)

async def main():
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                server, port=0, config=config, stats_port=0, task_status=task_status
            )
        )
        print("READY", json.dumps([running_allocator(), *urls]), flush=True)

trio.run(main)
"""


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], str, str, str]:
    script = tmp_path / "launch.py"
    script.write_text(LAUNCHER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    proc = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise AssertionError(f"the server did not start: {line!r}")
    allocator, url, stats_url = json.loads(line[len("READY ") :])
    return proc, allocator, url, stats_url


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _stats(url: str) -> dict[str, Any]:
    def get() -> dict[str, Any]:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return dict(json.load(resp))

    return await trio.to_thread.run_sync(get)


async def _until(stats_url: str, check: Callable[[dict[str, Any]], bool]) -> None:
    """Poll the server's counters until ``check`` holds."""
    while True:
        if check(await _stats(stats_url)):
            return
        await trio.sleep(0.1)


async def _vanish(
    url: str, limiter: trio.CapacityLimiter, kept: list[McpSession] | None = None
) -> None:
    """Open a session, start a 400 KB streaming call, read three events, close for good
    (the session goes in ``kept`` when there is one, for the test to delete it)."""
    async with limiter:
        session: McpSession = await open_session(url)
        if kept is not None:
            kept.append(session)
        call = rpc_request(
            "tools/call", {"name": "stream", "arguments": {"n": 200, "size": 2000}}
        )
        async with open_stream(url, "POST", session.headers(), json_body(call)) as stream:
            for _ in range(3):
                assert await stream.next_event() is not None


async def _wave(
    url: str, stats_url: str, count: int, kept: list[McpSession] | None = None
) -> None:
    limiter = trio.CapacityLimiter(AT_ONCE)
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(_vanish, url, limiter, kept)
    await _until(stats_url, lambda stats: not stats["streams_open"])


async def _ended_and_released(stats_url: str) -> None:
    """Wait for every session to have ended, then for the server's release after the last
    of them (TM-SESS-RELEASE: a loop period, 1.2 s, later, unless under a MiB was left to
    release): at most 10 s, since a server process waiting for a CPU on a loaded machine
    (parallel test workers) was measured to release more than 2 s after (its resident size
    then still held the last sessions' pages)."""
    await _until(stats_url, lambda stats: not stats["sessions_open"])
    seen = (await _stats(stats_url))["memory_releases"]
    with trio.move_on_after(10.0):
        await _until(stats_url, lambda stats: stats["memory_releases"] != seen)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.spec("TM-SESS-ALLOCATOR", "TM-SESS-RELEASE", "TM-SESS-IDLE")
async def test_a_served_process_comes_back_near_its_start_after_abandoned_sessions_expire(
    tmp_path: Path,
) -> None:
    """A server started as `trio-mcp serve` starts (use_allocator's default) takes a wave
    of 500 clients that each start a 400 KB streaming call, read three events and vanish.
    Its resident size grows by tens of MiB, within sessions x (window + 16 KiB); once the
    idle TTL has passed and the sessions are gone, it is back within 10% of where it was
    before the wave, a warm-up wave having been served and deleted first."""
    proc, allocator, url, stats_url = await trio.to_thread.run_sync(_start, tmp_path)
    try:
        with trio.fail_after(120):
            assert "malloc" == allocator
            # A warm-up wave (what a first wave costs once), its sessions deleted.
            warm: list[McpSession] = []
            await _wave(url, stats_url, AT_ONCE, warm)
            for session in warm:
                await session.delete()
            await _ended_and_released(stats_url)
            await trio.sleep(0.5)
            before = _rss_kib(proc.pid)

            await _wave(url, stats_url, WAVE)
            peak = _rss_kib(proc.pid)
            await _ended_and_released(stats_url)
            await trio.sleep(0.5)
            after = _rss_kib(proc.pid)
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)

    figures = f"before {before} KiB, peak {peak} KiB, after {after} KiB"
    # The wave held memory, within sessions x (window + 16 KiB) (TM-BP-BOUNDED)...
    assert WAVE * 16 <= peak - before <= WAVE * (WINDOW_BYTES // 1024 + 16), figures
    # ...and gave it back. Under pymalloc this measured +18% to +26%; under malloc +5%.
    assert after - before <= before // 10, figures
