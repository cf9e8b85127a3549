# text/event-stream framing (WHATWG HTML § Server-sent events): an encoder for the server,
# and a strict incremental decoder for tests and clients. No I/O.
from __future__ import annotations

from typing import Final

import attrs

__all__ = [
    "SSEDecoder",
    "SSEEvent",
    "encode_comment",
    "encode_event",
    "encode_message_event",
]

_FORBIDDEN_IN_FIELD: Final = ("\r", "\n", "\0")


def encode_event(
    *,
    data: str | None = None,
    id: str | None = None,
    event: str | None = None,
    retry: int | None = None,
) -> bytes:
    """One SSE event. ``data`` may span lines; ``id`` and ``event`` may not.

    An event with ``data=""`` has an empty data field, which is what a priming event is
    (T-PSSE-1): the client records its id and dispatches nothing.
    """
    lines: list[str] = []
    if event is not None:
        _check_field("event", event)
        lines.append(f"event: {event}")
    if id is not None:
        _check_field("id", id)
        lines.append(f"id: {id}")
    if retry is not None:
        if retry < 0:
            raise ValueError("retry must be a non-negative number of milliseconds")
        lines.append(f"retry: {retry}")
    if data is not None:
        # A data line may not hold a line break: split and let the client join them.
        for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            lines.append(f"data: {line}" if line else "data:")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def encode_message_event(*, data: bytes, id: str | None = None) -> bytes:
    """The event that carries one serialized JSON-RPC message, ``data`` (UTF-8 bytes):
    ``encode_event(id=id, data=data.decode())``, with the event's ``id`` when its stream
    has them (a legacy stream's resumption cursor) and none when it has not (MT-SSE-6: a
    modern stream carries no ids).

    Every message any stream carries is framed here, once per event a server streams: the
    common case, a message with no line break (JSON escapes them), is framed as it is,
    without a round trip through str.
    """
    if b"\n" in data or b"\r" in data:
        return encode_event(id=id, data=data.decode("utf-8"))
    if id is None:
        return b"data: " + data + b"\n\n"
    _check_field("id", id)
    return b"id: " + id.encode("utf-8") + (b"\ndata: " + data if data else b"\ndata:") + b"\n\n"


def encode_comment(text: str = "") -> bytes:
    """An SSE comment: clients ignore it; it keeps idle connections alive."""
    _check_field("comment", text)
    return f": {text}\n\n".encode() if text else b":\n\n"


def _check_field(name: str, value: str) -> None:
    if "\n" in value or "\r" in value or "\0" in value:  # _FORBIDDEN_IN_FIELD, unrolled
        raise ValueError(f"an SSE {name} field cannot hold CR, LF or NUL")


@attrs.frozen(kw_only=True)
class SSEEvent:
    """A dispatched event, or a comment when ``comment`` is not None."""

    data: str | None = None
    id: str | None = None
    event: str | None = None
    retry: int | None = None
    comment: str | None = None


class SSEDecoder:
    """Incremental decoder: ``feed(bytes)`` returns the events and comments completed so far.

    Unlike a browser it reports comments, ``retry`` and empty-data events, because tests
    assert on exactly what went over the wire.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._fields: dict[str, str] = {}
        self._data: list[str] | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buffer += chunk
        out: list[SSEEvent] = []
        while True:
            idx = self._buffer.find(b"\n")
            if idx < 0:
                return out
            raw = self._buffer[:idx]
            self._buffer = self._buffer[idx + 1 :]
            line = raw.rstrip(b"\r").decode("utf-8")
            if line == "":
                if self._fields or self._data is not None:
                    retry = self._fields.get("retry")
                    out.append(
                        SSEEvent(
                            data=None if self._data is None else "\n".join(self._data),
                            id=self._fields.get("id"),
                            event=self._fields.get("event"),
                            retry=int(retry) if retry is not None and retry.isdigit() else None,
                        )
                    )
                self._fields = {}
                self._data = None
                continue
            if line.startswith(":"):
                out.append(SSEEvent(comment=line[1:].lstrip(" ")))
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                if self._data is None:
                    self._data = []
                self._data.append(value)
            else:
                self._fields[name] = value
