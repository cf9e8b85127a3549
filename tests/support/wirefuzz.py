"""Generated HTTP/1.1 byte streams for the tests of the HTTP edge and its parsers
(tests/http/test_http_parsers.py, tests/e2e/test_e2e_socket_fuzz.py) and for the longer
fuzzing run in benchmarks/ (benchmarks/fuzz_edge.py): requests of every shape, most parts well
formed and some not (control bytes, obs-text, bare line ends, folded lines, odd framing,
chunked bodies good and broken), pipelined, cut short, split into pieces; and, for the socket
fuzzer, real MCP requests among them, mutated ones, HTTP/2 prefaces and noise."""

from __future__ import annotations

import itertools
import json

from hypothesis import strategies as st

__all__ = ["clean_request", "fuzz_connection", "pieces", "request", "wire"]

_TOKEN = st.text(
    alphabet="!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    min_size=1,
    max_size=12,
).map(str.encode)
#: Bytes that make a line unusual: control bytes, obs-text, bare line ends, spaces.
_ODD = st.sampled_from(
    [b" ", b"\t", b"\x00", b"\x01", b"\x7f", b"\x80", b"\xe9", b"\r", b"\n", b"\r\n", b"\r\n "]
)
_VISIBLE = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=0, max_size=16
).map(str.encode)


@st.composite
def _value(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.one_of(_VISIBLE, _VISIBLE, _VISIBLE, _ODD), max_size=4))
    return b"".join(parts)


def _chunked(body: bytes, draw: st.DrawFn) -> bytes:
    """``body`` in chunks, most of them well formed."""
    out = bytearray()
    rest = body
    while rest:
        size = draw(st.integers(1, max(1, len(rest))))
        piece, rest = rest[:size], rest[size:]
        line = draw(st.sampled_from(["%x", "%X", "0%x", "%x;ext=1", "%x ", "%x\t"])) % size
        end = draw(st.sampled_from([b"\r\n"] * 8 + [b"\n", b"XX"]))
        out += line.encode() + b"\r\n" + piece + end
    out += draw(st.sampled_from([b"0\r\n\r\n"] * 6 + [b"0\r\nx-trailer: 1\r\n\r\n", b"0\r\n", b"",
                                 b"00\r\n\r\n", b"0;e\r\n\r\n", b"0\n\n"]))
    return bytes(out)


@st.composite
def _header(draw: st.DrawFn, body: bytes) -> bytes:
    name = draw(
        st.sampled_from(
            [b"host", b"Host", b"content-length", b"Content-Length", b"content-type",
             b"accept", b"mcp-session-id", b"connection", b"transfer-encoding", b"expect",
             b"upgrade", b"bad name", b"", b"x\x00y", b"Transfer-Encoding"]
        )
        | _TOKEN
    )
    lower = name.lower()
    if lower == b"content-length":
        value = draw(
            st.sampled_from(
                [str(len(body)).encode()] * 4
                + [b"%d, %d" % (len(body), len(body)), b"+%d" % len(body), b"-1", b"",
                   b"0%d" % len(body), str(len(body) + 1).encode(), b"99999999",
                   b"0" * 25 + str(len(body)).encode(), b"9" * 30]
            )
        )
    elif lower == b"host":
        value = draw(st.sampled_from([b"127.0.0.1:8000", b"example.com", b""]) | _value())
    elif lower == b"transfer-encoding":
        value = draw(st.sampled_from([b"chunked", b"Chunked", b"gzip, chunked", b"identity",
                                      b"chunked, chunked", b" chunked", b""]))
    elif lower == b"connection":
        value = draw(st.sampled_from([b"close", b"keep-alive", b"Upgrade", b"upgrade, close"]))
    elif lower == b"expect":
        value = draw(st.sampled_from([b"100-continue", b"100-Continue", b"nothing"]))
    elif lower == b"upgrade":
        value = draw(st.sampled_from([b"h2c", b"websocket"]))
    else:
        value = draw(_value())
    before = draw(st.sampled_from([b"", b" ", b"\t", b"  "]))
    after = draw(st.sampled_from([b"", b"", b" ", b"\t"]))
    sep = draw(st.sampled_from([b":", b":", b":", b" :"]))
    fold = draw(st.sampled_from([b""] * 9 + [b"\r\n folded"]))
    if draw(st.integers(0, 19)) == 0:  # a folded value, the fold at its start
        return name + sep + b"\r\n " + value
    return name + sep + before + value + after + fold


