# What a response of a Streamable HTTP server holds, read as a sequence of incoming items:
# the one JSON-RPC message of an application/json body, or the events of a text/event-stream
# body, parsed by httpx2's SSE reader (a maintained parser of untrusted bytes, with a bound on
# an event's size). Each item says whether its event carried an id of its own: SSE gives an
# event without an id field the previous event's id, and that repeated id must not make the
# event look like a replay (TM-CLIENT-ONCE).
from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import attrs
import httpx2

__all__ = ["MAX_EVENT_BYTES", "Incoming", "is_sse", "read_incoming"]

#: The largest event or JSON body read (a server's answer to a read of a large resource).
MAX_EVENT_BYTES: Final = 64 * 1024 * 1024


@attrs.frozen(kw_only=True)
class Incoming:
    """One event of a stream (or the body of a JSON response)."""

    message: Mapping[str, Any] | None
    """A JSON-RPC message; None for an event that is not one (priming, a named signal)."""
    event: str = "message"
    data: str = ""
    event_id: str | None = None
    """The id this event carried itself; None when it carried none."""
    retry_ms: int | None = None


def is_sse(response: httpx2.Response) -> bool:
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    return kind == "text/event-stream"


def _message(text: str) -> Mapping[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


async def read_incoming(response: httpx2.Response) -> AsyncIterator[Incoming]:
    """The items of ``response``; a body cut short ends the iteration (the caller decides
    whether to resume), and so does a malformed stream."""
    if not is_sse(response):
        body = b""
        try:
            async for piece in response.aiter_bytes():
                body += piece
                if len(body) > MAX_EVENT_BYTES:
                    return
        except httpx2.TransportError:
            return
        message = _message(body.decode("utf-8", errors="replace"))
        if message is not None:
            yield Incoming(message=message, data="")
        return
    previous = ""
    try:
        async for sse in httpx2.EventSource(response, max_event_size=MAX_EVENT_BYTES):
            own = sse.id if sse.id and sse.id != previous else None
            previous = sse.id
            message = _message(sse.data) if sse.event == "message" and sse.data else None
            yield Incoming(message=message, event=sse.event, data=sse.data, event_id=own,
                           retry_ms=sse.retry)
    except httpx2.TransportError:
        # A dropped connection, a cut chunked body, an event over the bound.
        return
