# The key-set fetch of the JWT verifier (issue 35: "one token with an unknown key id while the
# key-set endpoint takes 3 s: every authenticated request of every client waits for the
# fetch"), over real sockets on both HTTP servers, against the authorization server of
# tests/support/oauth.py, whose key-set endpoint is held open here for as long as a test
# wants: tokens whose key is held are verified meanwhile; a fetch is made once and its result
# shared; a flood of unknown key ids costs one fetch per `min_refresh`.
from __future__ import annotations

from typing import Any

import pytest
import trio
from support.client import (
    dumps,
    initialize_params,
    post_headers,
    request,
    rpc_request,
)
from support.fixtures import StartServer, wait_until
from support.oauth import AuthServer, new_key, start_auth_server, start_protected

from trio_mcp import JWTVerifier
from trio_mcp.protocol._auth import InvalidToken

TIMEOUT = 20


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


async def initialize_status(url: str, token: str) -> int:
    """The status of an initialize made with ``token``."""
    response = await request(
        url, "POST", post_headers(extra=bearer(token)),
        dumps(rpc_request("initialize", initialize_params())),
    )
    return response.status


_ROGUE: list[Any] = []


def rogue_token(issuer: AuthServer, audience: str, kid: str) -> str:
    """A token under a key id the issuer does not publish (signed with a key of its own,
    made once: an RSA key takes a while)."""
    if not _ROGUE:
        _ROGUE.append(new_key())
    return issuer.mint(audience=audience, scope="mcp", key=_ROGUE[0], kid=kid)


async def hold_key_set(issuer: AuthServer) -> trio.Event:
    """Make the key-set endpoint wait, from its next request, until the returned event is
    set (as one that takes seconds would)."""
    gate = trio.Event()
    issuer.jwks_gate = gate
    return gate