@st.composite
def request(draw: st.DrawFn) -> bytes:
    """A request of any shape: most parts well formed, some not."""
    body = draw(st.binary(max_size=64))
    method = draw(
        st.sampled_from([b"POST", b"GET", b"DELETE", b"HEAD", b"OPTIONS", b"CONNECT", b"PRI"])
        | _TOKEN | _value()
    )
    target = draw(
        st.sampled_from([b"/mcp", b"/mcp?a=1", b"*", b"/a b", b"", b"http://127.0.0.1:8000/mcp",
                         b"127.0.0.1:8000", b"/%6Dcp", b"/mcp#x"])
        | _value()
    )
    version = draw(
        st.sampled_from([b"HTTP/1.1"] * 6 + [b"HTTP/1.0", b"HTTP/2.0", b"http/1.1", b"HTTP/1.1 ",
                         b"HTTP/1.2", b"HTTP/0.9"])
    )
    line = draw(st.sampled_from([b" "] * 9 + [b"  ", b"\t"])).join([method, target, version])
    headers = [
        b"host: 127.0.0.1:8000",
        b"content-length: %d" % len(body),
    ] if draw(st.booleans()) else []
    headers += draw(st.lists(_header(body), max_size=6))
    headers = draw(st.permutations(headers))
    if any(h.lower().startswith(b"transfer-encoding") for h in headers) and draw(st.booleans()):
        body = _chunked(body, draw)
    eol = draw(st.sampled_from([b"\r\n"] * 9 + [b"\n"]))
    head = eol.join([line, *headers]) + eol + draw(st.sampled_from([b"\r\n"] * 9 + [b"\n"]))
    return head + body


@st.composite
def clean_request(draw: st.DrawFn) -> bytes:
    """A request of the plainest form, but for one or two details at most."""
    body = draw(st.binary(max_size=64))
    words = st.lists(_VISIBLE.filter(bool), min_size=0, max_size=3)
    chunked = draw(st.integers(0, 4)) == 0
    coding = draw(st.sampled_from([b"chunked"] * 6 + [b"Chunked", b"gzip, chunked", b" chunked"]))
    framing = b"transfer-encoding: " + coding if chunked else b"content-length: %d" % len(body)
    headers = [
        b"host: 127.0.0.1:8000",
        framing,
        *(
            name + b":" + draw(st.sampled_from([b"", b" ", b"\t"]))
            + draw(st.sampled_from([b" ", b"\t", b" \t"])).join(draw(words))
            + draw(st.sampled_from([b"", b"", b" "]))
            for name in draw(st.lists(_TOKEN, max_size=5))
        ),
    ]
    if draw(st.integers(0, 3)) == 0:
        headers.append(draw(_header(body)))
    # One detail of the request line, now and then: spacing, version, target form.
    space = draw(st.sampled_from([b" "] * 12 + [b"  ", b"\t", b" \t"]))
    version = draw(st.sampled_from([b"HTTP/1.1"] * 12 + [b"HTTP/1.0", b"HTTP/1.2", b"HTTP/2.0"]))
    head = b"\r\n".join([
        draw(st.sampled_from([b"POST", b"GET", b"DELETE"]) | _TOKEN)
        + space + draw(
            st.sampled_from([b"/mcp", b"/mcp?x=1", b"http://127.0.0.1:8000/mcp"])
            | _VISIBLE.filter(bool)
        )
        + draw(st.sampled_from([b" "] * 12 + [b"  "])) + version,
        *draw(st.permutations(headers)),
    ]) + b"\r\n\r\n"
    return head + (_chunked(body, draw) if chunked else body)


@st.composite
def wire(draw: st.DrawFn) -> bytes:
    """One request or several back to back, perhaps cut short, perhaps with a leading
    blank line."""
    data = b"".join(draw(st.lists(clean_request() | request(), min_size=1, max_size=3)))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.integers(0, 9)) == 0:
        data = b"\r\n" + data
    return data


