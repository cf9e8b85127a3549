"""trio-mcp as a benchmark contender: the benchmark tools, served by ``trio_mcp.serve`` on
loopback, on trio-mcp's own HTTP/1.1 server (trio and h11, the default, as ``trio-mcp serve``
runs) or, with ``--server hypercorn``, under hypercorn's trio worker hosting the ASGI app
(``serve(http_server=...)``); TCP_USER_TIMEOUT on the listening socket either way.

    python benchmarks/servers/trio_mcp_bench.py [--port 0] [--server {trio-mcp,hypercorn}]
        [--json-response] [--session-ttl S] [--stats-port PORT] [--stall-budget S]
        [--window-events N] [--window-bytes N] [--task-ttl S] [--max-tasks N]
        [--no-budgets] [--no-accounting] [--inspect PORT] [--http {auto,httptools,h11}]

``benchmarks/run.py`` gives it a port and waits for it; ``benchmarks/bench_memory.py`` (through
``loadgen.start_server``) reads the one line it prints once it listens,
``READY {"url": ..., "stats_url": ..., "pid": ..., "config": {...}}`` (the SDK's server
prints the same line, with ``stats_url`` null). SIGTERM or SIGINT shut it down gracefully;
SIGUSR1 runs the diagnostic of ``release.py``, SIGUSR2 that of ``arenas.py``
(with ``TRIO_MCP_ARENA_CENSUS`` set). Everything not given on the command line is
``ServerConfig``'s default: the figures in RESULTS.md are those of an unconfigured server.
``--no-budgets`` takes out the work issue 20's limits add to every request (the check of
a tool result for non-finite numbers, the move of its session to the back of the eviction
order, the server-wide count of body bytes, the HTTP version check), so that ``run.py``
can say what they cost beside the same server with them; ``--no-accounting`` turns off the
charging of requests to memory budgets (``memory_accounting``, TM-SEC-MEMORY), for the same.
Like ``trio-mcp serve``, it first chooses CPython's allocator with ``use_allocator``: the one
PYTHONMALLOC names, else malloc (TM-SESS-ALLOCATOR), and the cycle collector's young threshold
with ``use_collector_threshold`` (TM-SESS-GC).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import Any

import arenas  # beside this script, in benchmarks/servers/
import attrs
import release
import trio

from trio_mcp import (
    Context,
    ResponseMode,
    Server,
    ServerConfig,
    serve,
    use_allocator,
    use_collector_threshold,
)
from trio_mcp.base._allocator import running_allocator
from trio_mcp.edges._serve import HTTP_SERVERS
from trio_mcp.protocol import Retention

server = Server("bench-trio-mcp", version="0.1.0")


@server.tool()
async def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: what to echo back.
    """
    return text


@server.tool()
async def echo_progress(ctx: Context, text: str) -> str:
    """Report one progress notification (progress 1 of 1, the text as its message) when the
    call has a progress token, then return the text unchanged.

    Args:
        text: what to echo back.
    """
    await ctx.report_progress(1, 1, text)
    return text


@server.tool()
async def stream(ctx: Context, n: int, size: int = 200, delay: float = 0.0, tag: str = "") -> str:
    """Send n numbered notifications of about size bytes on this request's stream, then return.

    Progress notifications when the call has a progress token (progress i+1 of n, the message
    "<tag><i>:<padding>"), log messages otherwise (data {"i", "tag", "pad"}), so that a reader
    can count duplicates and gaps.

    Args:
        n: how many notifications.
        size: bytes of padding in each.
        delay: seconds to sleep between notifications (0: none).
        tag: a marker put in every notification (tells sessions apart).
    """
    pad = "x" * size
    progress = ctx.progress_token is not None
    for i in range(n):
        # Written as a tool author would: no explicit checkpoint, the send is the await.
        if progress:
            await ctx.report_progress(i + 1, n, f"{tag}{i}:{pad}")
        else:
            await ctx.log("info", {"i": i, "tag": tag, "pad": pad})
        if delay:
            await trio.sleep(delay)
    return f"sent {n}"


@server.tool()
async def hold(data: str) -> str:
    """Keep the argument until cancelled: a running call that holds what it was sent.

    Args:
        data: anything.
    """
    await trio.sleep_forever()
    return data


@server.tool(task="required")
async def task_result(size: int = 0) -> str:
    """Run as a task (for a client that declares the tasks extension) and end at once with
    ``size`` bytes of text: what a task holds until its TTL.

    Args:
        size: bytes of text in the result.
    """
    return "x" * size


