# `_h1.read_plain` (TM-HTTP-PLAIN) against h11 itself: on generated requests, valid and not,
# whole, pipelined and cut short, what read_plain takes h11 takes too, with the same head,
# body and remainder; where it waits for more, h11 has no request yet. No sockets: the
# server's use of it is tested over real ones in test_http_server.py.
from __future__ import annotations

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.examples import examples

from trio_mcp._h1 import INCOMPLETE, PlainRequest, read_plain

MAX_HEAD = 2048
MAX_BODY = 4096

_TOKEN = st.text(
    alphabet="!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    min_size=1,
    max_size=12,
).map(str.encode)
#: Bytes that make a line unusual: control bytes, obs-text, bare line ends, spaces.
_ODD = st.sampled_from([b" ", b"\t", b"\x00", b"\x01", b"\x7f", b"\x80", b"\xe9", b"\r", b"\n"])
_VISIBLE = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=0, max_size=16
).map(str.encode)


@st.composite
def _value(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.one_of(_VISIBLE, _VISIBLE, _VISIBLE, _ODD), max_size=4))
    return b"".join(parts)


@st.composite
def _header(draw: st.DrawFn, body: bytes) -> bytes:
    name = draw(
        st.sampled_from(
            [b"host", b"Host", b"content-length", b"Content-Length", b"content-type",
             b"accept", b"mcp-session-id", b"connection", b"transfer-encoding", b"expect",
             b"upgrade", b"bad name", b"", b"x\x00y"]
        )
        | _TOKEN
    )
    if name.lower() == b"content-length":
        value = draw(
            st.sampled_from(
                [str(len(body)).encode()] * 4
                + [b"%d, %d" % (len(body), len(body)), b"+%d" % len(body), b"-1", b"",
                   b"0%d" % len(body), str(len(body) + 1).encode(), b"99999999"]
            )
        )
    elif name.lower() == b"host":
        value = draw(st.sampled_from([b"127.0.0.1:8000", b"example.com", b""]) | _value())
    else:
        value = draw(_value())
    before = draw(st.sampled_from([b"", b" ", b"\t", b"  "]))
    after = draw(st.sampled_from([b"", b"", b" ", b"\t"]))
    sep = draw(st.sampled_from([b":", b":", b":", b" :"]))
    fold = draw(st.sampled_from([b""] * 9 + [b"\r\n folded"]))
    return name + sep + before + value + after + fold


@st.composite
def _request(draw: st.DrawFn) -> bytes:
    body = draw(st.binary(max_size=64))
    method = draw(st.sampled_from([b"POST", b"GET", b"DELETE", b"HEAD"]) | _TOKEN | _value())
    target = draw(st.sampled_from([b"/mcp", b"/mcp?a=1", b"*", b"/a b", b""]) | _value())
    version = draw(
        st.sampled_from([b"HTTP/1.1"] * 6 + [b"HTTP/1.0", b"HTTP/2.0", b"http/1.1", b"HTTP/1.1 "])
    )
    line = draw(st.sampled_from([b" "] * 9 + [b"  "])).join([method, target, version])
    headers = [
        b"host: 127.0.0.1:8000",
        b"content-length: %d" % len(body),
    ] if draw(st.booleans()) else []
    headers += draw(st.lists(_header(body), max_size=6))
    headers = draw(st.permutations(headers))
    eol = draw(st.sampled_from([b"\r\n"] * 9 + [b"\n"]))
    head = eol.join([line, *headers]) + eol + draw(st.sampled_from([b"\r\n"] * 9 + [b"\n"]))
    return head + body


@st.composite
def _clean_request(draw: st.DrawFn) -> bytes:
    """A request of the plainest form, but for one or two details at most."""
    body = draw(st.binary(max_size=64))
    words = st.lists(_VISIBLE.filter(bool), min_size=0, max_size=3)
    headers = [
        b"host: 127.0.0.1:8000",
        b"content-length: %d" % len(body),
        *(
            name + b":" + draw(st.sampled_from([b"", b" ", b"\t"]))
            + draw(st.sampled_from([b" ", b"\t", b" \t"])).join(draw(words))
            + draw(st.sampled_from([b"", b"", b" "]))
            for name in draw(st.lists(_TOKEN, max_size=5))
        ),
    ]
    if draw(st.integers(0, 3)) == 0:
        headers.append(draw(_header(body)))
    head = b"\r\n".join([
        draw(st.sampled_from([b"POST", b"GET", b"DELETE"]) | _TOKEN)
        + b" " + draw(st.sampled_from([b"/mcp", b"/mcp?x=1"]) | _VISIBLE.filter(bool))
        + b" HTTP/1.1",
        *draw(st.permutations(headers)),
    ]) + b"\r\n\r\n"
    return head + body


