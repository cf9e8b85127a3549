"""A small OAuth 2.1 authorization server for the authorization tests, on loopback.

It signs RS256 access tokens with PyJWT and serves what the MCP Python SDK's
``OAuthClientProvider`` needs to finish its flow without a browser: authorization-server
metadata (RFC 8414), dynamic client registration (RFC 7591), an authorization endpoint that
approves at once and redirects with a code (PKCE S256 required), a token endpoint
(authorization code with the ``resource`` indicator of RFC 8707, and client credentials), its
key set, and token introspection (RFC 7662). ``mint`` makes a token directly, for tests that
need one the flow would not give (expired, for another audience, from another key).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode

import attrs
import jwt
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from trio_mcp import Context, Server

Scope = dict[str, Any]

#: The subject the authorization endpoint approves for (a test user who is always signed in).
USER = "alice"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    jwk.update(kid=kid, use="sig", alg="RS256")
    return jwk


@attrs.define
class AuthServer:
    """The authorization server's state; ``app`` is its ASGI application."""

    issuer: str = ""
    key: rsa.RSAPrivateKey = attrs.field(factory=new_key)
    kid: str = "key-1"
    #: Confidential clients known in advance (client credentials, introspection).
    secrets_: dict[str, str] = attrs.field(factory=dict)
    clients: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    codes: dict[str, dict[str, str]] = attrs.field(factory=dict)
    revoked: set[str] = attrs.field(factory=set)
    #: Every request it served, as "METHOD path", for tests of the client's discovery.
    seen: list[str] = attrs.field(factory=list)
    #: The headers of each of those requests, names lower-cased.
    seen_headers: list[dict[str, str]] = attrs.field(factory=list)
    authorizations: list[dict[str, str]] = attrs.field(factory=list)
    #: A slow key-set endpoint: each GET /jwks waits this long, and then for ``jwks_gate``
    #: if one is set (a test opens it), before it answers.
    jwks_delay: float = 0.0
    jwks_gate: trio.Event | None = None
    #: GET /jwks being answered now, and the most ever at once.
    jwks_in_flight: int = 0
    jwks_most_in_flight: int = 0

    def jwks(self) -> dict[str, Any]:
        return {"keys": [public_jwk(self.key, self.kid)]}

    def public_pem(self) -> bytes:
        return self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def rotate(self) -> None:
        """A new signing key under a new key id; the old one is no longer published."""
        self.key = new_key()
        self.kid = f"key-{secrets.token_hex(2)}"

    def mint(
        self,
        *,
        audience: str | list[str],
        subject: str = USER,
        scope: str = "",
        expires_in: float = 300,
        issuer: str | None = None,
        key: rsa.RSAPrivateKey | None = None,
        kid: str | None = None,
        client_id: str = "test-client",
    ) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer if issuer is None else issuer,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": int(now + expires_in),
            "scope": scope,
            "client_id": client_id,
            "jti": secrets.token_hex(8),
        }
        return jwt.encode(
            claims,
            key or self.key,
            algorithm="RS256",
            headers={"kid": kid or self.kid, "typ": "at+jwt"},
        )

    def metadata(self) -> dict[str, Any]:
        iss = self.issuer
        return {
            "issuer": iss,
            "authorization_endpoint": f"{iss}/authorize",
            "token_endpoint": f"{iss}/token",
            "registration_endpoint": f"{iss}/register",
            "jwks_uri": f"{iss}/jwks",
            "introspection_endpoint": f"{iss}/introspect",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "none", "client_secret_basic", "client_secret_post",
            ],
            "scopes_supported": ["mcp", "mcp:admin"],
        }

    # -- the ASGI application -------------------------------------------------------------

    async def app(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        path, method = scope["path"], scope["method"]
        self.seen.append(f"{method} {path}")
        body = await _body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen_headers.append(headers)
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if path == "/.well-known/oauth-authorization-server":
            await _json(send, 200, self.metadata())
        elif path == "/jwks":
            self.jwks_in_flight += 1
            self.jwks_most_in_flight = max(self.jwks_most_in_flight, self.jwks_in_flight)
            try:
                await trio.sleep(self.jwks_delay)
                if self.jwks_gate is not None:
                    await self.jwks_gate.wait()
                await _json(send, 200, self.jwks())
            finally:
                self.jwks_in_flight -= 1
        elif path == "/register" and method == "POST":
            request = json.loads(body)
            client_id = f"client-{secrets.token_hex(4)}"
            info = {**request, "client_id": client_id, "token_endpoint_auth_method": "none"}
            self.clients[client_id] = info
            await _json(send, 201, info)
        elif path == "/authorize":
            await self._authorize(send, query)
        elif path == "/token" and method == "POST":
            await self._token(send, form, headers)
        elif path == "/introspect" and method == "POST":
            await self._introspect(send, form, headers)
        else:
            await _json(send, 404, {"error": "not_found"})

    async def _authorize(self, send: Any, query: Mapping[str, str]) -> None:
        client = self.clients.get(query.get("client_id", ""))
        if client is None or query.get("redirect_uri") not in client.get("redirect_uris", []):
            await _json(send, 400, {"error": "invalid_client"})
            return
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            await _json(send, 400, {"error": "invalid_request", "error_description": "PKCE"})
            return
        self.authorizations.append(dict(query))
        code = secrets.token_urlsafe(16)
        self.codes[code] = dict(query)
        location = query["redirect_uri"] + "?" + urlencode(
            {"code": code, "state": query.get("state", ""), "iss": self.issuer}
        )
        await send({"type": "http.response.start", "status": 302,
                    "headers": [(b"location", location.encode())]})
        await send({"type": "http.response.body", "body": b""})

    async def _token(self, send: Any, form: Mapping[str, str], headers: Mapping[str, str]) -> None:
        grant = form.get("grant_type")
        if grant == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            if (
                asked is None
                or challenge.rstrip(b"=").decode() != asked["code_challenge"]
                or form.get("redirect_uri") != asked["redirect_uri"]
                or form.get("resource") != asked.get("resource")
            ):
                await _json(send, 400, {"error": "invalid_grant"})
                return
            scope, resource = asked.get("scope", ""), asked["resource"]
            client_id = asked["client_id"]
        elif grant == "client_credentials":
            client_id = self._confidential(form, headers) or ""
            if not client_id:
                await _json(send, 401, {"error": "invalid_client"})
                return
            scope, resource = form.get("scope", ""), form.get("resource", "")
        else:
            await _json(send, 400, {"error": "unsupported_grant_type"})
            return
        token = self.mint(audience=resource, scope=scope, client_id=client_id,
                          subject=USER if grant == "authorization_code" else client_id)
        await _json(send, 200, {"access_token": token, "token_type": "Bearer",
                                "expires_in": 300, "scope": scope})

    def _confidential(self, form: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        expected = self.secrets_.get(client_id)
        if expected is None or not secrets.compare_digest(expected, secret):
            return None
        return client_id

    async def _introspect(
        self, send: Any, form: Mapping[str, str], headers: Mapping[str, str]
    ) -> None:
        if self._confidential(form, headers) is None:
            await _json(send, 401, {"error": "invalid_client"})
            return
        token = form.get("token", "")
        try:
            claims = jwt.decode(token, self.key.public_key(), algorithms=["RS256"],
                                options={"verify_aud": False})
        except jwt.PyJWTError:
            await _json(send, 200, {"active": False})
            return
        if claims.get("jti") in self.revoked:
            await _json(send, 200, {"active": False})
            return
        await _json(send, 200, {"active": True, **claims})


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _json(send: Any, status: int, obj: Any) -> None:
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(obj).encode()})


