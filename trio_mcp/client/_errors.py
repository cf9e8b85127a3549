# What a call of trio_mcp.Client raises: every way a call can end without its result is a
# named exception, so that a caller never waits on a call whose answer cannot come
# (spec/client.md TM-CLIENT-GAP).
from __future__ import annotations

from typing import Any

__all__ = [
    "ClientError",
    "ConnectionLost",
    "ErrorAnswer",
    "HttpStatusError",
    "ResumptionFailed",
]


class ClientError(Exception):
    """The base of everything trio_mcp.Client raises about a call or a connection."""


class ErrorAnswer(ClientError):
    """The server answered the request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message
        self.data = data


class ResumptionFailed(ClientError):
    """A dropped stream could not be re-attached where it was left (TM-CLIENT-GAP): the
    server's window no longer holds the cursor (-31001, a ``resumption-failed`` event), it
    refused the resume, or answered it with nothing. The call's outcome is unknown: the
    server may or may not have done what it asked."""

    def __init__(self, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


class ConnectionLost(ClientError):
    """A stream ended before its request's answer and could not be resumed: it carried no
    event id to resume from (a JSON response cut short, a 2026-07-28 stream), or the server
    stayed unreachable for every attempt. The call's outcome is unknown."""


class HttpStatusError(ClientError):
    """The server answered with an HTTP status that carries no JSON-RPC answer."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:200]}")
        self.status = status
        self.text = text