@st.composite
def _wire(draw: st.DrawFn) -> bytes:
    """One request or several back to back, perhaps cut short, perhaps with a leading
    blank line."""
    data = b"".join(draw(st.lists(_clean_request() | _request(), min_size=1, max_size=3)))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 9)) == 0:
        data = b"\r\n" + data
    return data


def _h11_reads(data: bytes) -> h11.Connection:
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    if data:  # b"" would tell h11 the client has closed
        parser.receive_data(data)
    return parser


def _h11_request(parser: h11.Connection) -> tuple[h11.Request, bytes]:
    """The request h11 reads first, and its body (which must be whole)."""
    head = parser.next_event()
    assert isinstance(head, h11.Request), head
    body = b""
    while True:
        event = parser.next_event()
        if isinstance(event, h11.EndOfMessage):
            return head, body
        assert isinstance(event, h11.Data), event
        body += bytes(event.data)


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-PLAIN")
@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_wire())
def test_what_read_plain_takes_h11_reads_the_same_and_where_it_waits_h11_has_nothing(
    data: bytes,
) -> None:
    """A request read_plain takes, h11 takes too: the same method, target, version,
    headers (names lower-cased, in order) and body, and the same remainder after it. When
    read_plain waits for more, h11 has no request yet either."""
    got = read_plain(data, max_head=MAX_HEAD, max_body=MAX_BODY)
    parser = _h11_reads(data)
    if got is INCOMPLETE:
        assert h11.NEED_DATA is parser.next_event()
        return
    if got is None:
        return
    assert isinstance(got, tuple)
    plain, size = got
    head, body = _h11_request(parser)
    assert (head.method, head.target, head.http_version) == (
        plain.method, plain.target, plain.http_version,
    )
    assert list(head.headers) == list(plain.headers)
    assert body == plain.body
    assert parser.trailing_data[0] == data[size:]


@pytest.mark.slow
@pytest.mark.spec("TM-HTTP-PLAIN")
@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_clean_request(), min_size=1, max_size=4))
def test_requests_of_the_plainest_form_are_read_plain_one_after_another(
    requests: list[bytes],
) -> None:
    """Pipelined requests are read one after another, each from where the last ended, as
    long as each is plain; every one read is one h11 reads the same."""
    data = b"".join(requests)
    while True:
        got = read_plain(data, max_head=MAX_HEAD, max_body=MAX_BODY)
        if not isinstance(got, tuple):
            return
        plain, size = got
        head, body = _h11_request(_h11_reads(data))
        assert list(head.headers) == list(plain.headers) and body == plain.body
        data = data[size:]


@pytest.mark.spec("TM-HTTP-PLAIN")
def test_what_mcp_clients_send_is_plain_and_what_is_unusual_is_left_to_h11() -> None:
    """A client's POST and GET are read plain; a chunked body, Expect, a second Host,
    obs-fold, obs-text, a bare LF, HTTP/1.0, and a body not all arrived are h11's; a head
    still arriving is waited for."""
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}'
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: application/json, "
        b"text/event-stream\r\nContent-Type: application/json\r\nMcp-Session-Id: abc\r\n"
        b"Mcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    got = read_plain(head + body + b"GET", max_head=MAX_HEAD, max_body=MAX_BODY)
    assert isinstance(got, tuple)
    plain, size = got
    assert plain == PlainRequest(
        method=b"POST",
        target=b"/mcp",
        headers=(
            (b"host", b"127.0.0.1:8000"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-type", b"application/json"),
            (b"mcp-session-id", b"abc"),
            (b"mcp-protocol-version", b"2025-11-25"),
            (b"content-length", b"%d" % len(body)),
        ),
        body=body,
    )
    assert size == len(head + body)
    get = b"GET /mcp HTTP/1.1\r\nhost: h\r\naccept: text/event-stream\r\n\r\n"
    assert isinstance(read_plain(get, max_head=MAX_HEAD, max_body=MAX_BODY), tuple)

    def unusual(data: bytes) -> None:
        assert read_plain(data, max_head=MAX_HEAD, max_body=MAX_BODY) is None, data

    unusual(head.replace(b"Content-Length", b"Transfer-Encoding: chunked\r\nX") + body)
    unusual(head.replace(b"Accept", b"Expect: 100-continue\r\nAccept") + body)
    unusual(head.replace(b"Accept", b"Host: again\r\nAccept") + body)
    unusual(head.replace(b"Content-Type", b"X: a\r\n b\r\nContent-Type") + body)
    unusual(head.replace(b"abc", b"caf\xe9") + body)
    unusual(head.replace(b"abc\r\n", b"abc\n") + body)
    unusual(head.replace(b"HTTP/1.1", b"HTTP/1.0") + body)
    unusual(head + body[:-1])
    unusual(head.replace(b"Content-Length: %d" % len(body), b"Content-Length: 5000") + body)
    assert read_plain(head[:40], max_head=MAX_HEAD, max_body=MAX_BODY) is INCOMPLETE
    assert read_plain(head[:40], max_head=30, max_body=MAX_BODY) is None