def build_config(args: argparse.Namespace) -> ServerConfig:
    changes: dict[str, Any] = {}
    if args.task_ttl is not None:
        changes["task_ttl"] = args.task_ttl
    if args.max_tasks is not None:
        changes["max_tasks"] = args.max_tasks
    if args.no_accounting:
        changes["memory_accounting"] = False
    if args.json_response:
        changes["response_mode"] = ResponseMode.JSON
    if args.http is not None:
        from trio_mcp import HttpParser

        changes["http_parser"] = HttpParser(args.http)
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
        "abandoned_ttl": config.abandoned_ttl,
        "max_sessions": config.max_sessions,
        "stall_budget": config.stall_budget,
        "min_read_rate": config.min_read_rate,
        "signal_timeout": config.signal_timeout,
        "release_memory_after": config.release_memory_after,
        "retention": attrs.asdict(config.retention),
        "task_ttl": config.task_ttl,
        "max_tasks": config.max_tasks,
        "max_task_results_memory": config.max_task_results_memory,
        "max_body_memory": config.max_body_memory,
        "request_memory": config.request_memory,
        "request_memory_per_client": config.request_memory_per_client,
        "request_memory_per_session": config.request_memory_per_session,
        "memory_accounting": config.memory_accounting,
        "http_max_connections": config.http_max_connections,
    }


async def run(args: argparse.Namespace) -> None:
    config = build_config(args)
    stop = trio.Event()

    async def on_signals() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                stop.set()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signals)
        urls: list[str] = await nursery.start(
            lambda task_status: serve(
                server,
                host=args.host,
                port=args.port,
                config=config,
                stats_port=args.stats_port,
                http_server=args.server,
                inspect_port=args.inspect,
                shutdown_trigger=stop.wait,
                task_status=task_status,
            )
        )
        ready = {
            "url": urls[0],
            "stats_url": next((u for u in urls if u.endswith("/stats")), None),
            "inspect_url": next((u for u in urls[1:] if u.endswith("/")), None),
            "pid": os.getpid(),
            "server": "trio-mcp" if args.server == "trio-mcp" else f"trio-mcp/{args.server}",
            "allocator": running_allocator(),
            "config": describe(config),
        }
        print("READY " + json.dumps(ready), flush=True)
        await stop.wait()
        # serve() returns after its graceful shutdown; then nothing else runs.
        nursery.cancel_scope.deadline = trio.current_time() + config.shutdown_grace + 10


def remove_budgets() -> None:
    """Make the limits' per-request work free: each function becomes one that does nothing
    (the checks pass), in this process only. Not for serving anyone."""
    from trio_mcp.app import _tools
    from trio_mcp.runtime import _budget
    from trio_mcp.runtime.legacy import _table

    _tools.non_finite_at = lambda value: None  # type: ignore[assignment]
    _table.SessionTable.used = lambda self, session: None  # type: ignore[method-assign]

    def take(self: _budget.BodyPool, arrival: _budget.Arrival, chunk: bytes) -> bool:
        arrival.chunks.append(chunk)
        arrival.size += len(chunk)
        return True

    _budget.BodyPool.take = take  # type: ignore[method-assign]
    _budget.BodyPool.done = lambda self, arrival: None  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    # As `trio-mcp serve` does; this may start the interpreter again, before anything else.
    use_allocator()
    use_collector_threshold()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port (0: any free one)")
    parser.add_argument("--server", choices=HTTP_SERVERS, default="trio-mcp",
                        help="the HTTP server: trio-mcp's own (default) or hypercorn")
    parser.add_argument(
        "--http", choices=("auto", "httptools", "h11"), default=None,
        help="what reads requests on trio-mcp's own server (ServerConfig.http_parser); "
        "left to the server's default when not given",
    )
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--session-ttl", type=float, default=None, help="session_idle_ttl, s")
    parser.add_argument("--stats-port", type=int, default=None,
                        help="serve Runtime.statistics() on 127.0.0.1:PORT/stats (0: any)")
    parser.add_argument("--stall-budget", type=float, default=None, help="stall_budget, s")
    parser.add_argument("--window-events", type=int, default=None, help="retention.max_events")
    parser.add_argument("--window-bytes", type=int, default=None, help="retention.max_bytes")
    parser.add_argument("--task-ttl", type=float, default=None, help="task_ttl, s")
    parser.add_argument("--max-tasks", type=int, default=None,
                        help="max_tasks (the benchmark is one client)")
    parser.add_argument("--no-accounting", action="store_true",
                        help="memory_accounting=False (to measure what it costs)")
    parser.add_argument("--no-budgets", action="store_true",
                        help="take out the per-request work of the limits (for comparison)")
    parser.add_argument("--inspect", type=int, default=None, metavar="PORT",
                        help="serve the live task tree on 127.0.0.1:PORT (trio-mcp serve "
                        "--inspect)")
    args = parser.parse_args(argv)
    if args.no_budgets:
        remove_budgets()
    logging.basicConfig(level=logging.WARNING)
    release.install()
    signal.signal(signal.SIGUSR2, arenas.write)
    trio.run(run, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
