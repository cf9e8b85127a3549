"""The trio-mcp contender of benchmarks/run.py: the two benchmark tools, served by
``trio_mcp.serve`` (hypercorn's trio worker) on one port.

    python benchmarks/servers/trio_mcp_bench.py --port 8000 [--json-response] [--session-ttl S]

Everything not given on the command line is ``ServerConfig``'s default: the numbers in
RESULTS.md are those of an unconfigured server.
"""

from __future__ import annotations

import argparse
import logging
import signal

import release  # beside this script, in benchmarks/servers/
import trio

from trio_mcp import Context, ResponseMode, Server, ServerConfig

server = Server("bench-trio-mcp", version="0.1.0")


@server.tool()
async def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: what to echo back.
    """
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--session-ttl", type=float, default=None,
                        help="ServerConfig.session_idle_ttl (default: the config's)")
    parser.add_argument("--stats-port", type=int, default=None,
                        help="serve SessionManager.statistics() on 127.0.0.1:PORT/stats")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    kwargs: dict[str, object] = {}
    if args.session_ttl is not None:
        kwargs["session_idle_ttl"] = args.session_ttl
    config = ServerConfig(
        response_mode=ResponseMode.JSON if args.json_response else ResponseMode.SSE,
        **kwargs,  # type: ignore[arg-type]
    )

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

            async def stop() -> None:
                async for _ in signals:
                    return

            await server.serve(host=args.host, port=args.port, config=config,
                               shutdown_trigger=stop, stats_port=args.stats_port)

    release.install()
    trio.run(run)


if __name__ == "__main__":
    main()
