# What reads the requests trio-mcp's own HTTP server receives (spec/transport.md
# TM-HTTP-PARSER): httptools (llhttp, the parser of Node.js, in C; what uvicorn[standard]
# uses) by default, or h11, the pure-Python reference. Both sit behind one sans-I/O
# interface, RequestReader: bytes go in (`receive_data`), events come out (`next_event`): a
# request's head, its body's data, its end; a request that cannot be read raises BadRequest
# with the refusal to send. Nothing here parses HTTP by hand: what the server adds to either
# parser is where one request ends and the next begins, and the checks that make httptools at
# least as strict as h11 wherever the two disagree (tests/http/test_http_parsers.py tries
# both on generated requests).
#
# httptools is a push parser: whatever it is fed, it reads to the end, pipelined requests
# included, and it tells no offsets. So the httptools reader feeds it exactly one request: the
# head up to the CRLF CRLF that ends it (llhttp takes no bare LF and no obs-fold, so no head
# ends elsewhere), a Content-Length body not at all (the server takes those bytes itself), and
# a chunked body in pieces that end where a chunked body can end (after a CRLF CRLF). Each
# request gets a parser of its own (0.25 µs).
from __future__ import annotations

import enum
import re
from typing import Final, Protocol

import attrs
import h11

from ..base._config import HttpParser
from ..protocol import RemoteProtocolError
from ..protocol._edge import (
    CONTENT_LENGTH_MAX_DIGITS,
    bad_request,
    header_too_large,
    not_implemented,
    version_not_supported,
)

try:
    import httptools
except ImportError:  # pragma: no cover - a dependency; h11 serves without it
    httptools = None  # type: ignore[assignment]

__all__ = [
    "BadRequest",
    "Event",
    "H11Reader",
    "HttptoolsReader",
    "RequestHead",
    "RequestReader",
    "Signal",
    "make_reader",
    "resolve_parser",
]


class Signal(enum.Enum):
    """What ``next_event`` says when it gives no head and no body data."""

    #: More bytes must arrive first.
    NEED_DATA = "need data"
    #: The request's body is all read.
    END = "end"
    #: The client closed its side between requests: there is no next request.
    CLOSED = "closed"
    #: The request is all read; nothing more is read until ``next_cycle``.
    PAUSED = "paused"


@attrs.frozen
class RequestHead:
    """A request's line and headers: names lower-cased, values without the whitespace
    around them, in the order sent."""

    method: bytes
    target: bytes
    http_version: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes | None = None
    """The whole body, when it arrived with the head (a Content-Length of at most the
    reader's ``max_body``): the request is then all read. None: read it by ``next_event``."""


#: An event of a reader: a head, a piece of the body, or a Signal.
Event = RequestHead | bytes | Signal


class BadRequest(Exception):
    """A request that cannot be read: ``error`` is the refusal to answer (400, 431, 501,
    505), after which the connection closes."""

    def __init__(self, error: RemoteProtocolError) -> None:
        super().__init__(error.message)
        self.error = error


class RequestReader(Protocol):
    """Reads the requests of one connection, one after the other."""

    def receive_data(self, data: bytes) -> None:
        """Take what arrived; b"" when the client closed its side."""

    def next_event(self) -> Event:
        """The next event of the current request. Raises BadRequest."""

    def next_cycle(self) -> None:
        """The current request is over (answered): read the next one from what follows."""

    @property
    def request_read(self) -> bool:
        """Whether the current request has been read to its end, so that the connection
        can carry another."""

    @property
    def waiting_for_continue(self) -> bool:
        """Whether the client asked for ``100 Continue`` and has sent none of the body."""


def resolve_parser(choice: HttpParser) -> HttpParser:
    """The parser ``choice`` means here: AUTO is httptools when it can be imported, else
    h11. Raises ValueError for httptools when it cannot be."""
    if choice is HttpParser.AUTO:
        return HttpParser.HTTPTOOLS if httptools is not None else HttpParser.H11
    if choice is HttpParser.HTTPTOOLS and httptools is None:
        raise ValueError("the httptools parser is not installed: pip install httptools")
    return choice