@pytest.mark.spec("TM-AUTH-VERIFY")
async def test_known_key_tokens_are_verified_while_an_unknown_key_fetch_hangs(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """The row of issue 35: a token with an unknown key id makes the verifier fetch the key
    set, and the key-set endpoint does not answer; meanwhile every other client's token,
    under a key the verifier holds, is verified and served at once."""
    live, issuer = await start_protected(live_server, nursery)
    with trio.fail_after(TIMEOUT):
        assert 200 == await initialize_status(live.url, issuer.mint(audience=live.url,
                                                                    scope="mcp"))
        assert 1 == issuer.seen.count("GET /jwks")
        gate = await hold_key_set(issuer)
        refused: list[int] = []

        async def unknown() -> None:
            refused.append(await initialize_status(live.url, rogue_token(issuer, live.url, "k9")))

        nursery.start_soon(unknown)
        await wait_until(lambda: issuer.jwks_in_flight == 1)
        statuses: list[int] = []

        async def known(subject: str) -> None:
            token = issuer.mint(audience=live.url, scope="mcp", subject=subject)
            statuses.append(await initialize_status(live.url, token))

        with trio.fail_after(5):
            async with trio.open_nursery() as clients:
                for i in range(16):
                    clients.start_soon(known, f"user-{i}")
        assert [200] * 16 == statuses
        # All of that while the fetch was still waiting for its answer.
        assert 1 == issuer.jwks_in_flight and not refused
        gate.set()
        await wait_until(lambda: bool(refused))
    assert [401] == refused
    assert 2 == issuer.seen.count("GET /jwks")
    assert 1 == issuer.jwks_most_in_flight


@pytest.mark.spec("TM-AUTH-VERIFY")
async def test_a_flood_of_unknown_key_ids_costs_one_fetch_per_min_refresh(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """64 tokens under 64 unknown key ids, sent together while the key-set endpoint is slow,
    cost one fetch, whose result they all share; 64 more within `min_refresh` of its end
    cost none. Tokens under the held key are served throughout."""
    live, issuer = await start_protected(
        live_server, nursery, verifier_options={"min_refresh": 2.0}
    )
    known_token = issuer.mint(audience=live.url, scope="mcp")
    with trio.fail_after(TIMEOUT):
        assert 200 == await initialize_status(live.url, known_token)
        # Within min_refresh of the first fetch, an unknown key id is refused at once.
        assert 401 == await initialize_status(live.url, rogue_token(issuer, live.url, "early"))
        assert 1 == issuer.seen.count("GET /jwks")
        await trio.sleep(2.1)
        gate = await hold_key_set(issuer)
        statuses: list[int] = []

        async def unknown(i: int) -> None:
            statuses.append(
                await initialize_status(live.url, rogue_token(issuer, live.url, f"flood-{i}"))
            )

        async with trio.open_nursery() as flood:
            for i in range(64):
                flood.start_soon(unknown, i)
            await wait_until(lambda: issuer.jwks_in_flight == 1)
            assert 200 == await initialize_status(live.url, known_token)
            await trio.sleep(0.5)  # the rest of the flood arrives, and waits for the fetch
            assert 1 == issuer.jwks_in_flight and not statuses
            gate.set()
        assert [401] * 64 == statuses
        assert 2 == issuer.seen.count("GET /jwks")
        statuses.clear()
        async with trio.open_nursery() as flood:
            for i in range(64, 128):
                flood.start_soon(unknown, i)
        assert [401] * 64 == statuses
        assert 200 == await initialize_status(live.url, known_token)
    assert 2 == issuer.seen.count("GET /jwks")
    assert 1 == issuer.jwks_most_in_flight


@pytest.mark.spec("TM-AUTH-VERIFY")
async def test_a_fetch_is_shared_and_outlives_the_client_that_caused_it(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """After a key rotation, the first token under the new key makes the verifier fetch; that
    client leaves before the answer, and the fetch goes on: the other clients waiting for it
    are served with its result, and no second fetch is made."""
    live, issuer = await start_protected(live_server, nursery)
    with trio.fail_after(TIMEOUT):
        assert 200 == await initialize_status(live.url, issuer.mint(audience=live.url,
                                                                    scope="mcp"))
        issuer.rotate()
        gate = await hold_key_set(issuer)
        rotated = issuer.mint(audience=live.url, scope="mcp")
        leaver = trio.CancelScope()
        nursery.start_soon(_cancellable_initialize, live.url, rotated, leaver)
        await wait_until(lambda: issuer.jwks_in_flight == 1)
        leaver.cancel()  # the client that caused the fetch closes its connection
        statuses: list[int] = []

        async def waiter() -> None:
            statuses.append(await initialize_status(live.url, rotated))

        async with trio.open_nursery() as waiters:
            for _ in range(8):
                waiters.start_soon(waiter)
            await trio.sleep(0.3)
            assert not statuses
            gate.set()
    assert [200] * 8 == statuses
    assert 2 == issuer.seen.count("GET /jwks")


async def _cancellable_initialize(url: str, token: str, scope: trio.CancelScope) -> None:
    with scope:
        await initialize_status(url, token)


@pytest.mark.spec("TM-AUTH-VERIFY")
async def test_an_old_key_set_is_refreshed_without_holding_known_key_tokens(
    live_server: StartServer, nursery: trio.Nursery
) -> None:
    """Once the key set is older than `max_age` it is fetched again in the background: a
    token under a held key is served while that fetch hangs, and a key the refreshed set no
    longer publishes is refused once it has arrived."""
    live, issuer = await start_protected(
        live_server, nursery, verifier_options={"max_age": 0.2}
    )
    old = issuer.mint(audience=live.url, scope="mcp")
    with trio.fail_after(TIMEOUT):
        assert 200 == await initialize_status(live.url, old)
        await trio.sleep(0.3)
        gate = await hold_key_set(issuer)
        issuer.rotate()
        with trio.fail_after(5):
            assert 200 == await initialize_status(live.url, old)
            await wait_until(lambda: issuer.jwks_in_flight == 1)
            assert 200 == await initialize_status(live.url, old)
        gate.set()
        await wait_until(lambda: issuer.jwks_in_flight == 0)
        await trio.sleep(0.05)  # the verifier takes the answer in
        issuer.jwks_gate = None
        assert 401 == await initialize_status(live.url, old)
        assert 200 == await initialize_status(live.url, issuer.mint(audience=live.url,
                                                                    scope="mcp"))


@pytest.mark.spec("TM-AUTH-VERIFY")
async def test_without_its_task_the_verifier_still_fetches_once_for_all_waiting(
    nursery: trio.Nursery,
) -> None:
    """A JWTVerifier used on its own (run() not running): the first token that needs the key
    set fetches it in its own task, and the others wait for that fetch and share it."""
    issuer = await start_auth_server(nursery)
    verifier = JWTVerifier(issuer=issuer.issuer, audience="urn:test",
                           jwks_uri=f"{issuer.issuer}/jwks")
    gate = await hold_key_set(issuer)
    principals: list[Any] = []
    refusals: list[str] = []

    async def verify(token: str) -> None:
        try:
            principals.append(await verifier.verify(token))
        except InvalidToken as exc:
            refusals.append(str(exc))

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as tokens:
            for i in range(8):
                tokens.start_soon(verify, issuer.mint(audience="urn:test", subject=f"u{i}"))
            tokens.start_soon(verify, rogue_token(issuer, "urn:test", "other"))
            await wait_until(lambda: issuer.jwks_in_flight == 1)
            await trio.sleep(0.1)
            gate.set()
    assert 8 == len(principals) and 1 == len(refusals)
    assert 1 == issuer.seen.count("GET /jwks") == verifier.fetches
