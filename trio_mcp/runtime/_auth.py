# trio-mcp as an OAuth 2.1 resource server (spec/authorization.md, T-AUTH-*): two token
# verifiers (signed JWTs checked against the authorization server's published keys, and RFC
# 7662 introspection), and the Authenticator the Runtime asks about every request. Tokens are
# checked here and never passed on: nothing trio-mcp sends carries them (T-AUTH-PASSTHROUGH).
from __future__ import annotations

import base64
import json
import logging
import math
import ssl
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jwt
import trio

from ..protocol._auth import (
    InvalidToken,
    Principal,
    bearer_token,
    forbidden,
    metadata_document,
    metadata_paths,
    metadata_url,
    unauthorized,
)
from ..protocol._headers import Headers
from ..protocol._logtext import LogLimiter
from ..protocol._transport import Reply, json_reply
from ._fetch import FetchError, fetch

if TYPE_CHECKING:
    from ..base._config import AuthConfig

__all__ = ["Authenticator", "IntrospectionVerifier", "JWTVerifier"]

logger = logging.getLogger("trio_mcp.auth")

#: MT-AUTH-1: a refresh-token scope is the client's to ask for, not the resource's to name.
OFFLINE_ACCESS = "offline_access"

#: Asymmetric algorithms only: a shared-secret one would let anyone holding the key (every
#: resource server of the issuer) mint tokens, and "none" is no signature at all.
DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                      "EdDSA")


def _scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """RFC 9068 §2.2.3 / RFC 7662 §2.2: ``scope`` is a space-separated string; some
    issuers send a list (``scp``)."""
    scope = claims.get("scope", claims.get("scp", ""))
    if isinstance(scope, str):
        return frozenset(scope.split())
    if isinstance(scope, list):
        return frozenset(s for s in scope if isinstance(s, str))
    return frozenset()


