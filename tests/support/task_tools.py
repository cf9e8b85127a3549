# The tools of the tasks extension's tests (tests/tasks/, tests/store/): one of each kind of
# task support, each short enough for a test.
from __future__ import annotations

import trio

from trio_mcp import Context, Server, ToolError
from trio_mcp.protocol import ErrorCode, RemoteProtocolError

__all__ = ["tasks_server"]


def tasks_server() -> Server:
    """Tools of every kind of task support, each short enough for a test."""
    server = Server("tasks-e2e")

    @server.tool(task="optional")
    async def nap(seconds: float = 0.0) -> str:
        """Sleeps, then says so."""
        await trio.sleep(seconds)
        return f"slept {seconds:g}"

    @server.tool(task="required")
    async def job(seconds: float = 0.0, size: int = 0) -> str:
        """Works ``seconds``, then returns ``size`` bytes of text."""
        await trio.sleep(seconds)
        return "x" * size

    @server.tool(task="required")
    async def broken() -> str:
        """Ends with a JSON-RPC error."""
        raise RemoteProtocolError("Internal error: broken", code=ErrorCode.INTERNAL_ERROR)

    @server.tool(task="required")
    async def tool_error() -> str:
        """Ends with a tool error."""
        raise ToolError("no luck")

    @server.tool(task="required")
    async def ask(ctx: Context) -> str:
        """Asks a name inside the task."""
        answer = await ctx.elicit(
            "Name?",
            {"type": "object", "properties": {"name": {"type": "string"}},
             "required": ["name"]},
            key="who",
        )
        return f"hi {(answer.content or {}).get('name')}"

    @server.tool()
    async def plain() -> str:
        """Never a task."""
        return "plain"

    return server
