# trio-mcp's own HTTP/1.1 server (trio_mcp.edges._http, TM-HTTP-OWN) over real loopback sockets:
# its deadlines (a slowloris head, a stalled body, an idle keep-alive connection), its limits
# (the header block, the body, the open connections), pipelining, `Expect: 100-continue`,
# the framing it writes itself (Connection: close, HTTP/1.0, chunks), TLS, and a shutdown
# with connections open. The clients are raw trio streams that write
# their bytes by hand, and h11 reads what the server answers, so the assertions see exactly
# what went on the wire. The server's deadlines are cut to fractions of a second; the tests
# that measure them are marked slow and bound them with generous slack (a shared machine).
from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import h11
import pytest
import trio
from support.client import Response, dumps
from support.fixtures import LiveServer, start_live
from support.modern import call_tool, messages_of, modern_headers

from trio_mcp import Context, HttpParser, ResponseMode, Server, ServerConfig, serve
from trio_mcp.edges._http import _response_head

HOST = "127.0.0.1"
TIMEOUT = 15

# Every test here fails if the server logged an error while it ran.
pytestmark = pytest.mark.usefixtures("no_server_errors")
#: The deadlines the tests give the server, in seconds (the defaults are 10, 5 and 30).
HEADER_DEADLINE = 0.5
IDLE_DEADLINE = 0.5
BODY_DEADLINE = 0.5
#: What a wall-clock bound allows beyond the deadline it checks.
SLACK = 3.0
#: JSON-RPC error codes of the refusals.
INVALID_REQUEST = -32600
SERVER_BUSY = -31002

HeaderList = Sequence[tuple[str, str]]


# -- the server ------------------------------------------------------------------------------


@attrs.define
class Record:
    """What the test server's ``nap`` tool did."""

    started: trio.Event = attrs.Factory(trio.Event)
    finished: list[float] = attrs.Factory(list)


def make_server() -> tuple[Server, Record]:
    """A server with an ``echo`` tool and a ``nap`` tool that takes a while."""
    server = Server("http-tests")
    record = Record()

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged.

        Args:
            text: what to echo back.
        """
        return text

    @server.tool()
    async def tick(ctx: Context) -> str:
        """Report one step of progress, wait a moment, then return: the wait makes the
        answer a stream (a handler that does not wait is answered whole, TM-MOD-ATONCE)."""
        await ctx.report_progress(1, 1, "halfway")
        await trio.sleep(0.01)
        return "ticked"

    @server.tool()
    async def nap(seconds: float) -> str:
        """Sleep, then say so.

        Args:
            seconds: how long.
        """
        record.started.set()
        await trio.sleep(seconds)
        record.finished.append(trio.current_time())
        return f"napped {seconds}"

    return server, record


def config(**changes: Any) -> ServerConfig:
    """The tests' configuration: JSON responses and short deadlines, with ``changes``."""
    settings: dict[str, Any] = {
        "response_mode": ResponseMode.JSON,
        "http_header_timeout": HEADER_DEADLINE,
        "http_idle_timeout": IDLE_DEADLINE,
        "http_body_timeout": BODY_DEADLINE,
    }
    return ServerConfig(**(settings | changes))


async def start(nursery: trio.Nursery, cfg: ServerConfig) -> tuple[LiveServer, Record]:
    """The test server on trio-mcp's own HTTP server, in ``nursery``."""
    server, record = make_server()
    return await start_live(nursery, server, cfg, http_server="trio-mcp"), record


# -- requests written by hand ----------------------------------------------------------------


def echo_call(text: str, rid: int) -> dict[str, Any]:
    return call_tool("echo", {"text": text}, id=rid)


def nap_call(seconds: float, rid: int) -> dict[str, Any]:
    return call_tool("nap", {"seconds": seconds}, id=rid)


