"""The official Python SDK's server (mcp 2.3.0, MCPServer under uvicorn) with resumability on
(the bounded in-memory event store of benchmarks/servers/sdk_bench.py) and one of each
feature a client uses: tools (one with progress), a resource, a prompt, a tool that asks the
user (an elicitation: a request mid-call in a session, an ``input_required`` round in
2026-07-28) and a slow tool that says whether it was cancelled. The SDK serves both eras from
one app. For trio_mcp.Client's interop tests (tests/client/test_client_sdk.py).

    python tests/support/sdk_features.py PORT
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Annotated

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

SERVERS = Path(__file__).resolve().parents[2] / "benchmarks" / "servers"

mcp = MCPServer("sdk-features")
#: The tags of the slow calls that were cancelled, in order.
CANCELLED: list[str] = []


@mcp.tool()
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
async def count(ctx: Context, n: int) -> str:
    """Report progress 1..n of n, then return."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1}")
    return f"counted {n}"


@mcp.resource("test://greeting", name="greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed text."""
    return "hello from the SDK"


@mcp.prompt()
def review(code: str) -> str:
    """Ask for a review of the code."""
    return f"Please review: {code}"


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("Who are you?", Name)


@mcp.tool()
async def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Ask the user's name, then greet them."""
    return f"hello {who.name}"


@mcp.tool()
async def slow(tag: str) -> str:
    """Wait a minute unless cancelled; a cancellation is recorded under the tag."""
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        CANCELLED.append(tag)
        raise
    return "not cancelled"


@mcp.tool()
async def cancelled() -> str:
    """The tags of the slow calls cancelled so far, comma-separated."""
    return ",".join(CANCELLED)


def main() -> None:
    sys.path.insert(0, str(SERVERS))
    from sdk_bench import BoundedEventStore

    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore")
    app = mcp.streamable_http_app(event_store=BoundedEventStore(), host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False)


if __name__ == "__main__":
    main()
