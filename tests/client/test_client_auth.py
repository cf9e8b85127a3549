# trio_mcp.Client against trio-mcp as an OAuth 2.1 resource server (tests/support/oauth.py's
# authorization server signs the tokens): bearer tokens from a provider (TM-CLIENT-BEARER),
# and the authorization code flow a 401 starts (TM-CLIENT-OAUTH).
from __future__ import annotations

import pytest
import trio
from support.fixtures import StartServer
from support.oauth import start_protected

from trio_mcp import Client
from trio_mcp.client import HttpStatusError, OAuth


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


@pytest.mark.spec("TM-CLIENT-OAUTH")
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_401_runs_the_authorization_flow_and_a_403_asks_for_more_scope(
    live_server: StartServer, nursery: trio.Nursery, mode: str
) -> None:
    """Against trio-mcp as a resource server: the first request's 401 leads the client
    through discovery, registration and the authorization code flow (the application's
    authorize callback hands it the redirect); the tool sees the user; a tool that needs
    mcp:admin answers 403 insufficient_scope, and the client authorizes again for it."""
    import httpx2

    live, _issuer = await start_protected(live_server, nursery)
    asked: list[str] = []

    async def authorize(url: str) -> str:
        asked.append(url)
        async with httpx2.AsyncClient() as browser:  # the user's browser, approving at once
            answer = await browser.get(url)
        return answer.headers["location"]

    with trio.fail_after(30):
        async with Client(live.url, mode=mode, oauth=OAuth(authorize=authorize)) as client:
            me = await client.call_tool("whoami")
            reset = await client.call_tool("reset")

    assert "alice" in str(me)
    assert "reset" == reset["content"][0]["text"]
    assert 2 == len(asked)
    assert "mcp%3Aadmin" in asked[1] and "resource=" in asked[1]
