# The OAuth 2.1 flow of MCP's authorization spec, as a client runs it when a server answers
# 401 (spec/client.md TM-CLIENT-OAUTH): the protected resource's metadata (RFC 9728), its
# authorization server's (RFC 8414, or OpenID discovery), a client id (given, or registered,
# RFC 7591), the authorization code with PKCE (S256) and a resource indicator (RFC 8707), the
# token, and the request sent again; a 403 insufficient_scope asks again for the scope named.
# An httpx2 authentication flow: the discovery and token requests are yielded to httpx2, which
# sends them as it sends the MCP request.
from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, Final, TypeAlias
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx2

from ._errors import ClientError

__all__ = ["AuthorizationFailed", "Authorize", "OAuth"]

#: ``await authorize(url)``: send the user to the authorization URL; return the URL the
#: authorization server redirected the browser to (it holds the code). None: the client
#: follows the authorization endpoint's redirect itself, with no user (tests, machines).
Authorize: TypeAlias = Callable[[str], Awaitable[str]]

#: Authorizations one request may run (a 401, then a 403 for more scope).
MAX_AUTHORIZATIONS: Final = 2
_PARAM = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class AuthorizationFailed(ClientError):
    """The authorization flow could not give the client a token."""


def _challenge(response: httpx2.Response) -> dict[str, str]:
    """The parameters of a response's Bearer challenge (RFC 6750 §3)."""
    header = response.headers.get("www-authenticate", "")
    if not header.lower().startswith("bearer"):
        return {}
    return {m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
            for m in _PARAM.finditer(header[6:])}


def _origin(url: httpx2.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode('ascii')}"


def _resource_of(url: httpx2.URL) -> str:
    """The canonical URI of the MCP server (RFC 8707 §2: no fragment, no query)."""
    return urlunsplit((url.scheme, url.netloc.decode("ascii"), url.path, "", ""))


def _prm_urls(url: httpx2.URL, challenge: Mapping[str, str]) -> list[str]:
    """Where the protected resource's metadata may be: the challenge's, then the path-based
    and the root well-known URIs (RFC 9728 §3.1)."""
    urls = [challenge["resource_metadata"]] if "resource_metadata" in challenge else []
    path = url.path.rstrip("/")
    if path:
        urls.append(f"{_origin(url)}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{_origin(url)}/.well-known/oauth-protected-resource")
    return urls


