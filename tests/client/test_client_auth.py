# trio_mcp.Client with bearer tokens from a provider (spec/client.md TM-CLIENT-BEARER),
# against trio-mcp as an OAuth 2.1 resource server (tests/support/oauth.py's authorization
# server signs the tokens): the token goes on every request, and a 401 asks the provider
# once more.
from __future__ import annotations

import pytest
import trio
from support.fixtures import StartServer
from support.oauth import start_protected

from trio_mcp import Client
from trio_mcp.client import HttpStatusError


@pytest.mark.spec("TM-CLIENT-BEARER")
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_providers_token_is_sent_and_renewed_after_a_401(
    live_server: StartServer, nursery: trio.Nursery, mode: str
) -> None:
    """The provider's first token has expired: the server answers 401, the client asks the
    provider again and sends the request once more; every later request carries the new
    token, and the tool sees the user."""
    live, issuer = await start_protected(live_server, nursery)
    given: list[str] = []

    async def provider() -> str:
        expires = -60 if not given else 300
        given.append(issuer.mint(audience=live.url, scope="mcp", expires_in=expires))
        return given[-1]

    with trio.fail_after(30):
        async with Client(live.url, mode=mode, token=provider) as client:
            me = await client.call_tool("whoami")
            await client.call_tool("echo", {"text": "again"})

    assert 2 == len(given)
    assert "alice" in str(me)


@pytest.mark.spec("TM-CLIENT-BEARER")
async def test_without_a_token_a_protected_server_is_a_401(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """With no token, opening the client fails with the server's 401, at once."""
    live, _issuer = await start_protected(live_server, nursery)
    with trio.fail_after(30), pytest.raises(HttpStatusError) as caught:
        async with Client(live.url):
            pass

    assert 401 == caught.value.status
