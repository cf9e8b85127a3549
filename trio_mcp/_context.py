# What a handler sees of its request and session, and what it may send back while it runs:
# progress, log messages, notifications, and requests to the client (spec/utilities.md).
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from .protocol import LocalProtocolError, Notification, Request, RequestId

if TYPE_CHECKING:
    from ._trio._session import Session

__all__ = ["LOG_LEVELS", "Context"]

#: RFC 5424 severities in ascending order, as MCP logging uses them (U-LOG-3).
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: TM-LOG-DEFAULT: until the client sets a level, messages below this one are not sent.
DEFAULT_LOG_LEVEL: Final = "info"


class Context:
    """Handed to a handler that declares a parameter annotated with ``Context``."""

    def __init__(self, *, session: Session, request: Request) -> None:
        self._session = session
        self._request = request
        self._last_progress = -math.inf
        self._finished = False
        meta = (request.params or {}).get("_meta")
        self._meta: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}

    # -- what the handler may read ------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._session.id

    @property
    def request_id(self) -> RequestId:
        return self._request.id

    @property
    def method(self) -> str:
        return self._request.method

    @property
    def meta(self) -> Mapping[str, Any]:
        """The request's ``_meta`` object (J-META-1: reserved keys are not interpreted here)."""
        return self._meta

    @property
    def progress_token(self) -> str | int | None:
        token = self._meta.get("progressToken")
        if isinstance(token, str | int) and not isinstance(token, bool):
            return token
        return None

    @property
    def protocol_version(self) -> str:
        return self._session.version

    @property
    def client_info(self) -> Mapping[str, Any]:
        return self._session.client_info

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self._session.client_capabilities

    # -- what the handler may send ------------------------------------------------------

    async def send_notification(self, method: str, params: Mapping[str, Any] | None = None) -> bool:
        """Send a notification on this request's stream (T-PSSE-8: it relates to it).

        Returns False when it could not go out (JSON response mode, request finished).
        """
        return self._session.send(Notification(method=method, params=params), related=self.request_id)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Report progress, if the request asked for it with a progressToken.

        U-PROG-4 (MUST): progress increases with every notification; a value that does not
        is refused with LocalProtocolError. U-PROG-7/U-PROG-11: nothing goes out without a
        token, or after the request finished. Returns whether a notification was sent.
        """
        token = self.progress_token
        if token is None or self._finished:
            return False
        if not progress > self._last_progress:
            raise LocalProtocolError(
                f"progress must increase: {progress!r} after {self._last_progress!r}"
            )
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return await self.send_notification("notifications/progress", params)

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> bool:
        """Send a log message on this request's stream if ``level`` passes the session's level.

        U-LOG-3: messages at the level the client set and above are sent.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if not self._session.server._capabilities_has("logging"):
            raise LocalProtocolError("the server does not declare the logging capability")
        threshold = self._session.log_level or DEFAULT_LOG_LEVEL
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        return await self.send_notification("notifications/message", params)

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> Mapping[str, Any]:
        """Send a request to the client on this request's stream and await its result."""
        t = self._session.config.client_request_timeout if timeout is None else timeout
        return await self._session.request(method, params, related=self.request_id, timeout=t)

    def close_sse_stream(self) -> bool:
        """Close this request's SSE connection now; the client resumes it with GET and
        Last-Event-ID and the response arrives there (SEP-1699 polling, T-PSSE-2)."""
        flight = self._session.inflight.get(self.request_id)
        if flight is None or flight.stream is None:
            return False
        return self._session.close_stream_connection(flight.stream)

    # internal: the server's own request type for the client
    def _as_request(self) -> Request:
        return self._request