def make_reader(parser: HttpParser, *, max_head: int, max_body: int) -> RequestReader:
    """A reader for one connection: ``parser`` as ``resolve_parser`` gives it."""
    if resolve_parser(parser) is HttpParser.HTTPTOOLS:
        return HttptoolsReader(max_head=max_head, max_body=max_body)
    return H11Reader(max_head=max_head)


# -- httptools -------------------------------------------------------------------------------


class _State(enum.Enum):
    HEAD = "head"
    LENGTH = "length"  # a Content-Length body, taken from the buffer
    CHUNKED = "chunked"  # a chunked body, fed to the request's parser
    DONE = "done"


_CR_LF: Final = frozenset(b"\r\n")
#: The fields the reader notes as they come: they frame the body, or ask for 100 Continue.
_NOTED: Final = frozenset({b"content-length", b"transfer-encoding", b"expect", b"upgrade"})
_VERSIONS: Final = {"1.1": b"1.1", "1.0": b"1.0"}
#: Chunked body pieces fed one CRLF CRLF at a time, at most, before the rest is fed whole
#: and the connection carries no further request (see HttptoolsReader._read_chunked).
_EXACT_PIECES: Final = 64


class HttptoolsReader:
    """A RequestReader on httptools. It is also the parser's callback object (the
    ``on_*`` methods), for the request being read."""

    def __init__(self, *, max_head: int, max_body: int) -> None:
        self._max_head = max_head
        self._max_body = max_body
        self._buffer = bytearray()
        #: Where the search for the head's end resumes: never a byte searched twice.
        self._searched = 0
        self._eof = False
        self._state = _State.HEAD
        #: Bytes of a Content-Length body still to come.
        self._remaining = 0
        self._parser: httptools.HttpRequestParser | None = None
        #: The last bytes fed of a chunked body (a CRLF CRLF may span two pieces), and how
        #: many pieces were cut at one.
        self._tail = b""
        self._pieces = 0
        #: Whether the connection may carry a next request once this one is read.
        self._reusable = True
        #: Bytes of the head being read that its parser has read already.
        self._fed = 0
        self._upgrade = False
        self._continue = False
        self._body_seen = False
        # What the parser's callbacks gathered.
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._length: bytes | None = None
        self._chunked = False
        self._expects = False
        self._head_done = False
        self._complete = False
        self._chunks: list[bytes] = []

    # -- httptools' callbacks --------------------------------------------------------------

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._head_done:  # afterwards: a chunked body's trailer fields, ignored
            # llhttp drops the whitespace before a value, not after it (RFC 9112 §5.1).
            name = name.lower()
            value = value.rstrip(b" \t")
            if name in _NOTED:
                if name == b"content-length":
                    self._length = value
                elif name == b"transfer-encoding":
                    value = value.lower()  # as h11 gives it: codings are case-insensitive
                    self._chunked = True
                elif name == b"upgrade":
                    if value.strip(b" \t,"):
                        # A request asking to switch protocols is served as it is (the
                        # upgrade not made, RFC 9110 §7.8), and the connection ends after
                        # it, as h11 ends it: it reads nothing more after one.
                        self._reusable = False
                else:
                    self._expects = value.lower() == b"100-continue"
            self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._head_done = True

    def on_body(self, body: bytes) -> None:
        if not self._complete:  # afterwards: the next request's, never this one's
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        self._complete = True

    # -- RequestReader ---------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        if data:
            self._buffer += data
        else:
            self._eof = True

    @property
    def request_read(self) -> bool:
        return self._state is _State.DONE and self._reusable

    @property
    def waiting_for_continue(self) -> bool:
        return self._continue and not self._body_seen

    def next_cycle(self) -> None:
        self._state = _State.HEAD if self._reusable else _State.DONE
        self._parser = None
        self._searched = self._fed = 0

    def next_event(self) -> Event:
        state = self._state
        if state is _State.HEAD:
            return self._read_head()
        if state is _State.LENGTH:
            return self._read_length()
        if state is _State.CHUNKED:
            return self._read_chunked()
        return Signal.PAUSED if self._reusable else Signal.CLOSED

    def _read_head(self) -> Event:
        buffer = self._buffer
        if not buffer:
            return Signal.CLOSED if self._eof else Signal.NEED_DATA
        if buffer[0] in _CR_LF:
            # RFC 9112 §2.2 lets a server ignore a blank line before a request; h11 does
            # not, and the stricter answer is taken.
            raise BadRequest(bad_request("a blank line before the request line"))
        end = buffer.find(b"\r\n\r\n", self._searched, self._max_head + 1)
        if end < 0:
            if len(buffer) > self._max_head:
                raise BadRequest(header_too_large())
            # All that arrived is head: llhttp reads it now, so that a head it refuses (a
            # bare LF, a control byte) is refused when it shows, not at the deadline.
            self._feed_head(len(buffer))
            if self._eof:
                raise BadRequest(bad_request("the connection ended inside a request head"))
            self._searched = max(0, len(buffer) - 3)
            return Signal.NEED_DATA
        size = end + 4
        if size > self._max_head:
            raise BadRequest(header_too_large())
        self._feed_head(size)
        del buffer[:size]
        self._searched = self._fed = 0
        return self._read_fields()

    def _feed_head(self, upto: int) -> None:
        """Feed the request's parser (made for it now, if it is the first piece) its head's
        bytes up to ``upto`` that it has not read yet, once its request line is whole and
        checked: what is refused, and how, does not depend on how the bytes arrived."""
        buffer = self._buffer
        if not self._fed:
            line_end = buffer.find(b"\r\n", 0, upto)
            if line_end < 0:
                if buffer.find(b"\n", 0, upto) >= 0:
                    raise BadRequest(bad_request("a line ended by a bare LF"))
                return  # not fed before it is whole
            if buffer.count(b" ", 0, line_end) != 2:
                # h11 reads method SP target SP version and nothing else; llhttp lets
                # more spaces between them pass.
                raise BadRequest(bad_request("a malformed request line"))
        parser = self._parser
        if parser is None:
            self._url = b""
            self._headers = []
            self._length = None
            self._head_done = self._complete = self._body_seen = self._upgrade = False
            self._chunked = self._expects = False
            self._chunks.clear()
            parser = self._parser = httptools.HttpRequestParser(self)
        if upto <= self._fed:
            return
        piece = bytes(buffer[self._fed : upto])
        self._fed = upto
        try:
            parser.feed_data(piece)
        except httptools.HttpParserUpgrade:
            # Upgrade and CONNECT: llhttp stops after the head. The upgrade is not made
            # (RFC 9110 §7.8 lets a server ignore it): the request is served as it is.
            self._upgrade = True
        except httptools.HttpParserError as exc:
            _refuse_version(parser)
            raise BadRequest(bad_request(str(exc) or "a malformed request")) from None

    def _read_fields(self) -> RequestHead:
        """The head llhttp has read whole, and how its body is to be read."""
        parser = self._parser
        assert parser is not None
        if not self._head_done:
            _refuse_version(parser)
            raise BadRequest(bad_request("a malformed request head"))
        text = parser.get_http_version()
        version = _VERSIONS.get(text) or text.encode("ascii")
        headers = self._headers
        length = self._length
        chunked = self._chunked
        self._continue = self._expects and version == b"1.1"
        method = parser.get_method()
        if method == b"CONNECT":
            self._reusable = False  # as after an Upgrade header (on_header)
        if chunked:
            if self._upgrade:
                raise BadRequest(bad_request("an upgrade request with a chunked body"))
            self._state = _State.CHUNKED
            self._tail = b""
            self._pieces = 0
            return RequestHead(method, self._url, version, tuple(headers))
        self._parser = None
        body: bytes | None = b""
        if length is not None:
            if len(length) > CONTENT_LENGTH_MAX_DIGITS:
                # llhttp takes any number of leading zeros; h11 (and int()) do not.
                raise BadRequest(bad_request("bad Content-Length"))
            remaining = int(length)
            buffer = self._buffer
            if remaining <= len(buffer) and remaining <= self._max_body:
                body = bytes(buffer[:remaining])
                del buffer[:remaining]
            else:
                body = None
                self._remaining = remaining
        self._state = _State.DONE if body is not None else _State.LENGTH
        return RequestHead(method, self._url, version, tuple(headers), body)

    def _read_length(self) -> Event:
        remaining = self._remaining
        if remaining == 0:
            self._state = _State.DONE
            return Signal.END
        buffer = self._buffer
        if not buffer:
            if self._eof:
                raise BadRequest(bad_request("the connection ended inside a request body"))
            return Signal.NEED_DATA
        self._body_seen = True
        take = min(remaining, len(buffer))
        data = bytes(buffer[:take])
        del buffer[:take]
        self._remaining = remaining - take
        return data

    def _read_chunked(self) -> Event:
        buffer = self._buffer
        parser = self._parser
        assert parser is not None
        while not self._complete:
            if not buffer:
                if self._eof:
                    raise BadRequest(bad_request("the connection ended inside a request body"))
                return Signal.NEED_DATA
            self._body_seen = True
            size = len(buffer)
            if self._pieces < _EXACT_PIECES:
                # A chunked body ends right after a CRLF CRLF (the last chunk's line, or
                # the trailer section's, then the empty line): fed no further than the
                # next one, the parser never reads into the next request.
                tail = self._tail
                joint = (tail + bytes(buffer[:3])).find(b"\r\n\r\n")
                end = joint + 4 - len(tail) if joint >= 0 else buffer.find(b"\r\n\r\n")
                if end >= 0:
                    size = end + (0 if joint >= 0 else 4)
                    self._pieces += 1
            else:
                # A body with this many CRLF CRLF is fed whole, at a cost linear in its
                # size; where it ended is then unknown, so the connection ends after it.
                self._reusable = False
            piece = bytes(buffer[:size])
            del buffer[:size]
            self._tail = (self._tail + piece)[-3:]
            try:
                parser.feed_data(piece)
            except httptools.HttpParserError as exc:
                if not self._complete:
                    raise BadRequest(bad_request(str(exc) or "a malformed chunked body")) from None
                # Fed whole, the body was followed by what the next request would have been:
                # the connection ends after this one (not reusable), so it is never read.
            if self._chunks:
                data = b"".join(self._chunks)
                self._chunks.clear()
                return data
        self._parser = None
        self._state = _State.DONE
        return Signal.END


