"""Fixtures of the feature tests (resources, prompts, completion, utilities).

``mem`` runs a Server behind its ASGI app in memory (no sockets, so MockClock works);
``live_server`` (tests/support/fixtures.py) runs one under hypercorn on loopback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
from feat_support import MemoryServer

from trio_mcp import Server, ServerConfig

StartMemory = Callable[..., Awaitable[MemoryServer]]


@pytest.fixture
async def mem(nursery: trio.Nursery) -> StartMemory:
    """A factory: ``await mem(server, config=None)`` serves ``server`` in memory for the
    length of the test."""

    async def start(server: Server, config: ServerConfig | None = None) -> MemoryServer:
        ms = MemoryServer(server, config or ServerConfig(), nursery)
        await nursery.start(ms.run)
        return ms

    return start