@st.composite
def pieces(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` split at random places (one piece, mostly)."""
    if draw(st.integers(0, 2)) == 0 or not data:
        return [data] if data else []
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]




# -- whole connections, for the socket fuzzer -------------------------------------------------


def _message(method: str, params: object = None, rid: object = 1) -> bytes:
    message: dict[str, object] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    if params is not None:
        message["params"] = params
    return json.dumps(message, separators=(",", ":")).encode()


#: Bodies an MCP endpoint serves, and some it refuses in band.
MCP_BODIES = (
    _message("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "fuzz", "version": "0"}}),
    _message("ping"),
    _message("tools/list", {"cursor": "W1tbW1tbW1tb"}),
    _message("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
    _message("notifications/initialized", rid=None),
    b"[" + _message("ping") + b"," + _message("ping", rid=2) + b"]",
    _message("tools/call", {"name": "echo", "arguments": {"text": "y"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}}),
    b"{",
    b"",
    b"null",
)
_TARGETS = (
    b"/mcp", b"/mcp/", b"/mcp?x=1", b"/", b"/stats", b"/metrics", b"/tree.json", b"/events",
    b"/.well-known/oauth-protected-resource", b"http://127.0.0.1:8000/mcp",
    b"http://evil.example/mcp", b"*", b"/%6Dcp", b"/mcp#frag",
)
_HOSTS = (b"127.0.0.1:8000",) * 6 + (b"localhost", b"[::1]:8000", b"evil.example", b"")
_ACCEPTS = (b"application/json, text/event-stream",) * 4 + (b"text/event-stream", b"*/*", b"")


@st.composite
def mcp_request(draw: st.DrawFn) -> bytes:
    """A request such as MCP clients send, with one or two of its parts changed: method,
    target, version, Host, Accept, Origin, session and version headers, and framing (a
    right or wrong Content-Length, chunks, both, none)."""
    body = draw(st.sampled_from(MCP_BODIES) | st.binary(max_size=200))
    method = draw(st.sampled_from([b"POST"] * 6 + [b"GET", b"DELETE", b"HEAD", b"OPTIONS"]))
    version = draw(st.sampled_from([b"HTTP/1.1"] * 8 + [b"HTTP/1.0"]))
    lines = [method + b" " + draw(st.sampled_from(_TARGETS)) + b" " + version]
    host = draw(st.sampled_from(_HOSTS))
    if host:
        lines.append(b"host: " + host)
    lines.append(b"accept: " + draw(st.sampled_from(_ACCEPTS)))
    types = [b"application/json"] * 4 + [b"text/plain", b"application/json; charset=latin-1"]
    lines.append(b"content-type: " + draw(st.sampled_from(types)))
    for name, values in (
        (b"mcp-protocol-version", [b"2025-11-25", b"2026-07-28", b"1999-01-01"]),
        (b"mcp-session-id", [b"bogus", b"", b"x" * 300]),
        (b"origin", [b"http://localhost:8000", b"http://evil.example"]),
        (b"expect", [b"100-continue"]),
        (b"connection", [b"close", b"keep-alive"]),
        (b"last-event-id", [b"0", b"garbage"]),
    ):
        if draw(st.integers(0, 3)) == 0:
            lines.append(name + b": " + draw(st.sampled_from(values)))
    framing = draw(st.sampled_from(["length"] * 6 + ["wrong", "chunked", "both", "none"]))
    if framing in ("length", "both"):
        lines.append(b"content-length: %d" % len(body))
    elif framing == "wrong":
        lines.append(b"content-length: %d" % max(0, len(body) + draw(st.integers(-5, 5))))
    if framing in ("chunked", "both"):
        lines.append(b"transfer-encoding: chunked")
        body = _chunked(body, draw)
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


_INSERTS = (b"\r\n", b"\n", b"\r", b"\x00", b":", b" ", b"\t", b"\r\n\r\n", b"\r\n ", b"\xff")


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    """``base`` with one to six changes: a byte replaced, bytes inserted (line ends, NUL,
    a colon, a fold), a range deleted or repeated, the end cut off."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.integers(0, 4))
        if kind == 0 and data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        elif kind == 1:
            data[at:at] = draw(st.sampled_from(_INSERTS))
        elif kind == 2:
            del data[at : at + draw(st.integers(1, 20))]
        elif kind == 3:
            data[at:at] = data[at : at + draw(st.integers(1, 40))]
        else:
            del data[at:]
    return bytes(data)


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@st.composite
def stream(draw: st.DrawFn) -> bytes:
    """What a fuzzed client sends on one connection: MCP requests (one to three, pipelined),
    mutated ones, the parsers' generated streams, HTTP/2's preface and frames, or noise."""
    kind = draw(st.integers(0, 9))
    if kind <= 2:
        return b"".join(draw(st.lists(mcp_request(), min_size=1, max_size=3)))
    if kind <= 5:
        return draw(mutated(draw(mcp_request())))
    if kind <= 7:
        return draw(wire())
    if kind == 8:
        return _H2_PREFACE + draw(st.binary(max_size=200))
    return draw(st.binary(min_size=1, max_size=2000))


#: The ports a fuzzed connection goes to, and how often.
PORTS = ("mcp",) * 7 + ("stats", "inspect")


@st.composite
def fuzz_connection(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    """One fuzzed connection: the port it goes to ("mcp", "stats" or "inspect") and what is
    written, in pieces."""
    port = draw(st.sampled_from(PORTS))
    data = draw(stream())
    return port, draw(pieces(data))
