"""A trio-mcp server whose tool closes its request's connection at given points (SEP-1699
polling), for the client's exactly-once test (tests/client/test_client_drops.py) and its
benchmark (benchmarks/client_exactly_once.py); tests/support/sdk_dropping.py is the same
tool on the Python SDK's server."""

from __future__ import annotations

import trio

from support.resume import close_when_attached
from trio_mcp import Context, Server

__all__ = ["dropping"]

dropping = Server("client-drops")


@dropping.tool()
async def chatty(n: int, closes: list[int], ctx: Context) -> str:
    """Report progress 1..n, closing the request's connection after each count in closes.

    Args:
        n: how many progress notifications.
        closes: after which of them the server closes the connection (once the client's
            next connection is attached, waiting at most 3 s for it).
    """
    for i in range(n):
        await ctx.report_progress(i + 1, n)
        if i + 1 in closes:
            with trio.move_on_after(3):
                await close_when_attached(ctx)
    return f"chatty {n}"