def _as_urls(issuer: str) -> list[str]:
    """Where an authorization server's metadata may be (RFC 8414 §3.1, OpenID Connect
    Discovery), in the order the MCP spec gives."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server",
                f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


def _json(response: httpx2.Response) -> dict[str, Any] | None:
    if not 200 <= response.status_code < 300:  # a registration answers 201
        return None
    try:
        value = response.json()
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _application_type(redirect_uri: str) -> str:
    host = urlsplit(redirect_uri).hostname or ""
    return "native" if host in ("localhost", "127.0.0.1", "::1") else "web"


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


class OAuth(httpx2.Auth):
    """Tokens by the authorization code flow, got when a server asks (401) and kept."""

    requires_response_body = True

    def __init__(
        self,
        *,
        authorize: Authorize | None = None,
        redirect_uri: str = "http://127.0.0.1:33418/callback",
        client_id: str | None = None,
        client_secret: str | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "trio-mcp-client",
        scope: str | None = None,
    ) -> None:
        self._authorize = authorize
        self._redirect_uri = redirect_uri
        #: A client id given by the application: used with every authorization server.
        self._given = (client_id, client_secret) if client_id is not None else None
        self._client_id: str | None = None
        self._client_secret: str | None = None
        #: The credentials registered with each authorization server, by issuer (SEP-2352:
        #: one server's client is never presented to another).
        self._registered: dict[str, tuple[str, str | None]] = {}
        self._client_metadata_url = client_metadata_url
        self._client_name = client_name
        self._scope = scope
        #: The scope of the last authorization: a step-up asks for it and more (SEP-2350).
        self._granted: set[str] = set()
        self._token: str | None = None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self._token is not None:
            request.headers["authorization"] = f"Bearer {self._token}"
        response = yield request
        for _ in range(MAX_AUTHORIZATIONS):
            challenge = _challenge(response)
            if response.status_code == 403 and challenge.get("error") == "insufficient_scope":
                pass  # step-up: ask again, for the scope the challenge names
            elif response.status_code != 401:
                return
            flow = self._authorization(request.url, challenge)
            token: str | None = None
            outgoing = await flow.__anext__()
            while True:
                reply = yield outgoing
                await reply.aread()
                try:
                    outgoing = await flow.asend(reply)
                except StopAsyncIteration:
                    token = self._token
                    break
            if token is None:
                return
            request.headers["authorization"] = f"Bearer {token}"
            response = yield request

    async def _authorization(
        self, url: httpx2.URL, challenge: Mapping[str, str]
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The flow's own requests, yielded; it leaves the token in ``_token``."""
        prm: dict[str, Any] | None = None
        for where in _prm_urls(url, challenge):
            prm = _json((yield httpx2.Request("GET", where)))
            if prm is not None:
                break
        resource = _resource_of(url)
        if prm is not None and isinstance(prm.get("resource"), str):
            named = prm["resource"].rstrip("/")
            # RFC 9728 §3.3: the metadata must be this resource's.
            if not (resource.rstrip("/") == named or resource.startswith(named + "/")):
                raise AuthorizationFailed(
                    f"the protected resource metadata names {named!r}, not {resource!r}")
            resource = prm["resource"]
        servers = (prm or {}).get("authorization_servers") or [_origin(url)]
        issuer = str(servers[0])
        metadata: dict[str, Any] | None = None
        for where in _as_urls(issuer):
            metadata = _json((yield httpx2.Request("GET", where)))
            if metadata is not None:
                break
        if metadata is None:
            raise AuthorizationFailed(f"no authorization server metadata for {issuer!r}")
        if metadata.get("issuer") != issuer:
            # RFC 8414 §3.3: metadata for another issuer is not this server's.
            raise AuthorizationFailed(f"the authorization server metadata at {issuer!r} "
                                      f"names the issuer {metadata.get('issuer')!r}")
        scope = challenge.get("scope") or self._scope
        if scope is None and isinstance((prm or {}).get("scopes_supported"), list):
            scope = " ".join(str(s) for s in prm["scopes_supported"])  # type: ignore[index]
        if scope is not None and challenge.get("error") == "insufficient_scope":
            wanted = self._granted | set(scope.split())
            scope = " ".join(sorted(wanted))
        if scope is not None:
            self._granted = set(scope.split())
        if self._given is not None:
            self._client_id, self._client_secret = self._given
        elif issuer in self._registered:
            self._client_id, self._client_secret = self._registered[issuer]
        else:
            self._client_id = self._client_secret = None
        if self._client_id is None:
            if (self._client_metadata_url is not None
                    and metadata.get("client_id_metadata_document_supported")):
                self._client_id = self._client_metadata_url
            elif isinstance(metadata.get("registration_endpoint"), str):
                registered = _json((yield httpx2.Request(
                    "POST", metadata["registration_endpoint"], json={
                        "client_name": self._client_name,
                        "redirect_uris": [self._redirect_uri],
                        "grant_types": ["authorization_code", "refresh_token"],
                        "response_types": ["code"],
                        "token_endpoint_auth_method": "none",
                        # SEP-837: a loopback redirect is a native application's.
                        "application_type": _application_type(self._redirect_uri),
                        **({"scope": scope} if scope else {}),
                    })))
                if registered is None or not isinstance(registered.get("client_id"), str):
                    raise AuthorizationFailed("the client registration was refused")
                self._client_id = registered["client_id"]
                secret = registered.get("client_secret")
                self._client_secret = secret if isinstance(secret, str) else None
                self._registered[issuer] = (self._client_id, self._client_secret)
            else:
                raise AuthorizationFailed("no client id: the authorization server offers no "
                                          "registration, and none was given")
        verifier, code_challenge = _pkce()
        state = secrets.token_urlsafe(16)
        query = {"response_type": "code", "client_id": self._client_id,
                 "redirect_uri": self._redirect_uri, "code_challenge": code_challenge,
                 "code_challenge_method": "S256", "state": state, "resource": resource}
        if scope:
            query["scope"] = scope
        authorization_url = f"{metadata['authorization_endpoint']}?{urlencode(query)}"
        if self._authorize is not None:
            redirected = await self._authorize(authorization_url)
        else:
            answer = yield httpx2.Request("GET", authorization_url)
            redirected = answer.headers.get("location", "")
        got = {k: v[0] for k, v in parse_qs(urlsplit(redirected).query).items()}
        if got.get("state") != state or "code" not in got:
            raise AuthorizationFailed(f"the authorization gave no code: {got.get('error')!r}")
        if got.get("iss", None if not metadata.get(
                "authorization_response_iss_parameter_supported") else "") not in (
                None, metadata.get("issuer")):
            # RFC 9207 §2.4: an iss that is not the issuer's, or none from a server that
            # said it sends one, may be a mix-up: the code is not used.
            raise AuthorizationFailed("the authorization response's iss is not the issuer's")
        form = {"grant_type": "authorization_code", "code": got["code"],
                "redirect_uri": self._redirect_uri, "code_verifier": verifier,
                "resource": resource}
        headers: dict[str, str] = {}
        methods = metadata.get("token_endpoint_auth_methods_supported") or [
            "client_secret_basic"]
        if self._client_secret is not None and "client_secret_basic" in methods:
            pair = f"{self._client_id}:{self._client_secret}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        else:
            form["client_id"] = str(self._client_id)
            if self._client_secret is not None:
                form["client_secret"] = self._client_secret
        token = _json((yield httpx2.Request("POST", metadata["token_endpoint"], data=form,
                                            headers=headers)))
        if token is None or not isinstance(token.get("access_token"), str):
            raise AuthorizationFailed("the token endpoint gave no access token")
        self._token = token["access_token"]
