# A resource's own caching hints (issue 40, spec/handlers.md TM-HAND-CACHE): a 2026-07-28
# read of it carries them; other reads keep the server's; a resource that needs scopes is
# never public.
from __future__ import annotations

import pytest
import trio
from support.fixtures import StartServer
from support.modern import modern_request, post

from trio_mcp import CacheHint, CacheScope, Server

TIMEOUT = 20

pytestmark = pytest.mark.spec("TM-HAND-CACHE")


def cached_server() -> Server:
    server = Server("cached")

    @server.resource("docs://{name}", cache=CacheHint(ttl_ms=60_000, scope=CacheScope.PUBLIC))
    async def doc(name: str) -> str:
        """A document that changes seldom."""
        return f"doc {name}"

    @server.resource("clock://now")
    async def now() -> str:
        """Changes all the time."""
        return "now"

    return server


async def test_a_read_carries_its_resources_own_hints(live_server: StartServer) -> None:
    """docs://x is fresh for a minute for anyone; clock://now keeps the server's default
    (0 ms, private); the templates list keeps the server's too."""
    live = await live_server(cached_server())
    with trio.fail_after(TIMEOUT):
        doc = (await post(live.url, modern_request("resources/read", {"uri": "docs://x"})))
        now = (await post(live.url, modern_request("resources/read", {"uri": "clock://now"})))
        listed = await post(live.url, modern_request("resources/templates/list"))
    assert (60_000, "public") == (doc.json()["result"]["ttlMs"], doc.json()["result"]["cacheScope"])
    assert (0, "private") == (now.json()["result"]["ttlMs"], now.json()["result"]["cacheScope"])
    assert (0, "private") == (listed.json()["result"]["ttlMs"],
                              listed.json()["result"]["cacheScope"])


@pytest.mark.spec("MU-CACHE-7")
def test_a_resource_that_needs_scopes_cannot_be_public() -> None:
    """A public hint on a resource with scopes is refused at registration: a shared cache
    would hand it to callers without them."""
    server = Server("scoped")

    async def secret() -> str:
        return "s"

    with pytest.raises(ValueError, match="cache scope is private"):
        server.add_resource(secret, "secret://x", scopes=iter(["read"]),
                            cache=CacheHint(ttl_ms=1000, scope=CacheScope.PUBLIC))
    server.add_resource(secret, "secret://y", scopes=["read"],
                        cache=CacheHint(ttl_ms=1000, scope=CacheScope.PRIVATE))