def request_head(
    port: int, headers: HeaderList, *, method: str = "POST", target: str = "/mcp"
) -> bytes:
    """A request line and header block, as bytes."""
    lines = [f"{method} {target} HTTP/1.1", f"host: {HOST}:{port}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def post_head(port: int, message: dict[str, Any], *, extra: HeaderList = ()) -> bytes:
    """The head of a modern POST of ``message`` (its Content-Length unless ``extra`` says
    otherwise)."""
    names = {k.lower() for k, _ in extra}
    headers = list(modern_headers(message))
    if not names & {"content-length", "transfer-encoding"}:
        headers.append(("content-length", str(len(dumps(message)))))
    return request_head(port, [*headers, *extra])


def post_bytes(port: int, message: dict[str, Any]) -> bytes:
    """A whole modern POST of ``message``: head and body."""
    return post_head(port, message) + dumps(message)


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class Wire:
    """A client connection whose requests are written by hand and whose responses h11 reads
    (told of a request it did not write, so that it expects a response)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.parser = h11.Connection(h11.CLIENT)

    async def send(self, data: bytes) -> bool:
        """Write ``data``; False when the server has closed the connection."""
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def _next(self) -> h11.Event:
        parser = self.parser
        if parser.our_state is h11.DONE and parser.their_state is h11.DONE:
            parser.start_next_cycle()
        if parser.our_state is h11.IDLE:
            parser.send(
                h11.Request(
                    method="POST", target="/mcp", headers=[("host", HOST), ("content-length", "0")]
                )
            )
            parser.send(h11.EndOfMessage())
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                raise AssertionError(f"the server broke off its answer: {exc}") from exc
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            try:
                data = bytes(await self.stream.receive_some(65536))
            except trio.BrokenResourceError:
                data = b""
            parser.receive_data(data)

    async def interim(self) -> int:
        """The status of the next informational (1xx) response."""
        event = await self._next()
        assert isinstance(event, h11.InformationalResponse), event
        return event.status_code

    async def response(self) -> Response:
        """The next complete final response."""
        status = 0
        headers: tuple[tuple[str, str], ...] = ()
        body = bytearray()
        while True:
            event = await self._next()
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = tuple(
                    (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in event.headers
                )
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return Response(status=status, headers=headers, body=bytes(body))
            elif not isinstance(event, h11.InformationalResponse):
                raise AssertionError(f"no response, but {event!r}")

    async def rest(self) -> bytes:
        """Everything the server still writes, until it closes the connection."""
        got = bytearray(self.parser.trailing_data[0])
        while True:
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                break  # a reset is an end too
            if not data:
                break
            got += data
        return bytes(got)


@contextlib.asynccontextmanager
async def connect(port: int) -> AsyncIterator[Wire]:
    stream = await trio.open_tcp_stream(HOST, port)
    try:
        yield Wire(stream)
    finally:
        await trio.aclose_forcefully(stream)


async def echo_over(wire: Wire, port: int, text: str, rid: int) -> None:
    """One echo round trip on ``wire``, which must be answered 200 with the text."""
    assert await wire.send(post_bytes(port, echo_call(text, rid)))
    answer = await wire.response()
    assert 200 == answer.status, answer
    assert_result(answer, rid, text)


def assert_result(answer: Response, rid: int, text: str) -> None:
    [message] = messages_of(answer)
    assert rid == message["id"]
    assert [{"type": "text", "text": text}] == message["result"]["content"]


def assert_refused(answer: Response, status: int, code: int = INVALID_REQUEST) -> None:
    """``answer`` refuses the request with ``status`` and a JSON-RPC error body."""
    assert status == answer.status, answer
    assert "application/json" == answer.content_type
    body = answer.json()
    assert "2.0" == body["jsonrpc"]
    assert code == body["error"]["code"]


# -- deadlines -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN")
async def test_slowloris_head_is_cut_at_the_header_deadline(nursery: trio.Nursery) -> None:
    """A head trickled in a byte at a time is cut once the header deadline has passed since
    the connection opened, however steadily the bytes come; others are served meanwhile."""
    live, _ = await start(nursery, config())
    head = post_head(live.port, echo_call("slow", 1))
    trickle = 40  # bytes, one per 0.2 s: 8 s, far past the deadline, and never the whole head
    assert trickle < len(head)
    sent = 0
    closed_after: float | None = None
    got = b""
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as slow, trio.open_nursery() as inner:
            opened = trio.current_time()

            async def drip() -> None:
                nonlocal sent
                for i in range(trickle):
                    if not await slow.send(head[i : i + 1]):
                        return
                    sent += 1
                    await trio.sleep(0.2)

            inner.start_soon(drip)
            await trio.sleep(HEADER_DEADLINE / 2)
            async with connect(live.port) as other:
                await echo_over(other, live.port, "meanwhile", 2)
            got = await slow.rest()
            closed_after = trio.current_time() - opened
            inner.cancel_scope.cancel()

    assert got == b"" or got.startswith(b"HTTP/1.1 408 "), got
    assert HEADER_DEADLINE * 0.9 <= closed_after <= HEADER_DEADLINE + SLACK
    assert 2 <= sent < trickle


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN")
@pytest.mark.parametrize("arrival", ["stops", "trickles"])
async def test_body_that_stops_midway_gets_408_after_the_body_deadline(
    nursery: trio.Nursery, arrival: str
) -> None:
    """A body that stops arriving part of the way, or trickles in a byte at a time, is
    answered 408 with a JSON-RPC error once the body deadline has passed since its head, and
    the connection closes."""
    live, _ = await start(nursery, config(http_header_timeout=5.0))
    message = echo_call("x" * 200, 1)
    body = dumps(message)
    half = len(body) // 2
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire, trio.open_nursery() as inner:
            assert await wire.send(post_head(live.port, message) + body[:half])
            sent = trio.current_time()

            async def drip() -> None:
                for i in range(half, len(body) - 1):  # never the last byte
                    await trio.sleep(0.1)
                    if not await wire.send(body[i : i + 1]):
                        return

            if arrival == "trickles":
                inner.start_soon(drip)
            answer = await wire.response()
            answered_after = trio.current_time() - sent
            rest = await wire.rest()
            inner.cancel_scope.cancel()

    assert_refused(answer, 408)
    assert BODY_DEADLINE * 0.9 <= answered_after <= BODY_DEADLINE + SLACK
    assert b"" == rest


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN")
async def test_idle_keepalive_connection_closes_after_the_idle_deadline(
    nursery: trio.Nursery,
) -> None:
    """A kept-alive connection with no next request is closed once the idle deadline has
    passed; one in use (a long request, then requests at shorter gaps) stays open."""
    idle_deadline = 1.0
    live, _ = await start(nursery, config(http_idle_timeout=idle_deadline))
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as idle:
            await echo_over(idle, live.port, "once", 1)
            answered = trio.current_time()
            rest = await idle.rest()
            idle_for = trio.current_time() - answered
        async with connect(live.port) as busy:
            began = trio.current_time()
            assert await busy.send(post_bytes(live.port, nap_call(2.5 * idle_deadline, 2)))
            napped = await busy.response()
            for rid in range(3, 8):
                await trio.sleep(0.3 * idle_deadline)
                await echo_over(busy, live.port, f"still here {rid}", rid)
            busy_for = trio.current_time() - began

    assert b"" == rest
    assert idle_deadline * 0.9 <= idle_for <= idle_deadline + SLACK
    assert 200 == napped.status
    assert busy_for > 3 * idle_deadline


# -- limits ----------------------------------------------------------------------------------


@pytest.mark.spec("TM-HTTP-OWN")
@pytest.mark.parametrize("sent", ["unfinished", "whole"])
async def test_header_block_over_the_limit_gets_431_and_closes(
    nursery: trio.Nursery, sent: str
) -> None:
    """A header block over http_max_header_bytes is answered 431 with a JSON-RPC error and
    the connection closes: one that never ends, and one sent whole in a single write."""
    limit = 1024
    live, _ = await start(nursery, config(http_max_header_bytes=limit))
    message = echo_call("big head", 1)
    padding = [(f"x-pad-{i}", "p" * 100) for i in range(4 * limit // 100)]
    head = post_head(live.port, message, extra=padding)
    assert len(head) > 4 * limit
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            # Unfinished: the head without its blank line, and nothing more.
            data = head + dumps(message) if sent == "whole" else head[:-2]
            await wire.send(data)
            answer = await wire.response()
            rest = await wire.rest()
        async with connect(live.port) as other:
            await echo_over(other, live.port, "after", 2)

    assert_refused(answer, 431)
    assert b"" == rest


@pytest.mark.spec("TM-HTTP-OWN", "TM-HTTP-SIZE")
async def test_chunked_body_over_the_limit_gets_413_before_it_ends(
    nursery: trio.Nursery,
) -> None:
    """A chunked body sent slowly that grows past max_body_bytes is answered 413 with a
    JSON-RPC error as soon as the limit is passed, while the client is still sending, and
    the connection closes."""
    limit = 1000
    live, _ = await start(nursery, config(max_body_bytes=limit, http_body_timeout=10.0))
    chunks = 30  # of 300 bytes, one per 0.1 s: 9,000 bytes in 3 s
    sent = 0
    sent_when_answered = -1
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire, trio.open_nursery() as inner:
            head = post_head(
                live.port, echo_call("", 1), extra=[("transfer-encoding", "chunked")]
            )
            assert await wire.send(head)

            async def drip() -> None:
                nonlocal sent
                for _ in range(chunks):
                    if not await wire.send(chunk(b" " * 300)):
                        return
                    sent += 1
                    await trio.sleep(0.1)

            inner.start_soon(drip)
            answer = await wire.response()
            sent_when_answered = sent
            rest = await wire.rest()
            inner.cancel_scope.cancel()
        async with connect(live.port) as other:
            await echo_over(other, live.port, "after", 2)

    assert_refused(answer, 413)
    assert limit // 300 < sent_when_answered < chunks
    assert b"" == rest


@pytest.mark.spec("TM-HTTP-OWN", "TM-HTTP-SIZE")
async def test_declared_length_over_the_limit_gets_413_without_the_body(
    nursery: trio.Nursery,
) -> None:
    """A Content-Length over max_body_bytes is answered 413 with a JSON-RPC error on the head
    alone, before any of the body is sent, and the connection closes."""
    limit = 1000
    live, _ = await start(nursery, config(max_body_bytes=limit, http_body_timeout=10.0))
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            extra = [("content-length", str(10 * limit))]
            assert await wire.send(post_head(live.port, echo_call("", 1), extra=extra))
            answer = await wire.response()
            rest = await wire.rest()

    assert_refused(answer, 413)
    assert b"" == rest


@pytest.mark.spec("TM-HTTP-OWN", "TM-HTTP-SIZE")
async def test_expect_continue_over_the_limit_gets_413_and_no_100(
    nursery: trio.Nursery,
) -> None:
    """A request that expects 100-continue with a Content-Length over max_body_bytes gets
    413 at once, never a 100 Continue for a body the server would refuse."""
    limit = 1000
    live, _ = await start(nursery, config(max_body_bytes=limit, http_body_timeout=10.0))
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            extra = [("content-length", str(10 * limit)), ("expect", "100-continue")]
            assert await wire.send(post_head(live.port, echo_call("", 1), extra=extra))
            got = await wire.rest()

    assert got.startswith(b"HTTP/1.1 413 "), got
    assert b"HTTP/1.1 100" not in got


@pytest.mark.spec("TM-HTTP-OWN")
async def test_connection_past_the_cap_gets_503_with_retry_after(nursery: trio.Nursery) -> None:
    """With http_max_connections open, a new connection gets 503 with Retry-After and a
    JSON-RPC error and is closed; once one closes, a new connection is served again."""
    live, _ = await start(
        nursery, config(http_max_connections=2, http_idle_timeout=10.0, http_header_timeout=10.0)
    )
    answer: Response | None = None

    async def served() -> bool:
        nonlocal answer
        async with connect(live.port) as fourth:
            await fourth.send(post_bytes(live.port, echo_call("four", 5)))
            answer = await fourth.response()
        return answer.status == 200

    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as first:
            async with connect(live.port) as second:
                await echo_over(first, live.port, "one", 1)
                await echo_over(second, live.port, "two", 2)
                async with connect(live.port) as third:
                    await third.send(post_bytes(live.port, echo_call("three", 3)))
                    refused = await third.response()
                    rest = await third.rest()
                # The two still work.
                await echo_over(second, live.port, "two again", 4)
            # One closed: once the server notices, a new connection is served again.
            for _ in range(100):
                if await served():
                    break
                await trio.sleep(0.05)
            await echo_over(first, live.port, "one again", 6)

    assert_refused(refused, 503, SERVER_BUSY)
    assert "1" == refused.header("retry-after")
    assert b"" == rest
    assert answer is not None
    assert_result(answer, 5, "four")


# -- the protocol ----------------------------------------------------------------------------


@pytest.mark.spec("TM-HTTP-OWN")
async def test_malformed_request_line_gets_400_and_the_server_serves_on(
    nursery: trio.Nursery,
) -> None:
    """A request line that is not HTTP is answered 400 with a JSON-RPC error, the connection
    closes, and the server goes on serving other connections."""
    live, _ = await start(nursery, config())
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            await wire.send(b"THIS IS NOT HTTP AT ALL\r\nhost: x\r\n\r\n")
            answer = await wire.response()
            rest = await wire.rest()
        async with connect(live.port) as other:
            await echo_over(other, live.port, "after", 1)

    assert_refused(answer, 400)
    assert b"" == rest


# -- framing: what the server writes itself (h11 reads only the client's side) ---------------


async def read_to_end(port: int, data: bytes) -> bytes:
    """Send ``data`` on a new connection and read everything until the server closes it."""
    stream = await trio.open_tcp_stream(HOST, port)
    try:
        await stream.send_all(data)
        got = bytearray()
        while chunk_ := await stream.receive_some(65536):
            got += chunk_
        return bytes(got)
    finally:
        await trio.aclose_forcefully(stream)


def split_answer(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    """A raw HTTP answer: its status line, its headers (names lower-cased), its body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        assert name == name.strip() and name, line
        headers[name.lower()] = value.strip()
    return status, headers, body


@pytest.mark.spec("TM-HTTP-OWN")
async def test_a_request_that_says_close_is_answered_with_close_and_the_connection_ends(
    nursery: trio.Nursery,
) -> None:
    """A request with `Connection: close` gets its answer, framed by its Content-Length, with
    `connection: close` and a `date`, and then the server closes the connection."""
    live, _ = await start(nursery, config())
    message = echo_call("bye", 1)
    with trio.fail_after(TIMEOUT):
        raw = await read_to_end(
            live.port, post_head(live.port, message, extra=[("connection", "close")])
            + dumps(message),
        )
    status, headers, body = split_answer(raw)
    assert status.startswith("HTTP/1.1 200 ")
    assert "close" == headers["connection"]
    assert headers["date"].endswith(" GMT")
    assert str(len(body)) == headers["content-length"]
    assert "transfer-encoding" not in headers
    assert [{"type": "text", "text": "bye"}] == json.loads(body)["result"]["content"]


@pytest.mark.spec("TM-HTTP-OWN")
async def test_an_http10_client_gets_a_stream_unchunked_up_to_the_connections_end(
    nursery: trio.Nursery,
) -> None:
    """An HTTP/1.0 client cannot read chunks: a streamed answer comes to it as the raw
    event stream, with no Content-Length, ending where the server closes the connection."""
    live, _ = await start(nursery, config(response_mode=ResponseMode.SSE))
    message = call_tool("tick", {}, id=1, progress_token="p")
    head = post_head(live.port, message).replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1)
    with trio.fail_after(TIMEOUT):
        raw = await read_to_end(live.port, head + dumps(message))
    status, headers, body = split_answer(raw)
    assert status.startswith("HTTP/1.1 200 ")
    assert "text/event-stream" == headers["content-type"]
    assert "content-length" not in headers and "transfer-encoding" not in headers
    assert "close" == headers["connection"]
    answer = Response(status=200, headers=tuple(headers.items()), body=body)
    [progress, result] = messages_of(answer)
    assert "notifications/progress" == progress["method"]
    assert [{"type": "text", "text": "ticked"}] == result["result"]["content"]


