"""The long-lived streams of both eras are one pool under TM-SEC-FAIR, on both HTTP servers: a
legacy GET stream and a listen take slots of the same `max_streams`; a client holding them all
is refused another, but not a GET that takes its own stream over; another address is served
at once, taking the oldest stream of the first."""

from __future__ import annotations

import pytest
import trio
from support.client import dumps, open_session, open_stream
from support.fixtures import StartServer, wait_until
from support.modern import modern_headers, modern_request

from trio_mcp import ServerConfig
from trio_mcp.runtime._stats import as_dict

pytestmark = pytest.mark.usefixtures("no_server_errors")


@pytest.mark.spec("TM-SEC-FAIR")
async def test_gets_and_listens_share_one_fair_pool(live_server: StartServer) -> None:
    """With max_streams=2: a GET and a listen of one address fill the pool; that address's
    next listen gets 503 naming the pool, its second GET on the same session takes its own
    stream over (never refused); a listen from another address is served, and the first
    address's oldest stream is closed for it."""
    live = await live_server(config=ServerConfig(max_streams=2))
    listen = modern_request("subscriptions/listen", {"notifications": {}})
    with trio.fail_after(30):
        session = await open_session(live.url)
        async with session.open_get() as get, open_stream(
            live.url, "POST", modern_headers(listen), dumps(listen)
        ) as own_listen:
            assert (200, 200) == (get.status, own_listen.status)
            refused = modern_request("subscriptions/listen", {"notifications": {}})
            async with open_stream(live.url, "POST", modern_headers(refused),
                                   dumps(refused)) as third:
                assert 503 == third.status
                assert "retry-after" in dict(third.headers)
                body = await third.read_body()
            async with session.open_get() as again:
                takeover = again.status
                other = modern_request("subscriptions/listen", {"notifications": {}})
                async with open_stream(live.url, "POST", modern_headers(other), dumps(other),
                                       local="127.0.0.2") as theirs:
                    assert 200 == theirs.status
                    assert await theirs.next_event() is not None
                    stats = as_dict(live.app.runtime.statistics())
                    await wait_until(
                        lambda: as_dict(live.app.runtime.statistics())["long_streams_open"] == 2
                    )

    assert b'"pool":"streams"' in body
    assert 200 == takeover
    assert (1, 1) == (stats["streams_refused"], stats["streams_evicted"]), stats
