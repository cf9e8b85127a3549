"""The benchmark server (trio_mcp_bench.py) with one pass-through middleware, for the cost of
a middleware per request (issue 40): benchmarks/middleware_callgrind.py counts both."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trio_mcp_bench

from trio_mcp import CallNext, Context


@trio_mcp_bench.server.middleware
async def passthrough(ctx: Context, call_next: CallNext) -> Mapping[str, Any]:
    """Does nothing but call the rest: what any middleware costs at least."""
    return await call_next()


if __name__ == "__main__":
    sys.exit(trio_mcp_bench.main())
