# The plainest HTTP/1.1 requests, read without h11 (TM-HTTP-PLAIN).
#
# Nearly every request an MCP client sends is a small POST or GET that arrives whole in one
# read: a request line, a dozen headers, a Content-Length body. h11 reads it event by event
# through its state machine, which on trio-mcp's own server cost more than any other part
# of a request's way in. `read_plain` reads only requests of the strictest form, a subset of
# what h11 accepts that h11 would read identically (tests/http/test_http_plain.py checks
# both claims against h11 itself); anything else, or anything incomplete past its head, is
# left to h11, which then reads it as it always did.
from __future__ import annotations

import re
from typing import Final

import attrs

__all__ = ["INCOMPLETE", "PlainRequest", "read_plain"]

#: RFC 9110 §5.6.2 token, as h11 reads it.
_TOKEN: Final = rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"
#: A request line of HTTP/1.1 with an origin-form (or any visible-ASCII) target.
_REQUEST_LINE: Final = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) HTTP/1\.1")
_REQUEST_LINE_START: Final = re.compile(_TOKEN)
#: A header line: visible ASCII only (no obs-text, no control bytes), spaces and tabs only
#: inside the value, optional whitespace around it.
_HEADER: Final = re.compile(
    rb"(" + _TOKEN + rb"):[ \t]*((?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?)[ \t]*"
)
#: Headers that change how the request is framed or read: such a request is h11's.
_FRAMING: Final = frozenset({b"transfer-encoding", b"expect", b"upgrade"})


@attrs.frozen
class PlainRequest:
    """A request read whole: its head as h11 would give it (names lower-cased, values
    without surrounding whitespace, in order) and its body."""

    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    http_version: bytes = b"1.1"


class _Incomplete:
    def __repr__(self) -> str:
        return "INCOMPLETE"


#: `read_plain`'s answer while the head has not all arrived (and may still be plain).
INCOMPLETE: Final = _Incomplete()


def read_plain(
    data: bytes | bytearray, *, max_head: int, max_body: int
) -> tuple[PlainRequest, int] | _Incomplete | None:
    """The request at the start of ``data`` and the bytes it takes, when it is plain and
    has arrived whole; INCOMPLETE while its head is shorter than ``max_head`` and
    unfinished; None for anything h11 must read.

    Plain: HTTP/1.1; one Host header; at most one Content-Length, of digits, at most
    ``max_body``; no Transfer-Encoding, Expect or Upgrade; every line as ``_REQUEST_LINE``
    and ``_HEADER`` say, ended by CRLF; a head of at most ``max_head`` bytes.
    """
    end = data.find(b"\r\n\r\n", 0, max_head)
    if end < 0:
        # Waited for only while it can still become plain. A line ended by a bare LF
        # (which h11 takes) or a leading blank line makes it h11's at once: h11 may see a
        # head's end, or an error, where CRLF CRLF is still to come.
        plain_so_far = (
            len(data) < max_head
            and (not data or _REQUEST_LINE_START.match(data) is not None)
            and data.count(b"\n") == data.count(b"\r\n")
        )
        return INCOMPLETE if plain_so_far else None
    lines = bytes(data[:end]).split(b"\r\n")
    line = _REQUEST_LINE.fullmatch(lines[0])
    if line is None:
        return None
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    hosts = 0
    for raw in lines[1:]:
        field = _HEADER.fullmatch(raw)
        if field is None:
            return None
        name = field[1].lower()
        value = field[2]
        if name == b"content-length":
            if length is not None or not value.isdigit():
                return None
            length = int(value)
        elif name == b"host":
            hosts += 1
        elif name in _FRAMING:
            return None
        headers.append((name, value))
    if hosts != 1:
        return None
    size = length or 0
    if size > max_body:
        return None
    start = end + 4
    if len(data) < start + size:
        return None
    return (
        PlainRequest(line[1], line[2], tuple(headers), bytes(data[start : start + size])),
        start + size,
    )
