# What a resumption that cannot continue a stream says (spec/resumption.md TM-RES-STALE,
# TM-RES-MALFORMED; spec/workers.md TM-STORE-STREAMS): the refusals of a Last-Event-ID, the
# named SSE event that tells a reader what was lost, and the error responses that end the
# requests of a stream whose messages are gone. The runtime decides when; these say what.
# No I/O.
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from ._errors import ErrorCode, RemoteProtocolError
from ._jsonrpc import ErrorResponse, RequestId
from ._sse import encode_event

__all__ = [
    "HOLDER_GONE",
    "holder_gone",
    "holder_gone_error",
    "holder_gone_event",
    "resumption_failed_event",
    "stream_lost_error",
    "unknown_cursor",
]

#: The reason a resumption names when the worker holding its stream is gone.
HOLDER_GONE: Final = "holder-gone"
#: How much of a client's Last-Event-ID an error repeats back.
_ID_SHOWN: Final = 200


def resumption_failed_event(details: Mapping[str, object]) -> bytes:
    """The named SSE event that says a resumption failed, and why (TM-RES-STALE)."""
    return encode_event(
        event="resumption-failed", data=json.dumps(details, separators=(",", ":"))
    )


def holder_gone_event(stream: int, last_event_id: str) -> bytes:
    """What a standalone stream resumed after its worker went is told first (TM-STORE-STREAMS):
    the messages after its cursor are lost; the stream goes on here."""
    return resumption_failed_event({
        "stream": stream,
        "lastEventId": last_event_id[:_ID_SHOWN],
        "reason": f"{HOLDER_GONE}: the messages after this cursor were held by a worker that "
        "is gone",
    })


def stream_lost_error(request_id: RequestId, details: Mapping[str, object]) -> ErrorResponse:
    """The answer to a request whose stream lost messages after the reader's cursor
    (TM-RES-STALE): its outcome is unknown, and the client's call ends now."""
    return ErrorResponse(
        id=request_id,
        code=ErrorCode.RESUMPTION_FAILED,
        message="Resumption failed: messages of this request's stream were lost from the "
        "server's replay window; the request's outcome is unknown.",
        data=dict(details),
    )


def holder_gone_error(request_id: RequestId) -> ErrorResponse:
    """The answer to a request whose worker stopped before it answered (TM-STORE-STREAMS):
    read from its stream's copy, its outcome is unknown."""
    return ErrorResponse(
        id=request_id,
        code=ErrorCode.INTERNAL_ERROR,
        message="The worker of this server running this request stopped; the request's "
        "outcome is unknown.",
        data={"reason": HOLDER_GONE},
    )


def holder_gone(last_event_id: str) -> RemoteProtocolError:
    """TM-STORE-STREAMS: the worker holding the cursor's stream is gone, and the store
    holds nothing of it: an explicit failure, never a replay from nothing."""
    return RemoteProtocolError(
        "Resumption failed: the worker of this server that held this stream is gone; its "
        "events are lost.",
        code=ErrorCode.RESUMPTION_FAILED,
        http_status=409,
        data={"lastEventId": last_event_id[:_ID_SHOWN], "reason": HOLDER_GONE},
    )


def unknown_cursor(last_event_id: str) -> RemoteProtocolError:
    """TM-RES-MALFORMED: a cursor this server did not issue for this session."""
    return RemoteProtocolError(
        "Bad Request: Last-Event-ID is not an event id of this session.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=400,
        data={"lastEventId": last_event_id[:_ID_SHOWN]},
    )
