"""Fixtures of the feature tests (resources, prompts, completion, utilities).

``connect`` opens a ``trio_mcp.Client(server)`` in process (no sockets, so MockClock works):
the way the feature tests that check what handlers do reach the server, as a user's tests
would. ``mem`` runs a Server behind its ASGI app in memory and shows the raw HTTP exchanges,
for the tests whose point is the wire; ``live_server`` (tests/support/fixtures.py) runs one
under hypercorn on loopback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from feat_support import Connect, MemoryServer
from support.eras import LEGACY

from trio_mcp import Client, Server, ServerConfig

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


@pytest.fixture
async def connect(nursery: trio.Nursery) -> Connect:
    """A factory: ``await connect(server, era=LEGACY, config=None, **client_options)`` is an
    open ``trio_mcp.Client(server)`` in that era (a protocol version), closed at the end of
    the test."""

    async def open_client(
        server: Server, era: str = LEGACY, *, config: ServerConfig | None = None, **options: Any
    ) -> Client:
        async def hold(task_status: trio.TaskStatus[Client]) -> None:
            async with Client(server, mode=era, config=config, **options) as client:
                task_status.started(client)
                await trio.sleep_forever()

        client: Client = await nursery.start(hold)
        return client

    return open_client
