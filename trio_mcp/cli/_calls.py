# The command line's client commands, through trio_mcp.Client: `trio-mcp tools URL`,
# `trio-mcp call URL TOOL '{"json": "args"}'` and `trio-mcp read URL URI` print what the
# server answers (and a call's progress, on stderr); a smoke test after a deploy.
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = ["COMMANDS", "add_client_commands", "run_client_command"]

COMMANDS = ("tools", "call", "read")


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"a header is 'Name: value', not {text!r}")
    return name.strip(), value.strip()


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"the arguments are not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("the arguments are a JSON object")
    return value


def add_client_commands(sub: Any) -> None:
    """Add tools, call and read to the command line's subparsers."""

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("url", help="the server's MCP endpoint (http://HOST:PORT/mcp)")
        parser.add_argument(
            "--mode", default="auto",
            help="auto (server/discover, else a 2025-11-25 session), legacy, or a protocol "
            "version (default: auto)",
        )
        parser.add_argument(
            "-H", "--header", action="append", type=_header, default=[], metavar="'NAME: VALUE'",
            help="an HTTP header on every request (an Authorization: Bearer token); repeatable",
        )

    tools = sub.add_parser("tools", help="list a server's tools (an MCP client)")
    common(tools)
    call = sub.add_parser("call", help="call a server's tool and print its result, with "
                          "progress on stderr (an MCP client)")
    common(call)
    call.add_argument("tool", help="the tool's name")
    call.add_argument("arguments", nargs="?", type=_arguments, default={},
                      help="the arguments, a JSON object (default {})")
    read = sub.add_parser("read", help="read a server's resource and print it (an MCP client)")
    common(read)
    read.add_argument("uri", help="the resource's URI")


def _print_content(blocks: Any, out: TextIO) -> None:
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, Mapping) and isinstance(block.get("text"), str):
            print(block["text"], file=out)
        else:
            print(json.dumps(block, ensure_ascii=False), file=out)


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..client import Client

    def progress(done: float, total: float | None, message: str | None) -> None:
        shown = f"{done:g}/{total:g}" if total is not None else f"{done:g}"
        print(f"progress {shown}" + (f" {message}" if message else ""), file=err)

    async with Client(args.url, mode=args.mode, headers=dict(args.header)) as client:
        if args.command == "tools":
            for tool in await client.list_tools():
                description = str(tool.get("description") or "").strip().splitlines()
                print(f"{tool.get('name')}" + (f"  {description[0]}" if description else ""),
                      file=out)
            return 0
        if args.command == "call":
            result = await client.call_tool(args.tool, args.arguments, on_progress=progress)
            _print_content(result.get("content"), out)
            if "structuredContent" in result and not result.get("content"):
                print(json.dumps(result["structuredContent"], ensure_ascii=False), file=out)
            return 1 if result.get("isError") else 0
        result = await client.read_resource(args.uri)
        for content in result.get("contents") or []:
            if isinstance(content, Mapping) and isinstance(content.get("text"), str):
                print(content["text"], file=out)
            else:
                print(json.dumps(content, ensure_ascii=False), file=out)
        return 0


def run_client_command(args: argparse.Namespace) -> int:
    """Run tools, call or read; the exit status (1: an error answer, or the call failed)."""
    import trio

    from ..client import ClientError

    try:
        return trio.run(_run, args, sys.stdout, sys.stderr)
    except ClientError as error:
        print(f"trio-mcp {args.command}: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"trio-mcp {args.command}: {error}", file=sys.stderr)
        return 1
