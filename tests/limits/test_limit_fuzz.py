# HTTP-level fuzzing as a standing test (issue 20, item 6): a fixed, seeded budget of broken
# exchanges (mutated request heads, lying lengths, broken chunking, HTTP/2 prefaces and
# frames, raw noise), eight at a time against one server of each kind, while a neighbour
# session pings. tests/e2e/test_e2e_fuzz.py fuzzes well-framed HTTP with Hypothesis; this one
# breaks the framing itself. Nothing may get a 500, log an error, or slow the neighbour.
from __future__ import annotations

import random

import h2.config
import h2.connection
import pytest
import trio
from support.attack import NEIGHBOUR_P99, neighbour_pinging
from support.client import dumps, initialize_params, open_session, rpc_request
from support.fixtures import StartServer

pytestmark = pytest.mark.usefixtures("no_server_errors")

CASES = 300
SEED = 20261202


def _base(port: int, rng: random.Random) -> bytes:
    body = dumps(rpc_request("initialize", initialize_params()))
    method = rng.choice(["POST", "GET", "DELETE", "PUT", "OPTIONS", "HEAD", "PRI", "BREW"])
    head = [
        f"{method} {rng.choice(['/mcp', '/', '/mcp/', '*', '/.well-known/x', '/mcp?x=1'])} "
        f"{rng.choice(['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.2', 'HTTP/9'])}",
        f"host: {rng.choice([f'127.0.0.1:{port}', 'localhost', 'evil.example', ''])}",
        "accept: application/json, text/event-stream",
        "content-type: application/json",
    ]
    lying = rng.random()
    if lying < 0.3:
        head.append(f"content-length: {len(body)}")
    elif lying < 0.5:
        head.append(f"content-length: {rng.choice([0, 1, len(body) + 50, 10**12, -1])}")
    elif lying < 0.7:
        head.append("transfer-encoding: chunked")
        size = rng.choice([f"{len(body):x}", "zz", "ffffffffffff", "-1", ""])
        body = size.encode() + b"\r\n" + body + rng.choice([b"\r\n0\r\n\r\n", b"\r\n", b""])
    for _ in range(rng.randrange(4)):
        name = rng.choice(["mcp-session-id", "mcp-protocol-version", "last-event-id",
                           "expect", "origin", "mcp-method", "x" * rng.randrange(1, 300)])
        value = rng.choice(["", "100-continue", "2025-11-25", "null", "\u00ff" * 3,
                            "a" * rng.randrange(1, 20_000)])
        head.append(f"{name}: {value}")
    raw = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace") + body
    return raw


def _mutate(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randrange(1, 6)):
        at = rng.randrange(len(data) + 1)
        choice = rng.random()
        if choice < 0.4 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif choice < 0.7:
            data[at:at] = rng.choice([b"\r\n", b"\n", b"\x00", b":", b" ", b"\r\n\r\n"])
        else:
            del data[at:at + rng.randrange(1, 20)]
    return bytes(data)


def _h2(rng: random.Random) -> bytes:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/mcp"),
                          (":authority", "127.0.0.1")])
    frames = conn.data_to_send()
    return frames + rng.randbytes(rng.randrange(0, 200))


def cases(port: int) -> list[bytes]:
    rng = random.Random(SEED)
    out = []
    for _ in range(CASES):
        kind = rng.random()
        if kind < 0.55:
            out.append(_mutate(_base(port, rng), rng))
        elif kind < 0.8:
            out.append(_base(port, rng))
        elif kind < 0.9:
            out.append(_h2(rng))
        else:
            out.append(rng.randbytes(rng.randrange(1, 2000)))
    return out


async def exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and read what comes back until the server closes or 2 s pass."""
    got = bytearray()
    sock = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        with trio.move_on_after(2):
            try:
                await sock.send_all(raw)
                while len(got) < 65536:
                    data = await sock.receive_some(65536)
                    if not data:
                        break
                    got += data
            except trio.BrokenResourceError:
                pass
    finally:
        await sock.aclose()
    return bytes(got)


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN", "TM-SEC-H2", "T-POST-5")
async def test_broken_framing_gets_no_500_and_leaves_the_neighbour_served(
    live_server: StartServer,
) -> None:
    """300 seeded broken exchanges, eight at a time: every answer that comes is an HTTP/1.x
    status line below 500, or 501 (a transfer coding it does not know), 503 (too busy) or
    505 (another HTTP version); none logs an error, and a neighbour session's pings keep a
    p99 within 250 ms (NEIGHBOUR_P99) throughout."""
    live = await live_server()
    neighbour_session = await open_session(live.url)
    statuses: list[int] = []
    limiter = trio.CapacityLimiter(8)

    async def one(raw: bytes) -> None:
        async with limiter:
            answer = await exchange(live.port, raw)
        if answer.startswith(b"HTTP/1."):
            statuses.append(int(answer.split(b" ", 2)[1]))

    with trio.fail_after(300):
        async with neighbour_pinging(neighbour_session) as neighbour, trio.open_nursery() as n:
            for raw in cases(live.port):
                n.start_soon(one, raw)

    assert statuses, "no case got an answer"
    assert [s for s in statuses if s >= 500 and s not in (501, 503, 505)] == [], statuses
    assert [] == neighbour.failures
    assert neighbour.p99() < NEIGHBOUR_P99, str(neighbour)


@pytest.mark.spec("TM-SEC-ISOLATE")
async def test_an_http10_request_followed_by_more_bytes_ends_only_its_connection(
    live_server: StartServer,
) -> None:
    """An HTTP/1.0 request with a body it did not declare (bytes after its head, where an
    HTTP/1.0 request has none) makes hypercorn 0.18 fail on that connection; five of them
    in a row leave the server serving, on either HTTP server."""
    live = await live_server()
    body = dumps(rpc_request("initialize", initialize_params()))
    raw = (
        f"POST /mcp HTTP/1.0\r\nhost: 127.0.0.1:{live.port}\r\n"
        "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
        f"origin: {'a' * 7000}\r\n\r\n"
    ).encode() + body
    with trio.fail_after(30):
        for _ in range(5):
            await exchange(live.port, raw)
        session = await open_session(live.url)
        assert {} == await session.result("ping")