class JWTVerifier:
    """Verifies JWT access tokens (RFC 9068) signed by ``issuer``, whose keys are at
    ``jwks_uri`` (fetched without blocking, cached for ``max_age``, fetched again for a key
    id it has not seen, at most once per ``min_refresh`` seconds) or given as ``jwks``. The
    token must name ``audience`` (this server's resource URI, RFC 8707), be current within
    ``leeway`` seconds, and carry ``sub``.

    One fetch at a time, outside anything a request with a known key waits for
    (TM-AUTH-VERIFY): a token whose key is held is verified at once, whatever fetch is in
    progress; one that needs the fetch waits for the one in progress and shares its result.
    While ``run()`` runs (the Runtime runs it), fetches are tasks of its own: refreshing a
    key set older than ``max_age`` keeps no request waiting, and a client that leaves does
    not cancel the fetch others wait for. Without it, the request that needs a fetch makes
    it, and the others wait for that one.
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_uri: str | None = None,
        jwks: Mapping[str, Any] | None = None,
        algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
        leeway: float = 30.0,
        min_refresh: float = 30.0,
        max_age: float = 3600.0,
        fetch_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if (jwks_uri is None) == (jwks is None):
            raise ValueError("give jwks_uri or jwks, not both")
        self.issuer = issuer
        self.audience = audience
        self.jwks_uri = jwks_uri
        self.algorithms = tuple(algorithms)
        if any(a.startswith("HS") or a == "none" for a in self.algorithms):
            raise ValueError("only asymmetric algorithms verify access tokens")
        self.leeway = leeway
        self.min_refresh = min_refresh
        self.max_age = max_age
        self.fetch_timeout = fetch_timeout
        self._ssl_context = ssl_context
        self._keys: dict[str | None, jwt.PyJWK] = {}
        #: When the key set held was fetched (monotonic seconds; -inf: never).
        self._loaded_at = -math.inf
        #: When the last fetch ended, whatever its outcome (a cancelled one is no attempt):
        #: the next one for an unknown key id waits ``min_refresh`` from then.
        self._attempted_at = -math.inf
        #: Set when the fetch in progress ends (None: none is).
        self._fetching: trio.Event | None = None
        #: Where fetches run while run() runs.
        self._nursery: trio.Nursery | None = None
        #: Fetches begun, whatever their outcome (for tests and the inspector).
        self.fetches = 0
        if jwks is not None:
            self._load(jwks)

    def _load(self, jwks: Mapping[str, Any]) -> None:
        try:
            keys = jwt.PyJWKSet.from_dict(dict(jwks)).keys
        except jwt.PyJWKSetError as exc:
            raise InvalidToken(f"the issuer's key set does not parse: {exc}") from exc
        self._keys = {k.key_id: k for k in keys}

    async def run(self) -> None:
        """Host the key-set fetches until cancelled (TM-AUTH-VERIFY)."""
        async with trio.open_nursery() as nursery:
            if self._nursery is None:
                self._nursery = nursery
            try:
                await trio.sleep_forever()
            finally:
                if self._nursery is nursery:
                    self._nursery = None

    async def _fetch(self, done: trio.Event) -> None:
        """Fetch the key set once, within ``fetch_timeout``; ``done`` is set when it ends,
        however it ends."""
        assert self.jwks_uri is not None
        self.fetches += 1
        completed = False
        try:
            try:
                got = await fetch(
                    self.jwks_uri, timeout=self.fetch_timeout, ssl_context=self._ssl_context
                )
                if got.status != 200:
                    raise FetchError(f"status {got.status}")
                self._load(json.loads(got.body))
                self._loaded_at = time.monotonic()
            except (FetchError, ValueError, InvalidToken) as exc:
                logger.warning("could not fetch the key set at %s: %s", self.jwks_uri, exc)
            completed = True
        finally:
            if completed:
                self._attempted_at = time.monotonic()
            if self._fetching is done:
                self._fetching = None
            done.set()

    async def _refresh(self) -> trio.Event:
        """Begin a fetch (none is in progress): a task of run()'s if it runs, else made here
        and now. The event is set when it ends."""
        assert self._fetching is None
        done = self._fetching = trio.Event()
        if self._nursery is not None:
            self._nursery.start_soon(self._fetch, done, name="trio-mcp jwks fetch")
        else:
            await self._fetch(done)
        return done

    def _held(self, kid: str | None) -> jwt.PyJWK | None:
        key = self._keys.get(kid)
        if key is None and kid is None and len(self._keys) == 1:
            [key] = self._keys.values()
        return key

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        began = time.monotonic()
        while self.jwks_uri is not None:
            key = self._held(kid)
            now = time.monotonic()
            may_fetch = self._fetching is None and now - self._attempted_at >= self.min_refresh
            if key is not None:
                if may_fetch and now - self._loaded_at >= self.max_age:
                    # Old: fetched again, and meanwhile the key held is used (unless run()
                    # does not run: then this request fetches, and waits).
                    await self._refresh()
                    if self._nursery is None:
                        continue
                return key
            if self._attempted_at >= began:
                break  # a fetch ended since this token arrived, without its key
            if self._fetching is not None:
                await self._fetching.wait()  # shared: whoever began it
            elif may_fetch:
                await (await self._refresh()).wait()
            else:
                break
        key = self._held(kid)
        if key is None:
            raise InvalidToken("signed with a key the issuer does not publish")
        return key

    async def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"not a JWT: {exc}") from exc
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise InvalidToken(f"algorithm {alg!r} is not accepted")
        key = await self._key(header.get("kid"))
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from exc
        return Principal(
            subject=str(claims["sub"]),
            issuer=str(claims["iss"]),
            client_id=claims.get("client_id") or claims.get("azp"),
            scopes=_scopes_of(claims),
            expires_at=float(claims["exp"]),
            claims=claims,
        )


class IntrospectionVerifier:
    """Asks the authorization server about each token (RFC 7662) at ``endpoint``, as the
    client ``client_id`` with ``client_secret`` (HTTP Basic). The answer must say the token
    is active, for ``audience``, and name its subject."""

    def __init__(
        self,
        *,
        endpoint: str,
        client_id: str,
        client_secret: str,
        audience: str,
        issuer: str = "",
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.audience = audience
        self.issuer = issuer
        self.timeout = timeout
        self._ssl_context = ssl_context
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode("ascii")
        self._authorization = f"Basic {basic}"

    async def verify(self, token: str) -> Principal:
        try:
            got = await fetch(
                self.endpoint,
                method="POST",
                headers=(
                    ("authorization", self._authorization),
                    ("content-type", "application/x-www-form-urlencoded"),
                    ("accept", "application/json"),
                ),
                body=urlencode({"token": token, "token_type_hint": "access_token"}).encode(),
                timeout=self.timeout,
                ssl_context=self._ssl_context,
            )
            answer = json.loads(got.body) if got.status == 200 else None
        except (FetchError, ValueError) as exc:
            logger.warning("token introspection at %s failed: %s", self.endpoint, exc)
            answer = None
        if not isinstance(answer, dict):
            raise InvalidToken("the authorization server did not answer about the token")
        if answer.get("active") is not True:
            raise InvalidToken("the token is not active")
        aud = answer.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        if self.audience not in audiences:
            raise InvalidToken("the token was not issued for this server")
        exp = answer.get("exp")
        if isinstance(exp, int | float) and exp < time.time():
            raise InvalidToken("the token has expired")
        subject = answer.get("sub")
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("the token names no subject")
        issuer = answer.get("iss", self.issuer)
        return Principal(
            subject=subject,
            issuer=issuer if isinstance(issuer, str) else self.issuer,
            client_id=answer.get("client_id") if isinstance(answer.get("client_id"), str) else None,
            scopes=_scopes_of(answer),
            expires_at=float(exp) if isinstance(exp, int | float) else None,
            claims=answer,
        )


class Authenticator:
    """What the Runtime asks of every request when the server has authorization: its
    principal (401 without a valid token), whether it may do what it asks (403), and the
    metadata documents (RFC 9728)."""

    def __init__(self, auth: AuthConfig) -> None:
        self.auth = auth
        self.metadata_url = metadata_url(auth.resource)
        self._paths = metadata_paths(auth.resource)
        self._document = metadata_document(
            auth.resource,
            auth.authorization_servers,
            [s for s in auth.scopes_supported if s != OFFLINE_ACCESS],
            auth.resource_name,
        )
        self._invalid_log = LogLimiter(interval=10.0)

    def well_known(self, method: str, path: str) -> Reply | None:
        """The answer to a request for the resource's metadata; None for other paths."""
        if path.rstrip("/") not in self._paths or method not in ("GET", "HEAD"):
            return None
        return json_reply(200, self._document)

    def _challenge_scopes(self) -> frozenset[str]:
        """T-AUTH-8: the least a client must ask for: the scopes every request needs, or
        those the server supports when none is required (never ``offline_access``,
        MT-AUTH-1)."""
        scopes = self.auth.required_scopes or frozenset(self.auth.scopes_supported)
        return scopes - {OFFLINE_ACCESS}

    def _granted(self, principal: Principal) -> frozenset[str]:
        """MT-AUTH-2: the principal's scopes with every scope they imply, transitively."""
        implies = self.auth.scope_implies
        granted = set(principal.scopes)
        todo = list(granted)
        while todo:
            for narrower in implies.get(todo.pop(), ()):
                if narrower not in granted:
                    granted.add(narrower)
                    todo.append(narrower)
        return frozenset(granted)

    async def run(self) -> None:
        """Run what the verifier does in the background (a JWTVerifier's key-set fetches,
        TM-AUTH-VERIFY) until cancelled; returns at once for a verifier with nothing to run."""
        verifier = self.auth.verifier
        if isinstance(verifier, JWTVerifier):
            await verifier.run()

    async def authenticate(self, headers: Headers) -> Principal:
        """The principal of a request (T-AUTH-EVERY: every request, sessions or not); its
        scopes are checked by ``check``, once what the request needs is known."""
        token = bearer_token(headers)
        if token is None:
            raise unauthorized(self.metadata_url, self._challenge_scopes())
        try:
            principal = await self.auth.verifier.verify(token)
        except InvalidToken as exc:
            tail = self._invalid_log.tail()
            if tail is not None:
                logger.info("refused an access token: %s%s", exc, tail)
            raise unauthorized(
                self.metadata_url,
                self._challenge_scopes(),
                error="invalid_token",
                description="The access token is invalid, expired or not for this server.",
            ) from None
        return principal

    def check(
        self, principal: Principal, needed: frozenset[str], *, request_id: str | int | None = None
    ) -> None:
        """403 ``insufficient_scope`` unless ``principal`` has ``needed`` and the scopes
        every request needs (T-AUTH-STEPUP); ``offline_access`` is never needed, nor named
        in the challenge (MT-AUTH-1: refresh tokens are no requirement of a resource)."""
        needed = (needed | self.auth.required_scopes) - {OFFLINE_ACCESS}
        if not needed <= self._granted(principal):
            raise forbidden(self.metadata_url, needed, request_id=request_id)