async def start_auth_server(nursery: trio.Nursery, **kwargs: Any) -> AuthServer:
    """Serve an AuthServer on 127.0.0.1 (hypercorn, a free port) for the rest of the test."""
    server = AuthServer(**kwargs)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    binds = await nursery.start(hypercorn_serve, server.app, config)
    server.issuer = binds[0]
    return server


def scoped_server() -> Server:
    server = Server("auth-tests")

    @server.tool()
    async def echo(text: str) -> str:
        """Echoes."""
        return text

    @server.tool(scopes=["mcp:admin"])
    async def reset() -> str:
        """Needs the admin scope."""
        return "reset"

    @server.tool()
    async def whoami(ctx: Context) -> dict[str, Any]:
        """Who the token speaks for, as the handler sees it."""
        principal = ctx.principal
        assert principal is not None
        return {"subject": principal.subject, "scopes": sorted(principal.scopes),
                "client_id": principal.client_id}

    @server.tool()
    async def confirm(ctx: Context) -> str:
        """Asks the user (in the 2026-07-28 era, by input_required and requestState)."""
        answer = await ctx.elicit(
            "Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="sure"
        )
        return f"answered {answer.action}"

    return server


async def start_protected(
    live_server: Any,
    nursery: trio.Nursery,
    *,
    introspect: bool = False,
    server: Server | None = None,
    verifier_options: Mapping[str, Any] | None = None,
    **fields: Any,
) -> tuple[Any, AuthServer]:
    """An authorization server, and ``server`` (scoped_server() unless given) behind it on a
    live server of the test's HTTP server (``live_server``): JWTs checked against the
    issuer's keys (or, with ``introspect``, introspection as the client "rs"), scopes "mcp"
    and "mcp:admin", "mcp" required; ``verifier_options`` replace the JWT verifier's
    (``min_refresh`` is 0); ``fields`` replace any of AuthConfig's."""
    from support.fixtures import free_port
    from trio_mcp import AuthConfig, IntrospectionVerifier, JWTVerifier, ServerConfig

    issuer = await start_auth_server(nursery, secrets_={"rs": "rs-secret"})
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    verifier: Any
    if introspect:
        verifier = IntrospectionVerifier(
            endpoint=f"{issuer.issuer}/introspect", client_id="rs", client_secret="rs-secret",
            audience=resource,
        )
    else:
        verifier = JWTVerifier(
            issuer=issuer.issuer, audience=resource, jwks_uri=f"{issuer.issuer}/jwks",
            **{"min_refresh": 0.0, **(verifier_options or {})},
        )
    settings: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": [issuer.issuer],
        "verifier": verifier,
        "scopes_supported": ["mcp", "mcp:admin"],
        "required_scopes": {"mcp"},
        **fields,
    }
    live = await live_server(
        server or scoped_server(), ServerConfig(auth=AuthConfig(**settings)), port=port
    )
    return live, issuer
