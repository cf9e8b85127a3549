# trio-mcp as an OAuth 2.1 resource server (issue 20, item 5), over real sockets on both HTTP
# servers, against the authorization server of tests/support/oauth.py (PyJWT-signed tokens,
# its key set served on loopback): metadata, challenges, token validation, scopes, and
# sessions, cursors and requestState bound to the principal that made them.
from __future__ import annotations

import json
import re
from typing import Any, Literal

import pytest
import trio
from support.client import (
    Response,
    dumps,
    initialize_params,
    post_headers,
    request,
    rpc_messages,
    rpc_request,
)
from support.fixtures import LiveServer, StartServer
from support.modern import call_tool, messages_of, modern_headers, modern_request
from support.oauth import AuthServer, new_key, start_protected

from trio_mcp import Server

pytestmark = pytest.mark.usefixtures("no_server_errors")

TIMEOUT = 20


async def start(
    live_server: StartServer, nursery: trio.Nursery, *, introspect: bool = False
) -> tuple[LiveServer, AuthServer]:
    live, issuer = await start_protected(live_server, nursery, introspect=introspect)
    return live, issuer


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def challenge(response: Response) -> dict[str, str]:
    """The parameters of a WWW-Authenticate: Bearer challenge."""
    value = response.header("www-authenticate")
    assert value is not None and value.startswith("Bearer "), response.headers
    return {
        name: re.sub(r"\\(.)", r"\1", quoted)
        for name, quoted in re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', value)
    }


