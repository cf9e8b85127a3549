# The session-table lock-out of issue 20 (item 2), over real sockets: a client at one address
# (127.0.0.2) fills the table with sessions that each hold a never-ending call, abandons them
# all, and goes on initializing. It is refused only until its own sessions have been silent for
# evict_abandoned_after (not abandoned_ttl, 30 minutes), and then evicts its own; a client at
# another address gets a session at once, taken from it (TM-SEC-FAIR), and a neighbour keeps
# being served.
from __future__ import annotations

import logging

import pytest
import trio
from support.attack import NEIGHBOUR_P99, neighbour_pinging, server_log_size
from support.client import dumps, initialize_params, open_session, rpc_request
from support.fixtures import StartServer, wait_until
from support.slow import make_server

from trio_mcp import ServerConfig

pytestmark = pytest.mark.usefixtures("no_server_errors")

SESSIONS = 200
ATTACKER = "127.0.0.2"
#: evict_abandoned_after: far longer than the server takes to see 200 connections end.
EVICT_AFTER = 5.0


async def post_from(
    local: str, port: int, body: bytes, session_id: str | None = None
) -> tuple[int, str | None]:
    """POST ``body`` to /mcp from the address ``local``: the status and the session id of
    the answer, read as far as its head; then the connection is dropped."""
    sock = await trio.open_tcp_stream("127.0.0.1", port, local_address=local)
    try:
        return await _post_on(sock, port, body, session_id)
    finally:
        await sock.aclose()


async def _post_on(
    sock: trio.SocketStream, port: int, body: bytes, session_id: str | None
) -> tuple[int, str | None]:
    """Send the POST on ``sock`` and read its answer's head: its status and session id."""
    head = [
        "POST /mcp HTTP/1.1", f"host: 127.0.0.1:{port}", "connection: close",
        "accept: application/json, text/event-stream", "content-type: application/json",
        f"content-length: {len(body)}",
    ]
    if session_id is not None:
        head += [f"mcp-session-id: {session_id}", "mcp-protocol-version: 2025-11-25"]
    await sock.send_all(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    got = bytearray()
    while b"\r\n\r\n" not in got:
        data = await sock.receive_some(65536)
        if not data:
            break
        got += data
    lines = bytes(got).split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(": ")
        headers[name.lower()] = value
    return int(lines[0].split(" ", 2)[1]), headers.get("mcp-session-id")


@pytest.mark.slow
@pytest.mark.spec("TM-SESS-CAP", "TM-SESS-ABANDONED", "TM-SEC-FAIR")
async def test_abandoned_sessions_of_one_address_lock_out_no_one_else(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """An address holding 200 sessions of a full table, each with a call that never ends and
    no connection, gets 503 for a new one while they are fresh; another address gets a
    session at once, taken from the first; after evict_abandoned_after (5 s) the first
    address's next initialize evicts one of its own sessions, cancelling its handler.
    The neighbour's session is never evicted, its pings keep a p99 within 250 ms
    (NEIGHBOUR_P99), and the log stays a few lines."""
    server, record = make_server()
    # The neighbour's session and the attacker's 200 fill it.
    config = ServerConfig(max_sessions=SESSIONS + 1, evict_abandoned_after=EVICT_AFTER)
    live = await live_server(server, config)
    neighbour_session = await open_session(live.url)
    initialize = dumps(rpc_request("initialize", initialize_params()))
    initialized = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    with caplog.at_level(logging.INFO, logger="trio_mcp"), trio.fail_after(120):
        async with neighbour_pinging(neighbour_session) as neighbour:
            # Each call's answer is a stream that never ends: its head is read and its
            # connection held until all 200 are made, so that however long making them takes,
            # every session's silence starts together, when all are dropped at once.
            streams: list[trio.SocketStream] = []
            try:
                for i in range(SESSIONS):
                    status, sid = await post_from(ATTACKER, live.port, initialize)
                    assert 200 == status and sid is not None
                    await post_from(ATTACKER, live.port, initialized, sid)
                    call = rpc_request(
                        "tools/call", {"name": "wait", "arguments": {"tag": f"w{i}"}}
                    )
                    sock = await trio.open_tcp_stream(
                        "127.0.0.1", live.port, local_address=ATTACKER
                    )
                    streams.append(sock)
                    assert 200 == (await _post_on(sock, live.port, dumps(call), sid))[0]
                await wait_until(lambda: len(record.started) == SESSIONS)
            finally:
                for sock in streams:
                    await trio.aclose_forcefully(sock)
            # The silence counts from each connection's end as the server sees it.
            await wait_until(lambda: not any(
                s.views for s in live.table.sessions.values() if s.creator.peer == ATTACKER
            ), poll=0.05)
            refused, _ = await post_from(ATTACKER, live.port, initialize)
            assert [] == list(record.cancelled), "an attacker's session was evicted while fresh"
            other, _ = await post_from("127.0.0.3", live.port, initialize)
            await wait_until(lambda: len(record.cancelled) >= 1)
            await trio.sleep(EVICT_AFTER + 0.5)
            admitted, _ = await post_from(ATTACKER, live.port, initialize)
            assert 200 == admitted, "no session of the attacker was evictable"
            await wait_until(lambda: len(record.cancelled) >= 2)

    assert (503, 200, 200) == (refused, other, admitted)
    assert all(tag.startswith("w") for tag in record.cancelled), record.cancelled
    assert 2 == live.stats()["sessions_evicted"]
    assert 1 == live.stats()["sessions_refused"]
    assert neighbour_session.id in live.table.sessions
    assert [] == neighbour.failures
    assert neighbour.p99() < NEIGHBOUR_P99, str(neighbour)
    logged = server_log_size(caplog)
    assert logged.records < 20 and logged.chars < 20_000, logged
