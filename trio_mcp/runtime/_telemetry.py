# What the runtime tells OpenTelemetry (TM-OTEL-*; docs/telemetry.md), and where the HTTP
# request a handler serves is found; nothing here imports OpenTelemetry: _otelspans does, and
# _otelswitch imports it only when telemetry is on. With telemetry off a request pays one
# attribute check in outcome_of, and one in Runtime.serve_guarded.
from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs

if TYPE_CHECKING:
    from ..protocol import ErrorResponse, Notification, Request, Response
    from ..protocol._transport import HttpRequest

__all__ = ["HTTP_REQUEST", "Body", "HttpSide", "Telemetry", "with_http"]

#: The headers of W3C Trace Context and Baggage.
CONTEXT_HEADERS: Final = ("traceparent", "tracestate", "baggage")


@attrs.frozen
class HttpSide:
    """What the spans of a POST's messages need of it. Not the request itself: the tasks of
    its handlers keep this as long as they run, and its body is not theirs to keep."""

    session: str | None
    version: str | None
    client: str | None
    server: str | None
    context: dict[str, str]
    """Its trace context headers: the parent of a message without one in its ``_meta``."""
    stdio: bool = False
    """A line of the stdio transport, which serves each as a request (edges/_stdio.py)."""
    client_port: int | None = None
    http_version: str | None = None

    @classmethod
    def of(cls, request: HttpRequest) -> HttpSide:
        headers = request.headers
        stdio = request.local_host == "stdio"
        return cls(
            headers.get("mcp-session-id"), headers.get("mcp-protocol-version"),
            None if stdio else request.peer_host, None if stdio else request.local_host,
            {k: v for k in CONTEXT_HEADERS if (v := headers.get(k)) is not None}, stdio,
            None if stdio else request.peer_port, None if stdio else request.http_version,
        )


#: The HTTP side of the request a task serves (set by Runtime.serve_guarded when telemetry
#: is on); trio copies it into the handler tasks a POST starts.
HTTP_REQUEST: ContextVar[HttpSide | None] = ContextVar("trio_mcp_http_request", default=None)

#: outcome_of's body: (handler, request, metrics) to the answer.
Body = Callable[..., Awaitable["Response | ErrorResponse"]]


class Telemetry(Protocol):
    """What the runtime tells OpenTelemetry (trio_mcp.runtime._otelspans.OtelTelemetry)."""

    def idle(self) -> bool:
        """Whether nothing would be recorded now (no provider set): nothing is done."""
        ...

    async def run(
        self,
        body: Body,
        handler: Callable[[], Awaitable[Mapping[str, Any]]],
        request: Request,
        metrics: Any,
    ) -> Response | ErrorResponse:
        """``body(handler, request, metrics)`` under a SERVER span, timed."""
        ...

    def notification(self, note: Notification) -> None:
        """The client sent ``note`` (a SERVER span, timed: TM-OTEL-NOTIFY)."""
        ...

    def session_ended(self, seconds: float, version: str) -> None:
        """A legacy session lasted ``seconds`` (mcp.server.session.duration)."""
        ...

    def outgoing(self, method: str, request_id: int) -> AbstractContextManager[None]:
        """A CLIENT span around a request the server sends its client (TM-OTEL-INJECT)."""
        ...

    def with_context(self, params: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """``params`` of a request to the client, with the current trace context in their
        ``_meta`` (SEP-414)."""
        ...

    def request_event(
        self, request: Request, name: str, attributes: Mapping[str, str | int]
    ) -> None:
        """A notable event of the runtime about ``request`` (its stream cut for stalling,
        re-attached, its task's status), on its span while that is open (TM-OTEL-EVENTS)."""
        ...




def with_http(
    serve: Callable[..., Awaitable[Any]], telemetry: Telemetry
) -> Callable[..., Awaitable[Any]]:
    """``serve(request, ...)`` with HTTP_REQUEST set to its request while it runs (``serve``
    itself while ``telemetry`` is idle)."""
    if telemetry.idle():
        return serve

    async def serving(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        token = HTTP_REQUEST.set(HttpSide.of(request))
        try:
            return await serve(request, *args, **kwargs)
        finally:
            HTTP_REQUEST.reset(token)

    return serving