async def initialize(live: LiveServer, token: str) -> str:
    response = await request(
        live.url, "POST", post_headers(extra=bearer(token)),
        dumps(rpc_request("initialize", initialize_params())),
    )
    assert 200 == response.status, (response.status, response.body)
    session_id = response.header("mcp-session-id")
    assert session_id
    ack = await request(
        live.url, "POST", post_headers(session_id=session_id, extra=bearer(token)),
        dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    assert 202 == ack.status
    return session_id


@pytest.mark.spec("T-AUTH-1", "T-AUTH-3", "T-AUTH-4", "T-AUTH-5", "T-AUTH-7")
async def test_protected_resource_metadata_names_the_authorization_server(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """The server's metadata is at the well-known path built from its endpoint's path, and
    at the bare well-known path, without a token: it names the resource, its
    authorization server, its scopes and the header as the one way to send a token."""
    live, issuer = await start(live_server, nursery)
    base = live.base_url
    with trio.fail_after(TIMEOUT):
        for path in ("/.well-known/oauth-protected-resource/mcp",
                     "/.well-known/oauth-protected-resource"):
            response = await request(base + path, "GET", [("accept", "application/json")])
            assert 200 == response.status, (path, response.status)
            assert {
                "resource": live.url,
                "authorization_servers": [issuer.issuer],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["mcp", "mcp:admin"],
            } == response.json()


@pytest.mark.spec(
    "T-AUTH-6", "T-AUTH-8", "T-AUTH-9", "T-AUTH-10", "T-AUTH-11", "T-AUTH-18", "T-SEC-5", "T-SEC-6",
    "MT-SEC-5", "T-SEC-13",
)
async def test_a_request_without_a_token_gets_401_naming_the_metadata(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """Every request to the endpoint without a bearer token, initialize or not, GET,
    DELETE or POST, gets 401 with a Bearer challenge naming the metadata URL and the scope
    to ask for, and a JSON-RPC error body; a token in the query string does not count."""
    live, issuer = await start(live_server, nursery)
    token = issuer.mint(audience=live.url, scope="mcp")
    with trio.fail_after(TIMEOUT):
        answers = [
            await request(live.url, "POST", post_headers(),
                          dumps(rpc_request("initialize", initialize_params()))),
            await request(live.url, "GET", [("accept", "text/event-stream")]),
            await request(live.url, "DELETE", [("mcp-session-id", "x")]),
            await request(f"{live.url}?access_token={token}", "POST", post_headers(),
                          dumps(rpc_request("initialize", initialize_params()))),
        ]
    for response in answers:
        assert 401 == response.status, (response.status, response.body)
        assert {
            "resource_metadata": f"{live.base_url}/.well-known/oauth-protected-resource/mcp",
            "scope": "mcp",
        } == challenge(response)
        assert "error" in response.json()


@pytest.mark.spec(
    "T-AUTH-12", "T-AUTH-13", "T-AUTH-14", "T-AUTH-15", "T-AUTH-16", "T-AUTH-21", "T-AUTH-25",
    "T-AUTH-26", "T-SEC-12",
)
@pytest.mark.parametrize(
    "kind", ["garbage", "other-audience", "expired", "other-issuer", "unknown-key", "hs256"]
)
async def test_a_token_that_does_not_verify_gets_401_invalid_token(
    live_server: StartServer, nursery: trio.Nursery, kind: str
) -> None:
    """A token that is not a JWT, names another audience (a token for another server),
    has expired, comes from another issuer, is signed by a key the issuer does not
    publish, or is signed with a shared secret (the public key as an HMAC key) gets 401
    with error="invalid_token"; none of them reaches a handler."""
    live, issuer = await start(live_server, nursery)
    tokens = {
        "garbage": "not-a-jwt",
        "other-audience": issuer.mint(audience="http://127.0.0.1:1/mcp", scope="mcp"),
        "expired": issuer.mint(audience=live.url, scope="mcp", expires_in=-120),
        "other-issuer": issuer.mint(audience=live.url, scope="mcp", issuer="http://evil"),
        "unknown-key": issuer.mint(audience=live.url, scope="mcp", key=new_key(), kid="rogue"),
        "hs256": _hmac_token(
            {"iss": issuer.issuer, "aud": live.url, "sub": "x", "exp": 2**40, "scope": "mcp"},
            issuer.public_pem(),
            issuer.kid,
        ),
    }
    with trio.fail_after(TIMEOUT):
        response = await request(
            live.url, "POST", post_headers(extra=bearer(tokens[kind])),
            dumps(rpc_request("initialize", initialize_params())),
        )
    assert 401 == response.status, (response.status, response.body)
    assert "invalid_token" == challenge(response)["error"]
    assert 0 == live.stats()["sessions_created"]


@pytest.mark.spec("T-AUTH-18", "T-AUTH-19", "T-AUTH-20", "T-AUTH-9")
async def test_a_token_without_the_scope_a_tool_needs_gets_403_insufficient_scope(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """A call of a tool registered with scopes=["mcp:admin"] under a token without that
    scope gets 403 with error="insufficient_scope" and the scopes it needs; a token with
    it may call it. A token without the scope every request needs ("mcp") gets 403 at
    once."""
    live, issuer = await start(live_server, nursery)
    plain = issuer.mint(audience=live.url, scope="mcp")
    admin = issuer.mint(audience=live.url, scope="mcp mcp:admin")
    none = issuer.mint(audience=live.url, scope="")
    with trio.fail_after(TIMEOUT):
        sid = await initialize(live, plain)
        call = dumps(rpc_request("tools/call", {"name": "reset", "arguments": {}}))
        refused = await request(
            live.url, "POST", post_headers(session_id=sid, extra=bearer(plain)), call
        )
        echoed = await request(
            live.url, "POST", post_headers(session_id=sid, extra=bearer(plain)),
            dumps(rpc_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})),
        )
        allowed_sid = await initialize(live, admin)
        allowed = await request(
            live.url, "POST", post_headers(session_id=allowed_sid, extra=bearer(admin)), call
        )
        bare = await request(
            live.url, "POST", post_headers(extra=bearer(none)),
            dumps(rpc_request("initialize", initialize_params())),
        )
    assert 403 == refused.status
    assert {"error": "insufficient_scope", "scope": "mcp mcp:admin"} == {
        k: v for k, v in challenge(refused).items() if k in ("error", "scope")
    }
    assert 200 == echoed.status and "hi" in echoed.body.decode()
    assert 200 == allowed.status
    [answer] = [m for m in rpc_messages(allowed) if "id" in m]
    assert "reset" == answer["result"]["content"][0]["text"]
    assert 403 == bare.status and "insufficient_scope" == challenge(bare)["error"]


@pytest.mark.spec("T-SEC-11", "T-SEC-7", "TM-AUTH-BIND", "T-AUTH-22")
async def test_another_principal_gets_404_for_a_session_and_its_cursors(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """A session made under Alice's token answers 404 to Bob, with a valid token of his
    own, on POST, GET (a resume with one of the session's cursors too) and DELETE, as if
    it did not exist; Alice goes on using it. The session keeps her principal, not her
    token."""
    live, issuer = await start(live_server, nursery)
    alice = issuer.mint(audience=live.url, scope="mcp", subject="alice")
    bob = issuer.mint(audience=live.url, scope="mcp", subject="bob")
    with trio.fail_after(TIMEOUT):
        sid = await initialize(live, alice)
        first = await request(
            live.url, "POST", post_headers(session_id=sid, extra=bearer(alice)),
            dumps(rpc_request("tools/call", {"name": "echo", "arguments": {"text": "a"}})),
        )
        [event] = [e for e in first.events() if e.data and e.id]
        get_headers = [("accept", "text/event-stream"), ("mcp-session-id", sid),
                       ("mcp-protocol-version", "2025-11-25")]
        answers = [
            await request(live.url, "POST", post_headers(session_id=sid, extra=bearer(bob)),
                          dumps(rpc_request("ping"))),
            await request(live.url, "GET", [*get_headers, *bearer(bob)]),
            await request(live.url, "GET", [*get_headers, ("last-event-id", event.id),
                                            *bearer(bob)]),
            await request(live.url, "DELETE", [("mcp-session-id", sid), *bearer(bob)]),
        ]
        still = await request(live.url, "POST", post_headers(session_id=sid, extra=bearer(alice)),
                              dumps(rpc_request("ping")))
    assert [404, 404, 404, 404] == [r.status for r in answers]
    assert 200 == still.status
    session = live.table.sessions[sid]
    assert f"{issuer.issuer}#alice" == session.creator.principal
    assert alice not in repr(vars(session))


@pytest.mark.spec("TM-AUTH-BIND", "TM-AUTH-ERA", "MT-SEC-6", "MT-SEC-7", "MU-MRTR-7")
async def test_another_principal_cannot_use_a_request_state(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """A 2026-07-28 requestState sealed for Alice is refused for Bob exactly as a forged
    one is (-32602, reason invalid_request_state), and accepted for Alice."""
    live, issuer = await start(live_server, nursery)
    alice = issuer.mint(audience=live.url, scope="mcp", subject="alice")
    bob = issuer.mint(audience=live.url, scope="mcp", subject="bob")
    caps = {"elicitation": {}}
    with trio.fail_after(TIMEOUT):
        first_call = call_tool("confirm", {}, capabilities=caps)
        first = await request(live.url, "POST", modern_headers(first_call, extra=bearer(alice)),
                              dumps(first_call))
        [answer] = messages_of(first)
        state = answer["result"]["requestState"]
        [key] = answer["result"]["inputRequests"]
        responses = {key: {"action": "accept", "content": {"ok": True}}}
        results = []
        for token in (bob, alice):
            retry = call_tool("confirm", {}, capabilities=caps, requestState=state,
                              inputResponses=responses)
            got = await request(live.url, "POST", modern_headers(retry, extra=bearer(token)),
                                dumps(retry))
            [message] = messages_of(got)
            results.append(message)
    assert -32602 == results[0]["error"]["code"]
    assert {"reason": "invalid_request_state"} == results[0]["error"]["data"]
    assert "answered accept" == results[1]["result"]["content"][0]["text"]


@pytest.mark.spec("T-AUTH-12", "T-AUTH-15", "TM-AUTH-VERIFY", "MT-AUTH-6")
async def test_introspection_accepts_an_active_token_and_refuses_a_revoked_one(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """With the introspection verifier (RFC 7662), a token the authorization server says
    is active and for this server is served; once revoked, it gets 401 invalid_token."""
    live, issuer = await start(live_server, nursery, introspect=True)
    token = issuer.mint(audience=live.url, scope="mcp")
    with trio.fail_after(TIMEOUT):
        await initialize(live, token)
        issuer.revoked.add(_jti(token))
        refused = await request(live.url, "POST", post_headers(extra=bearer(token)),
                                dumps(rpc_request("initialize", initialize_params())))
    assert 401 == refused.status
    assert "invalid_token" == challenge(refused)["error"]


@pytest.mark.spec("T-AUTH-12", "TM-AUTH-VERIFY", "T-AUTH-17", "T-AUTH-27")
async def test_a_rotated_signing_key_is_fetched_when_a_token_names_it(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """After the authorization server rotates its key, a token signed with the new key
    verifies: its unknown key id makes the server fetch the key set again. Nothing the
    server asks of the authorization server carries the client's token."""
    live, issuer = await start(live_server, nursery)
    with trio.fail_after(TIMEOUT):
        await initialize(live, issuer.mint(audience=live.url, scope="mcp"))
        issuer.rotate()
        await initialize(live, issuer.mint(audience=live.url, scope="mcp"))
    assert issuer.seen.count("GET /jwks") == 2
    assert all("authorization" not in headers for headers in issuer.seen_headers)


def _jti(token: str) -> str:
    import jwt

    jti: str = jwt.decode(token, options={"verify_signature": False})["jti"]
    return jti


def _hmac_token(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """A token "signed" with HS256 under the issuer's public key as the shared secret: the
    algorithm-confusion forgery a verifier that trusts the token's alg would accept."""
    import base64
    import hashlib
    import hmac

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    body = b64(json.dumps(claims).encode())
    tag = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(tag)}"


@pytest.mark.spec("MT-AUTH-1", "MT-AUTH-2")
async def test_broader_scopes_imply_narrower_ones_and_offline_access_is_never_asked_for(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """With scope_implies {"mcp:all": {"mcp:admin"}, "mcp:admin": {"mcp"}}, a token holding
    only "mcp:all" may call the tool that needs "mcp:admin" (and pass the "mcp" every
    request needs); offline_access, though configured, is named neither in the metadata nor
    in a challenge."""
    live, issuer = await start_protected(
        live_server, nursery,
        scopes_supported=["mcp", "mcp:admin", "mcp:all", "offline_access"],
        required_scopes=(),
        scope_implies={"mcp:all": {"mcp:admin"}, "mcp:admin": {"mcp"}},
    )
    resource = live.url
    broad = issuer.mint(audience=resource, scope="mcp:all")
    with trio.fail_after(TIMEOUT):
        sid = await initialize(live, broad)
        called = await request(
            live.url, "POST", post_headers(session_id=sid, extra=bearer(broad)),
            dumps(rpc_request("tools/call", {"name": "reset", "arguments": {}})),
        )
        metadata = await request(
            f"{live.base_url}/.well-known/oauth-protected-resource/mcp", "GET", []
        )
        refused = await request(live.url, "GET", [("accept", "text/event-stream")])
    assert 200 == called.status
    assert ["mcp", "mcp:admin", "mcp:all"] == metadata.json()["scopes_supported"]
    assert "offline_access" not in challenge(refused)["scope"]


@pytest.mark.spec("MT-AUTH-1")
async def test_offline_access_is_neither_required_nor_named_in_a_403(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """offline_access among the scopes every request needs (as --auth-scope may put it) is
    no requirement of the resource: a token without it is served, and a 403 for a tool's
    scope names the scopes the call needs, never offline_access."""
    live, issuer = await start_protected(
        live_server, nursery,
        scopes_supported=["mcp", "mcp:admin", "offline_access"],
        required_scopes={"mcp", "offline_access"},
    )
    plain = issuer.mint(audience=live.url, scope="mcp")
    with trio.fail_after(TIMEOUT):
        sid = await initialize(live, plain)
        refused = await request(
            live.url, "POST", post_headers(session_id=sid, extra=bearer(plain)),
            dumps(rpc_request("tools/call", {"name": "reset", "arguments": {}})),
        )
    assert 403 == refused.status
    assert "mcp mcp:admin" == challenge(refused)["scope"]


def _guarded_server() -> Server:
    """A resource, a resource template and a prompt that need the admin scope."""
    server = Server("guarded")

    @server.resource("secret://plans", mime_type="text/plain", scopes=["mcp:admin"])
    async def plans() -> str:
        return "the plans"

    @server.resource("secret://vault/{room}", mime_type="text/plain", scopes=["mcp:admin"])
    async def vault(room: str) -> str:
        return f"the vault of {room}"

    @server.prompt(scopes=["mcp:admin"])
    async def launch(code: Literal["alpha-7", "alpha-9", "beta-1"]) -> str:
        """Launch with a code."""
        return f"launch {code}"

    return server


@pytest.mark.spec("U-RES-7", "U-RES-8", "U-COMP-5", "MU-CACHE-5")
async def test_scoped_resources_prompts_and_their_completions_need_their_scopes(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """A resource, a resource template and a prompt that need mcp:admin are refused 403 to
    a token without it, before their function runs, and so are completions of the prompt's
    and the template's arguments (a suggestion may give away what they hold); with the
    scope all are served."""
    live, issuer = await start_protected(live_server, nursery, server=_guarded_server())
    plain = issuer.mint(audience=live.url, scope="mcp")
    admin = issuer.mint(audience=live.url, scope="mcp mcp:admin")
    asks = [
        modern_request("resources/read", {"uri": "secret://plans"}),
        modern_request("resources/read", {"uri": "secret://vault/east"}),
        modern_request("prompts/get", {"name": "launch", "arguments": {"code": "alpha-7"}}),
        modern_request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "launch"},
            "argument": {"name": "code", "value": "alpha"}}),
        modern_request("completion/complete", {
            "ref": {"type": "ref/resource", "uri": "secret://vault/{room}"},
            "argument": {"name": "room", "value": "e"}}),
    ]
    with trio.fail_after(TIMEOUT):
        answers = {}
        for who, token in (("plain", plain), ("admin", admin)):
            answers[who] = [
                await request(live.url, "POST", modern_headers(m, extra=bearer(token)), dumps(m))
                for m in asks
            ]
    assert [403] * len(asks) == [r.status for r in answers["plain"]]
    assert all("mcp:admin" in challenge(r)["scope"] for r in answers["plain"])
    assert [200] * len(asks) == [r.status for r in answers["admin"]], [
        r.body for r in answers["admin"]]
    completed = messages_of(answers["admin"][3])[0]["result"]["completion"]["values"]
    assert ["alpha-7", "alpha-9"] == completed


@pytest.mark.spec("MT-AUTH-3", "MT-AUTH-4", "MT-AUTH-5", "T-AUTH-20", "T-AUTH-9")
async def test_every_scope_an_operation_needs_is_named_in_one_challenge(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """A call of the admin tool under a token with no scope, with only the scope every
    request needs, or with only the admin one, gets the same 403 each time, naming both
    scopes at once: never one scope now and the other on the retry."""
    live, issuer = await start(live_server, nursery)
    with trio.fail_after(TIMEOUT):
        scopes = []
        for held in ("", "mcp", "mcp:admin"):
            token = issuer.mint(audience=live.url, scope=held)
            message = call_tool("reset", {}, id=f"reset-{held or 'none'}")
            refused = await request(
                live.url, "POST", modern_headers(message, extra=bearer(token)), dumps(message)
            )
            assert 403 == refused.status, (held, refused.body)
            scopes.append(challenge(refused)["scope"])
    assert ["mcp mcp:admin"] * 3 == scopes


@pytest.mark.spec("MU-CACHE-5", "MU-CACHE-7", "MU-TOOL-7", "U-TOOL-8", "MU-TOOL-6", "MJ-ERR-1")
async def test_a_primitive_is_refused_by_its_scopes_never_by_its_cache_scope(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """In the 2026-07-28 era, with authorization and no caching settings: tools/list is the
    same for every token (the admin tool is listed to a token without its scope) and, like
    server/discover, private and fresh for no time; the admin tool's call under that token
    is refused 403 insufficient_scope before it runs, and runs under a token with it."""
    live, issuer = await start(live_server, nursery)
    plain = issuer.mint(audience=live.url, scope="mcp")
    admin = issuer.mint(audience=live.url, scope="mcp mcp:admin")
    with trio.fail_after(TIMEOUT):
        listed = {}
        for who, token in (("plain", plain), ("admin", admin)):
            message = modern_request("tools/list")
            answer = await request(live.url, "POST", modern_headers(message, extra=bearer(token)),
                                   dumps(message))
            listed[who] = messages_of(answer)[0]["result"]
        message = modern_request("server/discover")
        discover = messages_of(await request(
            live.url, "POST", modern_headers(message, extra=bearer(plain)), dumps(message)
        ))[0]["result"]
        calls = {}
        for who, token in (("plain", plain), ("admin", admin)):
            message = call_tool("reset", {}, id=f"reset-{who}")
            calls[who] = await request(
                live.url, "POST", modern_headers(message, extra=bearer(token)), dumps(message)
            )
    assert listed["plain"]["tools"] == listed["admin"]["tools"]
    assert "reset" in [tool["name"] for tool in listed["plain"]["tools"]]
    for result in (listed["plain"], listed["admin"], discover):
        assert (0, "private") == (result["ttlMs"], result["cacheScope"])
    assert 403 == calls["plain"].status
    assert "insufficient_scope" == challenge(calls["plain"])["error"]
    # MJ-ERR-1: decided after the body was read, the refusal carries the request's id.
    assert "reset-plain" == calls["plain"].json()["id"]
    assert 200 == calls["admin"].status
    assert "reset" == messages_of(calls["admin"])[0]["result"]["content"][0]["text"]


@pytest.mark.spec("T-AUTH-27", "TM-AUTH-ERA")
async def test_a_handler_sees_the_principal_but_not_the_token(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """ctx.principal gives a tool the subject, scopes and client of the request's token, in
    a legacy session and in a 2026-07-28 request alike; the token itself is not there."""
    live, issuer = await start(live_server, nursery)
    token = issuer.mint(audience=live.url, scope="mcp", subject="carol", client_id="app-1")
    expected = {"subject": "carol", "scopes": ["mcp"], "client_id": "app-1"}
    with trio.fail_after(TIMEOUT):
        sid = await initialize(live, token)
        legacy = await request(
            live.url, "POST", post_headers(session_id=sid, extra=bearer(token)),
            dumps(rpc_request("tools/call", {"name": "whoami", "arguments": {}})),
        )
        call = call_tool("whoami", {})
        modern = await request(live.url, "POST", modern_headers(call, extra=bearer(token)),
                               dumps(call))
    for response in (legacy, modern):
        [answer] = [m for m in messages_of(response) if "id" in m]
        assert expected == answer["result"]["structuredContent"]
        assert token not in response.body.decode()