@pytest.mark.spec("TM-HTTP-OWN")
async def test_a_stream_on_a_kept_alive_connection_is_chunked_and_the_next_request_is_served(
    nursery: trio.Nursery,
) -> None:
    """To an HTTP/1.1 client a streamed answer goes in chunks that end it, so the same
    connection then serves the next request."""
    live, _ = await start(nursery, config(response_mode=ResponseMode.SSE))
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            assert await wire.send(post_bytes(live.port, call_tool("tick", {}, id=1,
                                                                   progress_token="p")))
            answer = await wire.response()
            await echo_over(wire, live.port, "again", 2)
    assert "chunked" == dict(answer.headers)["transfer-encoding"]
    assert ["notifications/progress", None] == [m.get("method") for m in messages_of(answer)]


def test_the_server_never_writes_a_header_it_could_not_frame() -> None:
    """A header name that is not an HTTP token, or a value with a line break, is a bug of
    the server's own: refused before anything is written, never sent."""
    assert _response_head(204, [("x-ok", "fine")]).endswith(b"x-ok: fine\r\n\r\n")
    assert b"content-length" not in _response_head(204, [])
    with pytest.raises(ValueError):
        _response_head(200, [("bad name", "v")], length=0)
    with pytest.raises(ValueError):
        _response_head(200, [("x-split", "a\r\nset-cookie: b")], length=0)


