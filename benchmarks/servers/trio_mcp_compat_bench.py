"""The benchmark server (trio_mcp_bench.py) with trio_mcp.compat's names, for what they cost
per request (issue 40): with ``$COMPAT_BENCH=context``, ``echo`` takes the SDK's ``Context``
(the view, injected as an async dependency); with ``middleware``, a FastMCP ``Middleware``
whose hooks all pass through wraps every request. benchmarks/compat_callgrind.py counts them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trio_mcp_bench

from trio_mcp.compat import Context, Middleware


def use_context_view() -> None:
    async def echo(text: str, ctx: Context) -> str:
        """Echo, with the compat Context.

        Args:
            text: what to echo back.
        """
        return text

    trio_mcp_bench.server.add_tool(echo, replace=True)


def use_middleware() -> None:
    trio_mcp_bench.server.middleware(Middleware())


if __name__ == "__main__":
    {"context": use_context_view, "middleware": use_middleware}[os.environ["COMPAT_BENCH"]]()
    sys.exit(trio_mcp_bench.main())
