# The resumption suite runs against both session stores (issue 21): each live server of these
# tests keeps its sessions in this process's memory, and again in a real Redis
# (ServerConfig.store), so that every drop, cursor and schedule below holds for both.
from __future__ import annotations

import attrs
import pytest
import trio
from support.fixtures import StartServer, start_live

from trio_mcp import Server, ServerConfig

STORES = ("memory", "redis")


@pytest.fixture(params=STORES)
def session_store(request: pytest.FixtureRequest) -> str | None:
    """The store of this run's live servers: None (memory), or the test Redis's URL."""
    if request.param == "memory":
        return None
    url: str = request.getfixturevalue("redis_url")
    return url


@pytest.fixture
async def live_server(
    nursery: trio.Nursery, http_server: str, session_store: str | None
) -> StartServer:
    """live_server (tests/support/fixtures.py), on each session store in turn."""

    async def start(
        server: Server | None = None, config: ServerConfig | None = None, port: int = 0
    ) -> object:
        config = config or ServerConfig()
        if session_store is not None:
            config = attrs.evolve(config, store=session_store)
        return await start_live(nursery, server, config, http_server=http_server, port=port)

    return start  # type: ignore[return-value]
