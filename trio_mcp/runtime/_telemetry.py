# What the runtime tells OpenTelemetry (TM-OTEL-*; docs/telemetry.md), and where the HTTP
# request a handler serves is found; nothing here imports OpenTelemetry: _otelspans does, and
# _otelswitch imports it only when telemetry is on. With telemetry off a request pays one
# attribute check in outcome_of, and one in Runtime.serve_guarded.
from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..protocol import ErrorResponse, Request, Response
    from ..protocol._transport import HttpRequest

__all__ = ["HTTP_REQUEST", "Body", "Telemetry", "with_http"]

#: The HTTP request whose JSON-RPC messages a task serves (set by Runtime.serve when
#: telemetry is on): its headers carry the traceparent a request without one in its
#: ``_meta`` is parented by, its session and version, and its client's address. trio copies
#: it into the handler tasks a POST starts.
HTTP_REQUEST: ContextVar[HttpRequest | None] = ContextVar("trio_mcp_http_request", default=None)

#: outcome_of's body: (handler, request, metrics) to the answer.
Body = Callable[..., Awaitable["Response | ErrorResponse"]]


class Telemetry(Protocol):
    """What the runtime tells OpenTelemetry (trio_mcp.runtime._otelspans.OtelTelemetry)."""

    async def run(
        self,
        body: Body,
        handler: Callable[[], Awaitable[Mapping[str, Any]]],
        request: Request,
        metrics: Any,
    ) -> Response | ErrorResponse:
        """``body(handler, request, metrics)`` under a SERVER span, timed."""
        ...

    def session_ended(self, seconds: float, version: str) -> None:
        """A legacy session lasted ``seconds`` (mcp.server.session.duration)."""
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




def with_http(serve: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``serve(request, ...)`` with HTTP_REQUEST set to its request while it runs."""

    async def serving(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        token = HTTP_REQUEST.set(request)
        try:
            return await serve(request, *args, **kwargs)
        finally:
            HTTP_REQUEST.reset(token)

    return serving
