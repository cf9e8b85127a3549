# The handlers running at once are one pool of both eras, shared among clients by max-min
# fairness (TM-SEC-FAIR, `max_handlers`): a client at or below its share is never refused a
# handler, room for it is taken from the client holding the most (its newest handler ends,
# answered -31002 naming the pool), and a client over its share is refused 503. Over real
# sockets, each client at an address of its own on loopback, on both HTTP servers.
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

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
from support.modern import call_tool, messages_of, modern_headers

from trio_mcp import Server, ServerConfig

pytestmark = pytest.mark.usefixtures("no_server_errors")

ATTACKER = "127.0.0.2"
NEIGHBOUR = "127.0.0.3"


def holding_server() -> Server:
    server = Server("handlers-pool")

    @server.tool()
    async def hold(n: int = 0) -> str:
        """Run until cancelled.

        Args:
            n: which call this is, to tell the answers apart.
        """
        await trio.sleep_forever()
        return f"held {n}"

    return server


async def legacy_session(url: str, local: str) -> str:
    """A 2025-11-25 session initialized from the address ``local``: its id."""
    response = await request(
        url, "POST", post_headers(), dumps(rpc_request("initialize", initialize_params())),
        local=local,
    )
    session_id = response.header("mcp-session-id")
    assert session_id is not None, response.body[:300]
    ack = await request(
        url, "POST", post_headers(session_id=session_id),
        dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), local=local,
    )
    assert 202 == ack.status
    return session_id


Call = Callable[[int], Awaitable[Response]]


def legacy_caller(url: str, local: str, session_id: str) -> Call:
    async def call(n: int) -> Response:
        message = rpc_request("tools/call", {"name": "hold", "arguments": {"n": n}}, id=n)
        return await request(url, "POST", post_headers(session_id=session_id), dumps(message),
                             local=local)

    return call


def modern_caller(url: str, local: str) -> Call:
    async def call(n: int) -> Response:
        message = call_tool("hold", {"n": n}, id=n)
        return await request(url, "POST", modern_headers(message), dumps(message), local=local)

    return call


def only_message(response: Response) -> dict[str, Any]:
    if response.content_type == "application/json" or response.status != 200:
        [message] = rpc_messages(response)
    else:
        [message] = messages_of(response)
    return message