@pytest.mark.spec("TM-HTTP-OWN")
@pytest.mark.parametrize("mode", [ResponseMode.JSON, ResponseMode.SSE], ids=["json", "sse"])
async def test_pipelined_requests_are_answered_in_order(
    nursery: trio.Nursery, mode: ResponseMode
) -> None:
    """Requests pipelined in one write are answered one after the other, in the order sent,
    each with its own id, even when the first takes longest; the connection then serves on."""
    live, _ = await start(nursery, config(response_mode=mode))
    texts = {rid: f"echo {rid}" for rid in range(2, 6)}
    burst = post_bytes(live.port, nap_call(0.3, 1)) + b"".join(
        post_bytes(live.port, echo_call(text, rid)) for rid, text in texts.items()
    )
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            assert await wire.send(burst)
            answers = [await wire.response() for _ in range(1 + len(texts))]
            await echo_over(wire, live.port, "afterwards", 6)

    assert [200] * 5 == [a.status for a in answers]
    [first] = messages_of(answers[0])
    assert 1 == first["id"]
    assert [{"type": "text", "text": "napped 0.3"}] == first["result"]["content"]
    for answer, (rid, text) in zip(answers[1:], texts.items(), strict=True):
        assert_result(answer, rid, text)


@pytest.mark.spec("TM-HTTP-OWN")
async def test_expect_continue_gets_100_before_the_body(nursery: trio.Nursery) -> None:
    """A request with `Expect: 100-continue` gets `100 Continue` before it sends its body,
    then the answer to the request."""
    live, _ = await start(nursery, config())
    message = echo_call("after the 100", 1)
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            head = post_head(live.port, message, extra=[("expect", "100-continue")])
            assert await wire.send(head)
            with trio.fail_after(2):
                interim = await wire.interim()
            assert await wire.send(dumps(message))
            answer = await wire.response()

    assert 100 == interim
    assert 200 == answer.status
    assert_result(answer, 1, "after the 100")