def _refuse_version(parser: httptools.HttpRequestParser) -> None:
    """Raise 505 for a request line llhttp read a version from that is not served (HTTP/2's
    preface, ``PRI * HTTP/2.0``, which llhttp stops at; ``HTTP/1.2``), as h11's reading
    gets from the edge's plan."""
    if parser.get_http_version() not in ("1.0", "1.1", "0.0", "0.9"):
        raise BadRequest(version_not_supported())


# -- h11 -------------------------------------------------------------------------------------

#: A line that continues the one before it (obs-fold, RFC 9112 §5.2).
_FOLD: Final = re.compile(rb"\n[ \t]")
#: Bytes that h11's header regex backtracks on quadratically after a run of whitespace
#: (0.5 s of CPU for one 16 KiB head, 7 s for 64 KiB: NUL, VT, FF, a CR not before an LF),
#: and that no head may hold (RFC 9110 §5.5, RFC 9112 §2.2): refused before h11 sees them.
_H11_SLOW: Final = re.compile(rb"[\x00\x0b\x0c]|\r(?!\n)")
#: Where h11 ends a head: the first blank line (it takes a bare LF for a line's end).
_HEAD_END: Final = re.compile(rb"\n\r?\n")


class H11Reader:
    """A RequestReader on h11: a fresh state machine for each request, given what arrived
    after the last one."""

    def __init__(self, *, max_head: int) -> None:
        self._max_head = max_head
        self._conn = self._machine()
        #: What arrived since the current request began, until its head was read: the
        #: head's exact size, and whether it folds a line, are read from it.
        self._head = bytearray()
        self._in_head = True
        #: How much of ``_head`` was looked through for _H11_SLOW, and what was found.
        self._scanned = 0
        self._refusal: RemoteProtocolError | None = None

    def _machine(self) -> h11.Connection:
        return h11.Connection(h11.SERVER, max_incomplete_event_size=self._max_head)

    def receive_data(self, data: bytes) -> None:
        if self._in_head:
            self._head += data
            self._scan()
        self._conn.receive_data(data)

    def _scan(self) -> None:
        """Look through what arrived of the head (once: from where the last look ended)
        for a byte h11 would take quadratic time to refuse."""
        head = self._head
        start = max(0, self._scanned - 2)  # a line end may span two reads
        end = _HEAD_END.search(head, start)
        stop = end.end() if end is not None else len(head)
        if end is None and head.endswith(b"\r"):
            stop -= 1  # its LF may be next
        if self._refusal is None and _H11_SLOW.search(head, start, stop) is not None:
            self._refusal = bad_request("a control character in the request head")
        self._scanned = stop

    @property
    def request_read(self) -> bool:
        return self._conn.their_state is h11.DONE

    @property
    def waiting_for_continue(self) -> bool:
        return bool(self._conn.they_are_waiting_for_100_continue)

    def next_cycle(self) -> None:
        data, closed = self._conn.trailing_data
        self._conn = self._machine()
        self._head = bytearray(data)
        self._in_head = True
        self._scanned = 0
        self._scan()
        if data:
            self._conn.receive_data(data)
        if closed:
            self._conn.receive_data(b"")

    def next_event(self) -> Event:
        if self._refusal is not None:
            raise BadRequest(self._refusal)
        try:
            event = self._conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise BadRequest(_refusal(exc)) from None
        if isinstance(event, h11.Data):
            return bytes(event.data)
        if isinstance(event, h11.EndOfMessage):
            return Signal.END
        if isinstance(event, h11.Request):
            return self._read_head(event)
        if event is h11.NEED_DATA:
            return Signal.NEED_DATA
        if isinstance(event, h11.ConnectionClosed):
            return Signal.CLOSED
        return Signal.PAUSED

    def _read_head(self, event: h11.Request) -> RequestHead:
        size = len(self._head) - len(self._conn.trailing_data[0])
        head = self._head[:size]
        self._head = bytearray()
        self._in_head = False
        if _FOLD.search(head):
            # RFC 9112 §5.2 lets a server refuse obs-fold or unfold it; h11 unfolds, and a
            # front end that does not would read a folded Transfer-Encoding differently.
            raise BadRequest(bad_request("obsolete line folding is not accepted"))
        if size > self._max_head:
            # h11 bounds a head still arriving; one that arrived whole is measured here.
            raise BadRequest(header_too_large())
        return RequestHead(
            bytes(event.method), bytes(event.target), bytes(event.http_version),
            tuple(event.headers),
        )


def _refusal(exc: h11.RemoteProtocolError) -> RemoteProtocolError:
    status = exc.error_status_hint
    if status == 431:
        return header_too_large()
    if status == 501:
        return not_implemented()
    return bad_request(str(exc) or "a malformed request")
