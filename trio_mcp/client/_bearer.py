# A bearer token from the application's provider on every request (spec/client.md
# TM-CLIENT-BEARER): the provider is asked once, and once more when the server answers 401
# (an expired token: the provider may refresh it), and the request is sent again with the
# new one. The OAuth 2.1 flow that would get a token on a 401 (RFC 9728 discovery,
# authorization code with PKCE) is not built yet.
from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeAlias

import httpx2

__all__ = ["BearerAuth", "TokenProvider"]

#: ``await provider()`` returns an access token.
TokenProvider: TypeAlias = Callable[[], Awaitable[str]]


class BearerAuth(httpx2.Auth):
    """httpx2 authentication with tokens from ``provider``."""

    def __init__(self, provider: TokenProvider) -> None:
        self._provider = provider
        self._token: str | None = None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        sent = self._token
        if sent is None:
            sent = self._token = await self._provider()
        request.headers["authorization"] = f"Bearer {sent}"
        response = yield request
        if response.status_code != 401:
            return
        if self._token == sent:  # not already replaced by a concurrent request's retry
            self._token = await self._provider()
        request.headers["authorization"] = f"Bearer {self._token}"
        yield request
