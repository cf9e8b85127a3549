# The official Python SDK client's OAuth support (mcp 2.3.0, OAuthClientProvider) against
# trio-mcp with authorization, over real sockets on both HTTP servers: the client finds the
# authorization server from the 401, registers, gets a token by authorization code with PKCE
# and the resource indicator, calls tools, and steps up when a tool needs more scope.
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
import trio
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from support.fixtures import StartServer
from support.oauth import AuthServer, start_protected

pytestmark = pytest.mark.usefixtures("no_server_errors")

TIMEOUT = 30
REDIRECT = "http://127.0.0.1:1/callback"  # never contacted: the test takes the code itself


class Storage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def provider_for(url: str, storage: Storage) -> OAuthClientProvider:
    """A provider whose "browser" follows the authorization URL itself and hands the code
    from the redirect to the SDK: the authorization server approves at once."""
    codes: list[AuthorizationCodeResult] = []

    async def redirect_handler(authorization_url: str) -> None:
        async with httpx2.AsyncClient() as http:
            answer = await http.get(authorization_url)
        assert 302 == answer.status_code, answer.text
        query = {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()}
        codes.append(AuthorizationCodeResult(code=query["code"], state=query["state"],
                                             iss=query.get("iss")))

    async def callback_handler() -> AuthorizationCodeResult:
        return codes.pop()

    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(client_name="sdk-test", redirect_uris=[REDIRECT]),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )


async def start(live_server: StartServer, nursery: trio.Nursery) -> tuple[str, AuthServer, Any]:
    live, issuer = await start_protected(live_server, nursery)
    return live.url, issuer, live


@pytest.mark.spec("T-AUTH-6", "T-AUTH-7", "T-AUTH-8", "T-AUTH-19", "T-AUTH-20", "T-AUTH-13")
async def test_sdk_client_discovers_authorizes_calls_and_steps_up(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """The SDK client, given only the server's URL: its first request gets 401; it reads
    the metadata the challenge names, registers with the authorization server, gets a
    token for scope "mcp" and this server's resource, lists and calls tools; calling the
    tool that needs "mcp:admin" gets 403 insufficient_scope, and the client authorizes
    again with the larger scope and the call succeeds."""
    url, issuer, live = await start(live_server, nursery)
    storage = Storage()
    with trio.fail_after(TIMEOUT):
        http = httpx2.AsyncClient(auth=provider_for(url, storage))
        transport = streamable_http_client(url, http_client=http)
        async with http, Client(transport, mode="legacy") as client:
            tools = await client.list_tools()
            echoed = await client.call_tool("echo", {"text": "hello"})
            assert storage.tokens is not None
            first_scope = storage.tokens.scope
            reset = await client.call_tool("reset", {})

    assert {"echo", "reset", "confirm"} <= {t.name for t in tools.tools}
    assert "hello" == echoed.content[0].text
    assert "reset" == reset.content[0].text and not reset.is_error
    assert "mcp" == first_scope
    assert storage.tokens is not None and {"mcp", "mcp:admin"} <= set(storage.tokens.scope.split())
    # Discovery went through the metadata, and every authorization named this resource.
    assert "POST /register" in issuer.seen
    assert [url, url] == [a["resource"] for a in issuer.authorizations]
    assert ["mcp", "mcp mcp:admin"] == [
        " ".join(sorted(a["scope"].split())) for a in issuer.authorizations
    ]
    assert 1 == live.stats()["sessions_created"]
