# The MCP session lifecycle as a table (spec/lifecycle.md).
#
# Rule 1: every rule about which client message is legal in which phase lives in _TABLE.
# Rule 2: no I/O. The runtime asks `admit(phase, message)` and applies the answer.
#
#   (no session) --initialize--> AWAITING_INITIALIZED --notifications/initialized--> OPERATING
#        any phase --DELETE / expiry / eviction--> CLOSED (every later request: 404)
from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

from ._errors import ErrorCode, RemoteProtocolError
from ._jsonrpc import ErrorResponse, Message, Notification, Request, Response
from ._methods import NOTIFICATION_CLASS, REQUEST_CLASS, MessageClass

__all__ = ["Admission", "MessageClass", "Phase", "admit", "classify", "initialize_result"]


class Phase(enum.Enum):
    #: The initialize response has been sent; the client's initialized notification has not
    #: arrived yet.
    AWAITING_INITIALIZED = "awaiting-initialized"
    #: Normal operation (L-INIT-4 done).
    OPERATING = "operating"
    #: Ended by DELETE, expiry, eviction or shutdown.
    CLOSED = "closed"


class Admission(enum.Enum):
    #: Handle the message.
    HANDLE = "handle"
    #: Handle it and move to OPERATING.
    HANDLE_AND_OPERATE = "handle and operate"
    #: Accept it and do nothing (202 for notifications).
    IGNORE = "ignore"
    #: Reject a second initialize on a live session.
    REJECT_REINITIALIZE = "reject re-initialize"


def classify(message: Message) -> MessageClass:
    """The class of ``message`` in the table: its method's own (the method table's lifecycle
    column: initialize, ping, notifications/initialized), else the general one."""
    if isinstance(message, Request):
        return REQUEST_CLASS.get(message.method, MessageClass.REQUEST)
    if isinstance(message, Notification):
        return NOTIFICATION_CLASS.get(message.method, MessageClass.NOTIFICATION)
    assert isinstance(message, Response | ErrorResponse)
    return MessageClass.RESPONSE


_A, _O = Phase.AWAITING_INITIALIZED, Phase.OPERATING
_M = MessageClass

# A message of a class not in a phase's row is impossible there (CLOSED sessions are never
# looked up: the transport answers 404 first, T-SESS-7).
_TABLE: Final[dict[tuple[Phase, MessageClass], Admission]] = {
    # L-INIT-1: initialize comes first, once. A second one on a live session is refused.
    (_A, _M.INITIALIZE): Admission.REJECT_REINITIALIZE,
    (_O, _M.INITIALIZE): Admission.REJECT_REINITIALIZE,
    # L-INIT-4: the initialized notification starts normal operation; a repeat is harmless.
    (_A, _M.INITIALIZED): Admission.HANDLE_AND_OPERATE,
    (_O, _M.INITIALIZED): Admission.IGNORE,
    # L-PING-1: ping is answered in every phase.
    (_A, _M.PING): Admission.HANDLE,
    (_O, _M.PING): Admission.HANDLE,
    # TM-LIFE-EARLY: over HTTP the initialized notification and the next request are
    # separate POSTs that can overtake each other, so requests are served before it arrives
    # (L-INIT-5 restrains the client until the initialize *response*, which it has).
    (_A, _M.REQUEST): Admission.HANDLE,
    (_O, _M.REQUEST): Admission.HANDLE,
    (_A, _M.NOTIFICATION): Admission.HANDLE,
    (_O, _M.NOTIFICATION): Admission.HANDLE,
    (_A, _M.RESPONSE): Admission.HANDLE,
    (_O, _M.RESPONSE): Admission.HANDLE,
}


def admit(phase: Phase, message: Message) -> Admission:
    """What a session in ``phase`` does with ``message``.

    Raises:
        RemoteProtocolError: for a second ``initialize`` (-32600, HTTP 400).
    """
    if phase is Phase.CLOSED:
        raise RemoteProtocolError("Session not found: it has ended.", http_status=404)
    admission = _TABLE[(phase, classify(message))]
    if admission is Admission.REJECT_REINITIALIZE:
        raise RemoteProtocolError(
            "Invalid Request: this session is already initialized; start a new session "
            "with an initialize request that carries no MCP-Session-Id.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=400,
            request_id=message.id if isinstance(message, Request) else None,
        )
    return admission


def transitions() -> dict[tuple[Phase, MessageClass], Admission]:
    """A copy of the table, for documentation and tests."""
    return dict(_TABLE)


def initialize_result(
    version: str,
    *,
    capabilities: Mapping[str, Any],
    server_info: Mapping[str, Any],
    instructions: str | None,
) -> dict[str, Any]:
    """L-INIT-3: the InitializeResult: the negotiated version, what the server declares
    (L-CAP-1), who it is, and its instructions when it has any."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": dict(capabilities),
        "serverInfo": dict(server_info),
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result