# -- TLS and shutdown ------------------------------------------------------------------------


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files in ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trio-mcp tests")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(HOST)), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certfile, keyfile


@attrs.define
class Served:
    """A server run by serve() in a test: its port, its trigger, and whether it returned."""

    port: int
    trigger: trio.Event
    returned: trio.Event


async def run_serve(
    nursery: trio.Nursery,
    server: Server,
    cfg: ServerConfig,
    *,
    certfile: Path | None = None,
    keyfile: Path | None = None,
) -> Served:
    """serve() on trio-mcp's own server in ``nursery`` (over TLS with a certificate), until
    the returned trigger is set."""
    trigger, returned = trio.Event(), trio.Event()

    async def run(task_status: trio.TaskStatus[list[str]]) -> None:
        await serve(
            server, host=HOST, port=0, config=cfg, shutdown_trigger=trigger.wait,
            http_server="trio-mcp", task_status=task_status,
            certfile=None if certfile is None else str(certfile),
            keyfile=None if keyfile is None else str(keyfile),
        )
        returned.set()

    [url] = await nursery.start(run)
    return Served(port=urlsplit(url).port or 0, trigger=trigger, returned=returned)


async def open_tls(port: int, certfile: Path) -> trio.SSLStream[trio.SocketStream]:
    context = ssl.create_default_context(cafile=str(certfile))
    context.set_alpn_protocols(["h2", "http/1.1"])
    stream = trio.SSLStream(
        await trio.open_tcp_stream(HOST, port), context, server_hostname=HOST
    )
    await stream.do_handshake()
    return stream


