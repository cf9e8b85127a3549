# HTTP/2 (issue 20, item 3): trio-mcp's own server speaks HTTP/1.1 only, and under hypercorn the
# ASGI app answers every HTTP/2 request 505, so that no stream can make hypercorn buffer what a
# client that grants no flow-control credit will never take. A prior-knowledge HTTP/2 client
# (the h2 library, which hypercorn itself uses) opens 64 streams with a window of 0.
from __future__ import annotations

import logging
import resource

import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest
import trio
from support.attack import NEIGHBOUR_P99, neighbour_pinging, server_log_size
from support.client import dumps, initialize_params, open_session, rpc_request
from support.fixtures import StartServer

pytestmark = pytest.mark.usefixtures("no_server_errors")

STREAMS = 64


@pytest.mark.spec("TM-SEC-H2")
async def test_http2_without_credit_is_refused_and_holds_nothing(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A prior-knowledge HTTP/2 client that opens 64 POST streams with an initial window
    of 0 gets nothing streamed: hypercorn's streams are each answered 505 with a few bytes,
    trio-mcp's own server does not speak HTTP/2 at all (it answers HTTP/1.1 505 and closes),
    and the process does not grow; a neighbour's pings keep a p99 within 250 ms
    (NEIGHBOUR_P99) and the log stays a few lines."""
    live = await live_server()
    neighbour_session = await open_session(live.url)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    body = dumps(rpc_request("initialize", initialize_params()))
    for i in range(STREAMS):
        stream = 1 + 2 * i
        conn.send_headers(
            stream,
            [
                (":method", "POST"), (":scheme", "http"), (":path", "/mcp"),
                (":authority", f"127.0.0.1:{live.port}"),
                ("accept", "application/json, text/event-stream"),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
            ],
        )
        conn.send_data(stream, body, end_stream=True)
    sock = await trio.open_tcp_stream("127.0.0.1", live.port)
    statuses: dict[int, str] = {}
    got = bytearray()
    with caplog.at_level(logging.INFO, logger="trio_mcp"), trio.fail_after(20):
        async with neighbour_pinging(neighbour_session) as neighbour:
            await trio.sleep(0.2)
            await sock.send_all(conn.data_to_send())
            while len(statuses) < STREAMS:
                data = await sock.receive_some(65536)
                if not data:
                    break
                got += data
                if got.startswith(b"HTTP/1.1"):
                    continue  # trio-mcp's own server: read to its close
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived):
                        statuses[event.stream_id] = dict(event.headers)[b":status"].decode()
                await sock.send_all(conn.data_to_send())
            await sock.aclose()
            await trio.sleep(0.2)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before

    if live.http_server == "trio-mcp":
        assert got.startswith(b"HTTP/1.1 505"), bytes(got[:200])
    else:
        assert {"505"} == set(statuses.values()) and len(statuses) == STREAMS, statuses
    assert 1 == live.stats()["sessions_open"]  # the neighbour's
    assert grown_kib < 16 * 1024, grown_kib
    assert [] == neighbour.failures
    assert neighbour.p99() < NEIGHBOUR_P99, str(neighbour)
    logged = server_log_size(caplog)
    assert logged.records < 20 and logged.chars < 20_000, logged
