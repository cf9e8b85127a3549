"""Instructions per ``tools/call``, one tree against another, counted by valgrind's callgrind
(a figure the machine's other load does not move): issue 38's method table and one JSON
Schema validator against the main they branched from.

A server (``serve`` below: ``echo``, whose input schema is derived from its signature, and
``echo_schema``, whose schema is written by hand) runs under callgrind with one tree first on
PYTHONPATH; one client makes N calls of one shape, one after the other on one connection;
the server stops and callgrind writes its total. Done for two N, the difference over the
difference in N is the cost of one call: start-up, imports, the first calls' warm-up and the
shutdown cancel out. The trees alternate (A B A B with ``--repeat 2``).

    python benchmarks/methods_callgrind.py --a /tmp/main --b /tmp/branch \\
        --shape legacy:echo [--n 50 450] [--repeat 2] [--http trio-mcp|hypercorn]

Shapes: ``legacy:echo``, ``legacy:echo_schema`` (a 2025-11-25 session, SSE answers),
``modern:echo``, ``modern:echo_schema`` (2026-07-28, JSON answers); ``modern:echo_task``
calls a tool registered with ``task="optional"`` from a client that declares the tasks
extension (a task-augmented call, quick enough to be answered on its exchange), and a
``+tasks`` suffix (``modern:echo+tasks``) declares the extension for another tool. With
``--task-tool`` the server has ``echo_task`` (so the tasks extension is installed) for every
shape. A tree is a directory holding ``trio_mcp/`` (``git archive <commit> | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client import (  # noqa: E402
    Connection,
    encode_request,
    messages_of,
    modern_head,
    modern_meta,
    open_session,
)

HOST = "127.0.0.1"

#: The hand-written schema of ``echo_schema``: what a tool that states its own contract
#: looks like (a bound, an integer, a list, no other property).
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "maxLength": 1000},
        "count": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["text"],
    "additionalProperties": False,
}


TASKS = "io.modelcontextprotocol/tasks"


def serve(port: int, http: str, task_tool: bool = False) -> None:
    """The server side: run by this script under callgrind (``--serve PORT``)."""
    import trio

    from trio_mcp import Server

    server = Server("methods-callgrind")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    @server.tool(input_schema=SCHEMA)
    async def echo_schema(text: str, count: int = 0, tags: list[str] | None = None) -> str:
        """Echo, with a hand-written schema."""
        return text

    if task_tool:

        @server.tool(task="optional")
        async def echo_task(text: str) -> str:
            """Echo, which may run as a task (answered before task_after: no task made)."""
            return text

    async def main() -> None:
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def stop() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(stop)
                await server.serve(host=HOST, port=port, http_server=http)  # type: ignore[arg-type]

    trio.run(main)


def _body(rid: int, tool: str, modern: bool) -> bytes:
    declares = tool.endswith("+tasks") or tool == "echo_task"
    tool = tool.removesuffix("+tasks")
    params: dict[str, Any] = {"name": tool, "arguments": {"text": f"hello {rid}"}}
    if tool == "echo_schema":
        params["arguments"].update({"count": rid, "tags": ["a", "b"]})
    if modern:
        params["_meta"] = modern_meta(None)
        if declares:
            params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {
                "extensions": {TASKS: {}}
            }
    message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    return json.dumps(message, separators=(",", ":")).encode()


def _check(status: int, messages: list[Any]) -> None:
    final = messages[-1]
    assert status == 200 and "result" in final and not final["result"].get("isError"), final


async def calls(port: int, shape: str, n: int) -> None:
    era, tool = shape.split(":")
    if era == "modern":
        conn = await Connection.open(HOST, port)
        head = modern_head(HOST, port, "/mcp", "tools/call", tool.removesuffix("+tasks"))
        for rid in range(1000, 1000 + n):
            conn.write(encode_request(head, _body(rid, tool, True)))
            response = await conn.read_response()
            _check(response.status, messages_of(response))
        conn.abort()
        return
    session = await open_session(HOST, port)
    for rid in range(1000, 1000 + n):
        response = await session.call(_body(rid, tool, False))
        _check(response.status, messages_of(response))
    session.conn.abort()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"the server did not listen on {port}")


def total_ir(tree: Path, shape: str, n: int, http: str, task_tool: bool = False) -> int:
    """Instructions of a whole server run that answered ``n`` calls of ``shape``."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             __file__, "--serve", str(port), "--http", http,
             *(["--task-tool"] if task_tool or shape.endswith("echo_task") else [])],
            env=env, stdout=subprocess.DEVNULL, stderr=(Path(tmp) / "stderr").open("wb"),
        )
        try:
            _wait_port(port)
            asyncio.run(calls(port, shape, n))
        except BaseException:
            print((Path(tmp) / "stderr").read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=600)
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        assert found, "no total in callgrind's output"
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--a", type=Path, help="the tree before (e.g. main)")
    parser.add_argument("--b", type=Path, help="the tree after (e.g. the branch)")
    parser.add_argument("--shape", default="legacy:echo")
    parser.add_argument("--n", type=int, nargs=2, default=(50, 450))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--http", default="trio-mcp", choices=("trio-mcp", "hypercorn"))
    parser.add_argument("--task-tool", action="store_true")
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.http, args.task_tool)
        return
    low, high = args.n
    per_call: dict[str, list[float]] = {"a": [], "b": []}
    for _ in range(args.repeat):
        for label, tree in (("a", args.a), ("b", args.b)):
            first = total_ir(tree, args.shape, low, args.http, args.task_tool)
            second = total_ir(tree, args.shape, high, args.http, args.task_tool)
            per_call[label].append((second - first) / (high - low))
            print(f"{args.shape} {args.http} {label} ({tree}): "
                  f"{per_call[label][-1]:,.0f} Ir/call", flush=True)
    a = sum(per_call["a"]) / len(per_call["a"])
    b = sum(per_call["b"]) / len(per_call["b"])
    print(f"{args.shape} {args.http}: b/a = {b / a:.3f} ({b:,.0f} / {a:,.0f} Ir per call)")


if __name__ == "__main__":
    main()
