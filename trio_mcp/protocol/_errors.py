# The errors of the pure layer.
#
# Every error carries the values that go on the wire: the JSON-RPC error code and the HTTP
# status a server answers with (h11's error_status_hint, h2's error_code). Who broke the rules
# is in the class: RemoteProtocolError means the client did; LocalProtocolError means our own
# caller (an application using trio_mcp) did.
from __future__ import annotations

from enum import IntEnum
from typing import Any, ClassVar, Final

__all__ = [
    "RETIRED_CODES",
    "ErrorCode",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "resource_not_found",
]


class ErrorCode(IntEnum):
    """JSON-RPC 2.0 §5.1 error codes, and the MCP codes that trio-mcp emits."""

    #: Invalid JSON was received by the server.
    PARSE_ERROR = -32700
    #: The JSON sent is not a valid Request object.
    INVALID_REQUEST = -32600
    #: The method does not exist or is not available.
    METHOD_NOT_FOUND = -32601
    #: Invalid method parameter(s).
    INVALID_PARAMS = -32602
    #: Internal JSON-RPC error.
    INTERNAL_ERROR = -32603
    #: MCP 2025-11-25 server/resources § Error Handling: resource not found.
    RESOURCE_NOT_FOUND = -32002
    #: MCP 2025-11-25 client/elicitation: the request needs a URL-mode elicitation first.
    URL_ELICITATION_REQUIRED = -32042
    #: MCP 2026-07-28: a request header does not match the body (HeaderMismatch).
    HEADER_MISMATCH = -32020
    #: MCP 2026-07-28: the request needs a client capability it did not declare.
    MISSING_CLIENT_CAPABILITY = -32021
    #: MCP 2026-07-28: the requested protocol version is not supported.
    UNSUPPORTED_PROTOCOL_VERSION = -32022
    #: trio-mcp: a request was ended because the session or its stream was lost. Outside the
    #: reserved range -32768..-32000, as MCP 2026-07-28 asks of new codes (MJ-ERR-8).
    RESUMPTION_FAILED = -31001
    #: trio-mcp: the server has too many sessions or requests in flight right now.
    SERVER_BUSY = -31002
    #: trio-mcp: the shared session store did not answer (TM-STORE-DOWN); retry later.
    STORE_UNAVAILABLE = -31004
    #: trio-mcp: the caller's rate limit is spent (TM-HAND-RATE); ``data.retryAfterMs`` says
    #: when a request will be let through.
    RATE_LIMITED = -31005


#: TM-RPC-CODES: trio-mcp's codes that are no longer sent and are never given another
#: meaning, since a client written against an older trio-mcp still reads the old one:
#: -31003 answered the requests of a JSON-mode POST its client had cancelled.
RETIRED_CODES: Final = frozenset({-31003})


class ProtocolError(Exception):
    """Base class of the pure layer's errors; never raised directly.

    Attributes:
        message: one sentence for the JSON-RPC error's ``message``.
        code: the JSON-RPC error code.
        http_status: the HTTP status a server answers with when the error ends a request.
        data: optional ``data`` member of the JSON-RPC error.
        headers: extra HTTP response headers (``Allow``, ``Retry-After``).
    """

    default_code: ClassVar[ErrorCode] = ErrorCode.INVALID_REQUEST
    default_status: ClassVar[int] = 400

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        http_status: int | None = None,
        data: Any = None,
        headers: tuple[tuple[str, str], ...] = (),
        request_id: str | int | None = None,
    ) -> None:
        if type(self) is ProtocolError:
            raise TypeError("raise RemoteProtocolError or LocalProtocolError instead")
        super().__init__(message)
        self.message = message
        self.code = int(code if code is not None else self.default_code)
        self.http_status = http_status if http_status is not None else self.default_status
        self.data = data
        self.headers = headers
        #: The id of the request this error answers, when it could be read.
        self.request_id = request_id

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this error."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class RemoteProtocolError(ProtocolError):
    """The client sent something the spec (or this server's limits) does not accept."""


class LocalProtocolError(ProtocolError):
    """The application asked for something the spec forbids (a bug on our side of the wire)."""

    default_code = ErrorCode.INTERNAL_ERROR
    default_status = 500


def resource_not_found(uri: str) -> RemoteProtocolError:
    """J-ERR-5 (SHOULD): a resource that does not exist is -32002, with its URI in ``data``.

    A modern request gets -32602 instead (MU-RES-2, MJ-ERR-7): the modern runtime translates
    the code on the way out (``protocol._modern.modern_error``).
    """
    return RemoteProtocolError(
        f"Resource not found: {uri}", code=ErrorCode.RESOURCE_NOT_FOUND, data={"uri": uri}
    )
