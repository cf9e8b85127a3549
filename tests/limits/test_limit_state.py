# What a legacy client makes its session keep for its whole life is bounded (issue 20, item 3):
# clientInfo and capabilities, and resource subscriptions, each refused with -32602 past its
# limit, and counted against the session's window. Over real sockets, on the demo server.
from __future__ import annotations

from pathlib import Path

import pytest
import trio
from support.attack import NEIGHBOUR_P99, neighbour_pinging
from support.client import (
    dumps,
    initialize_params,
    open_session,
    post_headers,
    request,
    rpc_messages,
    rpc_request,
)
from support.fixtures import StartServer
from support.served import served

from trio_mcp import ServerConfig

pytestmark = pytest.mark.usefixtures("no_server_errors")


@pytest.mark.spec("TM-SEC-STATE")
async def test_an_initialize_with_oversized_client_info_is_refused_and_keeps_nothing(
    live_server: StartServer,
) -> None:
    """An initialize whose clientInfo holds 200,000 empty objects (a 600 KB body, under the
    body limit) gets -32602 in band and creates no session; a normal one still works."""
    live = await live_server()
    params = initialize_params()
    params["clientInfo"] = {"name": "x", "version": "1", "padding": [{}] * 200_000}
    with trio.fail_after(20):
        response = await request(
            live.url, "POST", post_headers(), dumps(rpc_request("initialize", params))
        )
        assert 200 == response.status
        assert response.header("mcp-session-id") is None
        [answer] = rpc_messages(response)
        assert -32602 == answer["error"]["code"]
        assert "clientInfo and capabilities" in answer["error"]["message"]
        assert 0 == live.stats()["sessions_open"]
        assert 1 == live.stats()["client_state_refused"]
        await open_session(live.url)
    assert 1 == live.stats()["sessions_open"]


@pytest.mark.spec("TM-SEC-STATE")
async def test_subscriptions_are_bounded_in_length_and_number_and_counted_in_the_window(
    live_server: StartServer,
) -> None:
    """A subscription to a URI over max_uri_bytes gets -32602, as does one past
    max_subscriptions; unsubscribing makes room again, and what the subscriptions hold
    comes out of the session's window."""
    live = await live_server(config=ServerConfig(max_subscriptions=3, max_uri_bytes=1024))
    with trio.fail_after(20):
        session = await open_session(live.url)
        state = live.table.sessions[session.id]
        reserved = state.log.reserved
        long_uri = "test://template/" + "a" * 1024 + "/data"
        answer = await session.call("resources/subscribe", {"uri": long_uri})
        assert -32602 == answer["error"]["code"], answer
        for i in range(3):
            await session.result("resources/subscribe", {"uri": f"test://template/{i}/data"})
        assert reserved + 3 * len("test://template/0/data") == state.log.reserved
        answer = await session.call("resources/subscribe", {"uri": "test://template/9/data"})
        assert -32602 == answer["error"]["code"], answer
        assert "unsubscribe" in answer["error"]["message"]
        # Subscribing again to one already held is not a new one.
        await session.result("resources/subscribe", {"uri": "test://template/0/data"})
        await session.result("resources/unsubscribe", {"uri": "test://template/0/data"})
        await session.result("resources/subscribe", {"uri": "test://template/9/data"})
    assert 3 == len(state.subscriptions)
    assert 2 == live.stats()["subscriptions_refused"]
    assert reserved + 3 * len("test://template/0/data") == state.log.reserved


@pytest.mark.slow
@pytest.mark.spec("TM-SEC-STATE", "TM-SEC-MEMORY", "TM-SEC-DECODE")
async def test_oversized_client_state_attack_keeps_nothing_and_leaves_the_neighbour_served(
    http_server: str, tmp_path: Path
) -> None:
    """Ten initializes whose clientInfo holds 1.39 million empty objects (4 MiB bodies, about
    100 MiB decoded), and fifty subscriptions to 4 MiB URIs: the initializes are refused 503
    with -31002 naming the client's memory budget (TM-SEC-MEMORY, before TM-SEC-STATE looks
    at them), the subscriptions with -32602; the server's process (one of its own, so that
    nothing another test did is counted) is less than 32 MiB larger once it has released
    what they freed (TM-SESS-RELEASE; it kept 1.2 GiB before the limits), its log stays a
    few lines, and a neighbour's pings keep a p99 within NEIGHBOUR_P99 (each body takes
    half a second to decode and price: off the event loop, TM-SEC-DECODE)."""
    params = initialize_params()
    params["clientInfo"] = {"name": "x", "version": "1", "padding": [{}] * 1_390_000}
    huge_initialize = dumps(rpc_request("initialize", params))
    assert len(huge_initialize) < 4 * 1024 * 1024
    long_uri = "test://r/" + "a" * (4 * 1024 * 1024 - 100)
    async with served(tmp_path, http_server=http_server, log=True) as srv:
        neighbour_session = await open_session(srv.url)
        attacker = await open_session(srv.url)
        before = srv.rss_kib()
        releases = await srv.releases()
        with trio.fail_after(120):
            async with neighbour_pinging(neighbour_session, server_pid=srv.proc.pid) as neighbour:
                for _ in range(10):
                    answer = await request(srv.url, "POST", post_headers(), huge_initialize)
                    [error] = [m["error"] for m in rpc_messages(answer)]
                    assert (503, -31002) == (answer.status, error["code"]), error
                    assert "request_memory_per_client" == error["data"]["budget"]
                for _ in range(50):
                    refused = await attacker.call("resources/subscribe", {"uri": long_uri})
                    assert -32602 == refused["error"]["code"]
            # Each initialize is decoded (its bytes are within the client's room) before its
            # charge refuses it: the C heap it grew is given back by the next release.
            await srv.released(releases)
            await trio.sleep(0.5)
            grown = srv.rss_kib() - before
            stats = await srv.stats()
        records, chars = srv.log_size()

    print('NEIGH', str(neighbour))
    assert grown < 32 * 1024, grown
    assert 2 == stats["sessions_open"]
    assert [] == neighbour.failures
    assert neighbour.p99() < NEIGHBOUR_P99, str(neighbour)
    assert records < 20 and chars < 20_000, (records, chars)


@pytest.mark.spec("TM-SEC-MEMORY")
async def test_a_body_larger_than_the_clients_room_is_refused_before_it_is_decoded(
    live_server: StartServer,
) -> None:
    """A POST whose bytes alone pass the client's room is refused 503 -31002 naming the
    budget, with no id, before it is decoded: a body that is not JSON gets that answer,
    not -32700, and the server's parse count does not move; a small body is still served."""
    live = await live_server(config=ServerConfig(request_memory_per_client=256 * 1024))
    session = await open_session(live.url)
    not_json = b"x" * (300 * 1024)
    with trio.fail_after(20):
        answer = await request(live.url, "POST", post_headers(session_id=session.id),
                               not_json)
        [error] = rpc_messages(answer)
        assert (503, -31002) == (answer.status, error["error"]["code"]), error
        assert "id" not in error
        assert "request_memory_per_client" == error["error"]["data"]["budget"]
        assert 300 * 1024 == error["error"]["data"]["asked"]
        assert "1" == answer.header("retry-after")
        # Just under the room: decoded, and answered as the parse error it is.
        answer = await request(live.url, "POST", post_headers(session_id=session.id),
                               b"x" * (200 * 1024))
        [error] = rpc_messages(answer)
        assert -32700 == error["error"]["code"], error
        assert "result" in await session.call("ping", {})
    assert 1 == live.stats()["request_memory_per_client_refused"]