class Calls:
    """Calls started in the background: each one's answer once it has come."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.answers: dict[int, Response] = {}

    def start(self, call: Call, n: int) -> None:
        async def run() -> None:
            self.answers[n] = await call(n)

        self._nursery.start_soon(run)


async def running(live: LiveServer, count: int) -> None:
    """Wait until ``count`` handlers run."""
    while live.stats()["handlers_running"] != count:  # noqa: ASYNC110
        await trio.sleep(0.01)


async def answered(calls: Calls, n: int) -> Response:
    while n not in calls.answers:  # noqa: ASYNC110
        await trio.sleep(0.01)
    return calls.answers[n]


def assert_preempted(response: Response) -> None:
    """The answer of a handler the pool ended for another client: -31002 naming it."""
    message = only_message(response)
    assert -31002 == message["error"]["code"], message
    assert {"pool": "handlers"} == message["error"]["data"], message


def assert_refused(response: Response) -> None:
    """A request refused a handler: 503, Retry-After, -31002 naming the pool."""
    assert 503 == response.status, response.body[:300]
    assert "1" == response.header("retry-after")
    message = only_message(response)
    assert -31002 == message["error"]["code"], message
    assert {"pool": "handlers"} == message["error"]["data"], message


async def attack_then_neighbour(
    live: LiveServer, attacker: Call, neighbour: Call
) -> tuple[dict[int, Response], dict[int, Response]]:
    """The attacker fills a pool of 4 handlers; the neighbour then asks for 3. What each
    got, by call number (the ones still running have no answer)."""
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            theirs, ours = Calls(nursery), Calls(nursery)
            # One after the other, so that the pool knows which is newest.
            for n in range(4):
                theirs.start(attacker, n)
                await running(live, n + 1)
            # Over its share of a full pool: refused, and nothing of anyone's ends.
            assert_refused(await attacker(4))
            # The neighbour's first two come at the expense of the attacker's newest.
            ours.start(neighbour, 10)
            assert_preempted(await answered(theirs, 3))
            await running(live, 4)
            ours.start(neighbour, 11)
            assert_preempted(await answered(theirs, 2))
            await running(live, 4)
            # At its share now (2 of 4, as the attacker): refused, as the attacker is.
            assert_refused(await neighbour(12))
            assert_refused(await attacker(5))
            stats = live.stats()
            nursery.cancel_scope.cancel()
    assert (2, 3, 4) == (stats["handlers_evicted"], stats["handlers_refused"],
                         stats["handlers_running"]), stats
    return theirs.answers, ours.answers


@pytest.mark.spec("TM-SEC-FAIR")
async def test_legacy_handlers_are_shared_fairly_and_the_newest_of_the_largest_goes(
    live_server: StartServer,
) -> None:
    """In a pool of 4 handlers filled by one client's 2025-11-25 calls, a neighbour's two
    calls each end the attacker's newest (answered -31002 naming the pool) and run; past
    their shares both are refused 503; the neighbour's calls are never refused or ended
    while it holds no more than its share."""
    live = await live_server(holding_server(), ServerConfig(max_handlers=4))
    attacker = legacy_caller(live.url, ATTACKER, await legacy_session(live.url, ATTACKER))
    neighbour = legacy_caller(live.url, NEIGHBOUR, await legacy_session(live.url, NEIGHBOUR))
    theirs, ours = await attack_then_neighbour(live, attacker, neighbour)
    assert {} == ours
    assert {2, 3} == set(theirs)


@pytest.mark.spec("TM-SEC-FAIR")
async def test_modern_handlers_are_shared_fairly_and_the_newest_of_the_largest_goes(
    live_server: StartServer,
) -> None:
    """The same with 2026-07-28 calls, each on an exchange of its own: the attacker's
    newest calls are answered -31002 naming the pool for the neighbour's, and both are
    refused 503 past their shares."""
    live = await live_server(holding_server(), ServerConfig(max_handlers=4))
    theirs, ours = await attack_then_neighbour(
        live, modern_caller(live.url, ATTACKER), modern_caller(live.url, NEIGHBOUR)
    )
    assert {} == ours
    assert {2, 3} == set(theirs)


@pytest.mark.spec("TM-SEC-FAIR")
async def test_one_pool_of_handlers_serves_both_eras(live_server: StartServer) -> None:
    """The pool is one for both eras: a client filling it with 2025-11-25 calls in a
    session gives way to a neighbour's 2026-07-28 calls."""
    live = await live_server(holding_server(), ServerConfig(max_handlers=4))
    attacker = legacy_caller(live.url, ATTACKER, await legacy_session(live.url, ATTACKER))
    theirs, ours = await attack_then_neighbour(live, attacker, modern_caller(live.url, NEIGHBOUR))
    assert {} == ours
    assert {2, 3} == set(theirs)


@pytest.mark.spec("TM-SEC-FAIR")
async def test_a_handler_that_ends_gives_its_slot_back(live_server: StartServer) -> None:
    """A handler's slot is free again once it has answered: a client can make any number
    of calls one after the other in a pool of one."""
    server = Server("handlers-one")

    @server.tool()
    async def quick() -> str:
        """Answer at once."""
        return "done"

    live = await live_server(server, ServerConfig(max_handlers=1))
    session = await legacy_session(live.url, ATTACKER)
    with trio.fail_after(30):
        for n in range(20):
            legacy = rpc_request("tools/call", {"name": "quick", "arguments": {}}, id=n)
            answer = await request(live.url, "POST", post_headers(session_id=session),
                                   dumps(legacy), local=ATTACKER)
            assert "result" in only_message(answer), answer.body[:300]
            # The answer can arrive a moment before its handler's task has ended.
            await running(live, 0)
            modern = call_tool("quick", {}, id=n)
            answer = await request(live.url, "POST", modern_headers(modern), dumps(modern),
                                   local=NEIGHBOUR)
            assert "result" in only_message(answer), answer.body[:300]
            await running(live, 0)
    stats = live.stats()
    assert (0, 0, 0) == (stats["handlers_running"], stats["handlers_refused"],
                         stats["handlers_evicted"]), stats
