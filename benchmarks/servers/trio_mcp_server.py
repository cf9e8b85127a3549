"""The trio-mcp server of benchmarks/bench_memory.py: two tools, served by ``trio_mcp.serve``
(hypercorn's trio worker, with TCP_USER_TIMEOUT and the counters endpoint) on loopback.

    python benchmarks/servers/trio_mcp_server.py [--port 0] [--stats-port 0]
        [--session-ttl S] [--stall-budget S] [--window-events N] [--window-bytes N]

Once it listens it prints one line, ``READY {"url": ..., "stats_url": ..., "pid": ...,
"config": {...}}``, which is how ``benchmarks/loadgen.py`` finds it (a server for another SDK
prints the same line, with ``stats_url`` null). SIGTERM or SIGINT shut it down gracefully.
SIGUSR1 runs the garbage collector and hands the C allocator's free pages back to the OS
(``malloc_trim``), so that a benchmark can tell memory still held from memory freed but
cached; it changes nothing the server holds. Everything not given on the command line is
ServerConfig's default.

The tools:

- ``echo(text)`` returns its text.
- ``stream(n, size)`` sends n notifications of about size bytes on the request's stream, then
  returns: progress notifications when the call has a progress token, log messages otherwise.
  Like most tools it has no checkpoint of its own between sends.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import signal
import sys
from typing import Any

import attrs
import trio

from trio_mcp import Context, Server, ServerConfig, serve
from trio_mcp.protocol import Retention

server = Server("bench-memory-trio-mcp", version="0.1.0")


@server.tool()
async def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: what to echo back.
    """
    return text


@server.tool()
async def stream(ctx: Context, n: int, size: int = 2000) -> str:
    """Send n notifications of about size bytes, then return.

    Args:
        n: how many notifications.
        size: padding bytes in each.
    """
    pad = "x" * size
    for i in range(n):
        if ctx.progress_token is not None:
            await ctx.report_progress(i + 1, n, f"{i}:{pad}")
        else:
            await ctx.log("info", {"i": i, "pad": pad})
    return f"sent {n}"


def trim() -> None:
    """Collect garbage and return the C allocator's free memory to the OS (glibc only)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def build_config(args: argparse.Namespace) -> ServerConfig:
    changes: dict[str, Any] = {}
    if args.session_ttl is not None:
        changes["session_idle_ttl"] = args.session_ttl
    if args.stall_budget is not None:
        changes["stall_budget"] = args.stall_budget
    if args.window_events is not None or args.window_bytes is not None:
        default = Retention()
        changes["retention"] = Retention(
            max_events=args.window_events or default.max_events,
            max_bytes=args.window_bytes or default.max_bytes,
            max_age=default.max_age,
        )
    return ServerConfig(**changes)


def describe(config: ServerConfig) -> dict[str, Any]:
    """The settings that bound memory, as plain JSON."""
    return {
        "session_idle_ttl": config.session_idle_ttl,
        "uninitialized_ttl": config.uninitialized_ttl,
        "max_sessions": config.max_sessions,
        "stall_budget": config.stall_budget,
        "min_read_rate": config.min_read_rate,
        "signal_timeout": config.signal_timeout,
        "retention": attrs.asdict(config.retention),
    }


async def main_async(args: argparse.Namespace) -> None:
    config = build_config(args)
    stop = trio.Event()

    async def on_signals() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGUSR1) as signals:
            async for signum in signals:
                if signum == signal.SIGUSR1:
                    trim()
                    continue
                stop.set()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signals)
        urls: list[str] = await nursery.start(
            lambda task_status: serve(
                server,
                host="127.0.0.1",
                port=args.port,
                config=config,
                stats_port=args.stats_port,
                shutdown_trigger=stop.wait,
                task_status=task_status,
            )
        )
        ready = {
            "url": urls[0] + config.path,
            "stats_url": urls[1] if len(urls) > 1 else None,
            "pid": os.getpid(),
            "server": "trio-mcp",
            "config": describe(config),
        }
        print("READY " + json.dumps(ready), flush=True)
        await stop.wait()
        # serve() returns after its graceful shutdown; then nothing else runs.
        nursery.cancel_scope.deadline = trio.current_time() + config.shutdown_grace + 10


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0, help="port (0: any free one)")
    parser.add_argument("--stats-port", type=int, default=0, help="counters port (0: any)")
    parser.add_argument("--session-ttl", type=float, default=None, help="session_idle_ttl, s")
    parser.add_argument("--stall-budget", type=float, default=None, help="stall_budget, s")
    parser.add_argument("--window-events", type=int, default=None, help="retention.max_events")
    parser.add_argument("--window-bytes", type=int, default=None, help="retention.max_bytes")
    args = parser.parse_args(argv)
    trio.run(main_async, args)


if __name__ == "__main__":
    sys.exit(main())