@pytest.mark.spec("TM-HTTP-OWN")
async def test_tls_serves_http11_with_alpn(nursery: trio.Nursery, tmp_path: Path) -> None:
    """serve() with a certificate speaks TLS: ALPN picks http/1.1 when a client offers h2
    too, and requests are answered over it, two on one kept-alive connection."""
    certfile, keyfile = self_signed(tmp_path)
    server, _ = make_server()
    served = await run_serve(
        nursery, server, config(http_idle_timeout=5.0), certfile=certfile,
        keyfile=keyfile,
    )
    with trio.fail_after(TIMEOUT):
        stream = await open_tls(served.port, certfile)
        try:
            alpn = stream.selected_alpn_protocol()
            wire = Wire(stream)
            await echo_over(wire, served.port, "over tls", 1)
            await echo_over(wire, served.port, "and again", 2)
        finally:
            await trio.aclose_forcefully(stream)
        served.trigger.set()
        await served.returned.wait()

    assert "http/1.1" == alpn


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN")
async def test_tls_handshake_that_never_comes_is_cut_at_the_header_deadline(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A TLS connection whose client never sends its handshake is closed once the header
    deadline has passed, and other clients are served meanwhile."""
    certfile, keyfile = self_signed(tmp_path)
    server, _ = make_server()
    served = await run_serve(
        nursery, server, config(), certfile=certfile, keyfile=keyfile
    )
    with trio.fail_after(TIMEOUT):
        async with connect(served.port) as mute:
            opened = trio.current_time()
            stream = await open_tls(served.port, certfile)
            try:
                await echo_over(Wire(stream), served.port, "meanwhile", 1)
            finally:
                await trio.aclose_forcefully(stream)
            rest = await mute.rest()
            closed_after = trio.current_time() - opened
        served.trigger.set()

    assert b"" == rest
    assert HEADER_DEADLINE * 0.9 <= closed_after <= HEADER_DEADLINE + SLACK


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN")
async def test_shutdown_closes_an_idle_tls_connection_at_once(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Shutdown closes a kept-alive TLS connection between requests at once, like a plain
    one, and serve() returns without waiting for it."""
    certfile, keyfile = self_signed(tmp_path)
    server, _ = make_server()
    cfg = config(http_idle_timeout=30.0, http_header_timeout=30.0, shutdown_grace=2.0)
    served = await run_serve(nursery, server, cfg, certfile=certfile, keyfile=keyfile)
    with trio.fail_after(TIMEOUT):
        stream = await open_tls(served.port, certfile)
        try:
            wire = Wire(stream)
            await echo_over(wire, served.port, "then idle", 1)
            served.trigger.set()
            triggered = trio.current_time()
            await served.returned.wait()
            returned_after = trio.current_time() - triggered
        finally:
            await trio.aclose_forcefully(stream)

    # drain() gives up on open connections after 1 s: an idle one must not need it.
    assert returned_after < 0.9


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN")
async def test_shutdown_closes_idle_connections_and_lets_a_running_request_finish(
    nursery: trio.Nursery,
) -> None:
    """When serve()'s shutdown begins: an idle kept-alive connection is closed at once, a
    request in flight finishes within the grace and gets its answer, its connection then
    closes, and serve() returns within a bound."""
    server, record = make_server()
    grace = 3.0
    nap = 1.0
    cfg = config(http_idle_timeout=30.0, http_header_timeout=30.0, shutdown_grace=grace)
    served = await run_serve(nursery, server, cfg)
    port = served.port
    with trio.fail_after(TIMEOUT):
        async with connect(port) as idle, connect(port) as busy:
            await echo_over(idle, port, "then idle", 1)
            assert await busy.send(post_bytes(port, nap_call(nap, 2)))
            await record.started.wait()
            served.trigger.set()
            triggered = trio.current_time()
            idle_rest = await idle.rest()
            idle_closed_after = trio.current_time() - triggered
            answer = await busy.response()
            answered_after = trio.current_time() - triggered
            busy_rest = await busy.rest()
            busy_closed_after = trio.current_time() - triggered
            await served.returned.wait()
            returned_after = trio.current_time() - triggered

    assert b"" == idle_rest
    assert idle_closed_after <= SLACK
    assert 200 == answer.status
    [message] = messages_of(answer)
    assert [{"type": "text", "text": f"napped {nap}"}] == message["result"]["content"]
    assert answered_after <= grace
    assert b"" == busy_rest
    assert busy_closed_after <= grace + SLACK
    assert returned_after <= grace + SLACK


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-OWN")
async def test_connection_whose_request_finished_during_shutdown_is_closed_after_it(
    nursery: trio.Nursery,
) -> None:
    """A request in flight when shutdown begins gets its answer, and then its connection is
    closed at once, not kept alive for a next request (nor left to drain()'s timeout)."""
    server, record = make_server()
    cfg = config(http_idle_timeout=30.0, http_header_timeout=30.0, shutdown_grace=3.0)
    served = await run_serve(nursery, server, cfg)
    port = served.port
    with trio.fail_after(TIMEOUT):
        async with connect(port) as busy:
            assert await busy.send(post_bytes(port, nap_call(0.3, 1)))
            await record.started.wait()
            served.trigger.set()
            answer = await busy.response()
            answered = trio.current_time()
            rest = await busy.rest()
            closed_after = trio.current_time() - answered

    assert 200 == answer.status
    assert b"" == rest
    # drain() gives up on open connections after 1 s: this one must not need it.
    assert closed_after < 0.9


@pytest.mark.spec("TM-HTTP-OWN", "TM-SESS-SHUTDOWN")
async def test_new_connection_during_shutdown_gets_503_or_is_refused(
    nursery: trio.Nursery,
) -> None:
    """A client that connects while shutdown waits for a running request is either refused
    at connect or gets its request answered 503 with a JSON-RPC error, never a connection
    accepted and then dropped without an answer."""
    server, record = make_server()
    cfg = config(http_idle_timeout=30.0, http_header_timeout=30.0, shutdown_grace=3.0)
    served = await run_serve(nursery, server, cfg)
    port = served.port
    answer: Response | None = None
    with trio.fail_after(TIMEOUT):
        async with connect(port) as busy:
            assert await busy.send(post_bytes(port, nap_call(1.0, 1)))
            await record.started.wait()
            served.trigger.set()
            await trio.sleep(0.1)
            try:
                late_stream = await trio.open_tcp_stream(HOST, port)
            except OSError:
                pass  # refused at connect: a clear answer too
            else:
                late = Wire(late_stream)
                try:
                    await late.send(post_bytes(port, echo_call("late", 2)))
                    answer = await late.response()
                finally:
                    await trio.aclose_forcefully(late_stream)
            napped = await busy.response()

    assert 200 == napped.status
    if answer is not None:
        assert_refused(answer, 503, SERVER_BUSY)


@pytest.mark.spec("TM-HTTP-OWN")
async def test_a_json_answer_ready_at_once_starts_no_reader_task(nursery: trio.Nursery) -> None:
    """In JSON mode, a 2025-11-25 call whose handler answers without waiting is answered
    before anything watches for the client's leaving: its connection gets no reader task.
    A call that waits has one while it waits, so a client that leaves is heard."""
    from support.client import open_session, open_stream, rpc_request
    from support.slow import tasks_named

    live, record = await start(nursery, config())
    session = await open_session(live.url)
    reader = "trio_mcp.edges._http._Connection._read"
    echo = rpc_request("tools/call", {"name": "echo", "arguments": {"text": "now"}})
    nap = rpc_request("tools/call", {"name": "nap", "arguments": {"seconds": 0.5}})
    with trio.fail_after(TIMEOUT):
        async with open_stream(live.url, "POST", session.headers(), dumps(echo)) as answer:
            body = await answer.read_body()
            assert [] == tasks_named(reader)
        assert "now" in body.decode()
        async with open_stream(live.url, "POST", session.headers(), dumps(nap)) as answer:
            assert len(tasks_named(reader)) == 1  # the head came only once the nap ended
            body = await answer.read_body()
        assert record.finished and "napped" in body.decode()


@pytest.mark.spec("TM-POST-ATONCE", "TM-HTTP-OWN")
async def test_an_initialize_answered_as_a_stream_is_sent_whole_and_starts_no_reader_task(
    nursery: trio.Nursery,
) -> None:
    """In SSE mode an initialize's stream is complete before its first byte goes out: it is
    sent whole, the session id in its head, the priming event then the result, and its
    connection (kept alive for the requests that follow) gets no reader task."""
    from support.client import initialize_params, open_stream, post_headers, rpc_request
    from support.slow import tasks_named

    live, _ = await start(nursery, config(response_mode=ResponseMode.SSE))
    message = rpc_request("initialize", initialize_params())
    with trio.fail_after(TIMEOUT):
        async with open_stream(live.url, "POST", post_headers(), dumps(message)) as answer:
            body = await answer.read_body()
            assert [] == tasks_named("trio_mcp.edges._http._Connection._read")
            headers = dict(answer.headers)
            assert headers["mcp-session-id"]
            assert str(len(body)) == headers["content-length"]
    events = [e for e in body.decode().split("\n\n") if e]
    assert 2 == len(events)
    priming = events[0].split("\n")
    assert priming[0].startswith("id: ") and ["data:"] == [p.rstrip() for p in priming[1:]]
    result = json.loads(events[1].split("data: ", 1)[1])
    assert message["id"] == result["id"] and "capabilities" in result["result"]


@pytest.mark.spec("TM-HTTP-PARSER", "TM-HTTP-OWN")
@pytest.mark.parametrize("parser", [HttpParser.HTTPTOOLS, HttpParser.H11])
async def test_requests_of_every_framing_mixed_in_one_burst_are_answered_in_order(
    nursery: trio.Nursery, parser: HttpParser
) -> None:
    """A burst that mixes plain requests with a chunked body, a header value with
    obs-text and a body that arrives after its head is answered in order, each request
    whole, and the connection serves on, whichever parser reads it."""
    live, _ = await start(nursery, config(http_parser=parser))
    chunked = echo_call("chunked", 2)
    odd = echo_call("odd header", 3)
    late = echo_call("late body", 5)
    burst = (
        post_bytes(live.port, echo_call("plain first", 1))
        + post_head(live.port, chunked, extra=[("transfer-encoding", "chunked")])
        + chunk(dumps(chunked))
        + chunk(b"")
        + post_head(live.port, odd, extra=[("x-note", "caf\xe9")])
        + dumps(odd)
        + post_bytes(live.port, echo_call("plain again", 4))
        + post_head(live.port, late)
    )
    with trio.fail_after(TIMEOUT):
        async with connect(live.port) as wire:
            assert await wire.send(burst)
            answers = [await wire.response() for _ in range(4)]
            await trio.sleep(0.2)
            assert await wire.send(dumps(late))
            answers.append(await wire.response())
            await echo_over(wire, live.port, "afterwards", 6)

    texts = ["plain first", "chunked", "odd header", "plain again", "late body"]
    for rid, (answer, text) in enumerate(zip(answers, texts, strict=True), start=1):
        assert_result(answer, rid, text)
