"""The demo server for the socket fuzzer (tests/e2e/test_e2e_socket_fuzz.py,
benchmarks/fuzz_edge.py): served as `trio-mcp serve --stats-port --inspect` serves it, on the
HTTP server and parser given, with the HTTP deadlines cut short so that a fuzzed connection
that stops halfway ends within seconds. Prints ``READY {"mcp": port, "stats": port,
"inspect": port}`` once it listens; logs at WARNING and above to stderr.

    python tests/support/fuzz_server.py --server {trio-mcp,hypercorn} [--http {httptools,h11}]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import trio

from trio_mcp import HttpParser, ServerConfig, serve
from trio_mcp.demo import server


def _port(url: str) -> int:
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", choices=("trio-mcp", "hypercorn"), default="trio-mcp")
    parser.add_argument("--http", choices=("auto", "httptools", "h11"), default="auto")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # Deadlines short enough that a fuzzed connection that stops ends within seconds (the
    # fuzzer's own connections end their side at once, so they wait for none of them); the
    # body's long enough that the neighbour, a client in a process the fuzzer keeps busy
    # (and at the lowest priority in the long run), is not taken for a slow one.
    config = ServerConfig(
        http_header_timeout=5.0, http_idle_timeout=1.0, http_body_timeout=10.0,
        http_linger_timeout=2.0, http_parser=HttpParser(args.http),
    )

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            urls: list[str] = await nursery.start(
                lambda task_status: serve(
                    server, port=0, config=config, stats_port=0, inspect_port=0,
                    http_server=args.server, task_status=task_status,
                )
            )
            mcp, stats, inspect = (_port(u) for u in urls)
            print("READY " + json.dumps({"mcp": mcp, "stats": stats, "inspect": inspect}),
                  flush=True)

    trio.run(run)


if __name__ == "__main__":
    main()
