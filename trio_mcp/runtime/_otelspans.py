# The spans and metrics of the MCP semantic conventions (OpenTelemetry GenAI conventions,
# "Semantic conventions for Model Context Protocol", status development), imported only when
# telemetry is on (trio_mcp.runtime._otelswitch). One SERVER span per JSON-RPC request, named
# "{mcp.method.name} {target}", its parent the trace context the request's params._meta
# carries (SEP-414), else its HTTP request's traceparent header; the duration of each request
# and of each legacy session as histograms. To the providers ServerConfig names (each server
# its own: TM-OTEL-PROVIDERS), else the standard way: the global tracer and meter providers
# (opentelemetry-instrument, or the application's own), looked up through the API's proxies,
# so a provider set after the server starts is used.
from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import trio
from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanKind,
    StatusCode,
    TracerProvider,
)

from ..base._ports import InputRequired
from ..protocol import ErrorResponse, ProtocolError
from ..protocol._methods import METHODS, ScopeKind
from ._telemetry import HTTP_REQUEST, Body

if TYPE_CHECKING:
    from ..protocol import Notification, Request, Response
    from ._reqstats import RequestMetrics

__all__ = ["OtelTelemetry"]

#: The longest name or URI put in a span's name or attributes: a client chooses them, and a
#: 4 MB tool name must not become a 4 MB span (the rest is cut, marked with "...").
MAX_VALUE: Final = 256

#: The buckets the conventions advise for both duration histograms, in seconds.
BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

#: How often an idle telemetry looks for a provider set since, in seconds.
LOOK_EVERY: Final = 1.0

#: The API's metrics package: the meter providers it defines itself (its public
#: NoOpMeterProvider, and the proxy get_meter_provider() hands out until a provider is set, a
#: class it does not export) record nothing. Told by where the class lives, not by its name.
API_METERS: Final = metrics.__name__

#: Where a 2026-07-28 request names its revision in its _meta.
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"

#: The name of a notification whose method the server does not know, in span names and
#: metrics (as OpenTelemetry's HTTP conventions name an unknown method).
OTHER: Final = "_OTHER"

#: The trace context keys of a _meta (W3C Trace Context and Baggage, SEP-414).
CONTEXT_KEYS: Final = frozenset({"traceparent", "tracestate", "baggage"})


def _global_providers_set() -> bool:
    """Whether the process's global tracer or meter provider is one that records: set by
    opentelemetry-instrument or the application (the API's proxies and no-op providers,
    which it hands out until then, record nothing)."""
    if not isinstance(trace.get_tracer_provider(), ProxyTracerProvider | NoOpTracerProvider):
        return True
    module = type(metrics.get_meter_provider()).__module__
    return module != API_METERS and not module.startswith(API_METERS + ".")


def _bounded(value: str) -> str:
    return value if len(value) <= MAX_VALUE else value[: MAX_VALUE - 3] + "..."


def _valid(ctx: Context) -> Context | None:
    """``ctx`` when it names a remote span, else None (no parent from there)."""
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def _parent_in(carrier: Mapping[str, Any]) -> Context | None:
    """The trace context of a _meta or of HTTP headers: only the string values of its
    context keys are read (a client may put anything in a _meta), with the propagators
    configured (their own bounds: a baggage over 8 KiB is dropped, a tracestate past 32
    entries); a malformed one is no parent."""
    found = {k: v for k in CONTEXT_KEYS if isinstance(v := carrier.get(k), str)}
    if "traceparent" not in found:
        return None
    try:
        return _valid(propagate.extract(found))
    except (ValueError, TypeError):
        return None


def _received(
    method: str, params: Mapping[str, Any], attributes: dict[str, str | int]
) -> Context | None:
    """Add to ``attributes`` what a received message's span has from its ``_meta`` and
    its HTTP request (session, revision, transport, addresses); return its parent: the
    trace context of its ``_meta``, else of its HTTP request's headers."""
    meta = params.get("_meta")
    parent = _parent_in(meta) if isinstance(meta, Mapping) else None
    # The revision a 2026-07-28 message names, or the one an initialize asks for; else the
    # header's, below.
    named = meta.get(META_VERSION) if isinstance(meta, Mapping) else None
    if named is None and method == "initialize":
        named = params.get("protocolVersion")
    version = named if isinstance(named, str) else None
    http = HTTP_REQUEST.get()
    if http is not None:
        if parent is None and http.context:
            parent = _parent_in(http.context)
        if http.session is not None:
            attributes["mcp.session.id"] = _bounded(http.session)
        if version is None:
            version = http.version
        if http.stdio:
            attributes["network.transport"] = "pipe"
        else:
            attributes["network.transport"] = "tcp"
            attributes["network.protocol.name"] = "http"
        if http.http_version is not None:
            attributes["network.protocol.version"] = _bounded(http.http_version)
        if http.client is not None:
            attributes["client.address"] = http.client
        if http.client_port is not None:
            attributes["client.port"] = http.client_port
        if http.server is not None:
            attributes["server.address"] = http.server
    if version is not None:
        attributes["mcp.protocol.version"] = _bounded(version)
    return parent


class OtelTelemetry:
    """The runtime's telemetry: to the providers given, else to the OpenTelemetry API's
    global ones."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        from .. import __version__

        # A provider not given is the global one (as OpenTelemetry's instrumentations do).
        self._tracer = trace.get_tracer("trio_mcp", __version__, tracer_provider)
        meter = metrics.get_meter("trio_mcp", __version__, meter_provider)
        self._operation = meter.create_histogram(
            "mcp.server.operation.duration", unit="s",
            description="MCP request duration as observed on the receiver from the time it "
            "was received until the result or ack is sent.",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )
        self._session = meter.create_histogram(
            "mcp.server.session.duration", unit="s",
            description="The duration of the MCP session as observed on the MCP server.",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )
        #: The spans of the requests running, by the identity of their Request (a task's
        #: run shares its tools/call's: the newer holds the key), for request_event. As many
        #: as requests in flight.
        self._open: dict[int, Span] = {}
        #: Whether a tracer or meter provider is there: given to this server, or set globally
        #: (opentelemetry-instrument, or the application). Until then every span would be a
        #: no-op, and none is made. Each server's own: what one found says nothing of another.
        self._live = tracer_provider is not None or meter_provider is not None
        #: When to look again (looking costs two environment lookups that raise KeyError:
        #: 3.5% of a tools/call when done at every request, benchmarks/results/issue-41-otel).
        self._look_at = 0.0

    def idle(self) -> bool:
        """No provider is set yet: the official SDK's dependency on the API alone does not
        make every request pay for spans nobody records. Looked at once a second at most:
        a provider the application sets after the server started is used within a second;
        once set, a provider stays."""
        if self._live:
            return False
        now = time.monotonic()
        if now < self._look_at:
            return True
        self._look_at = now + LOOK_EVERY
        self._live = _global_providers_set()
        return not self._live

    async def run(
        self,
        body: Body,
        handler: Callable[[], Awaitable[Mapping[str, Any]]],
        request: Request,
        metrics: RequestMetrics | None,
    ) -> Response | ErrorResponse:
        if self.idle():
            return await body(handler, request, metrics)
        started = time.perf_counter()
        method = request.method
        params: Mapping[str, Any] = request.params if isinstance(request.params, Mapping) else {}
        attributes: dict[str, str | int] = {
            "mcp.method.name": method,
            "jsonrpc.request.id": _bounded(str(request.id)),
        }
        # What the request names, as the method table says (its row's target and scope):
        # a tool (tools/call), a prompt (prompts/get), a resource's URI.
        row = METHODS.get(method)
        named_by = params.get(row.target) if row is not None and row.target is not None else None
        scope = row.scope if row is not None else None
        target: str | None = None
        tool_call = scope is ScopeKind.TOOL
        if tool_call:
            attributes["gen_ai.operation.name"] = "execute_tool"
            if isinstance(named_by, str):
                target = _bounded(named_by)
                attributes["gen_ai.tool.name"] = target
        elif scope is ScopeKind.PROMPT and isinstance(named_by, str):
            target = _bounded(named_by)
            attributes["gen_ai.prompt.name"] = target
        elif row is not None and row.capability == "resources" and isinstance(named_by, str):
            attributes["mcp.resource.uri"] = _bounded(named_by)
        parent = _received(method, params, attributes)
        error: str | None = None
        # The parent's context is made current, its baggage with it (for the handler, and for
        # what it sends the client), and the span started in it.
        token = otel_context.attach(parent) if parent is not None else None
        try:
            with self._tracer.start_as_current_span(
                method if target is None else f"{method} {target}",
                kind=SpanKind.SERVER,
                attributes=attributes,
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                key = id(request)
                self._open[key] = span
                try:
                    outcome = await body(handler, request, metrics)
                    if isinstance(outcome, ErrorResponse):
                        error = str(outcome.code)
                        span.set_attribute("error.type", error)
                        span.set_attribute("rpc.response.status_code", error)
                        span.set_status(StatusCode.ERROR, _bounded(outcome.message))
                        if target is not None:
                            # An unknown tool or prompt is an error, and a name any client may
                            # choose: it stays out of the span's name (low cardinality).
                            span.update_name(method)
                    elif tool_call and outcome.result.get("isError") is True:
                        error = "tool_error"
                        span.set_attribute("error.type", error)
                        span.set_status(StatusCode.ERROR)
                    return outcome
                except trio.Cancelled:
                    error = "cancelled"
                    span.set_attribute("error.type", error)
                    raise
                except InputRequired:
                    # Not an error: the 2026-07-28 request answers input_required (MRTR).
                    span.add_event("mcp.input_required")
                    raise
                finally:
                    if self._open.get(key) is span:
                        del self._open[key]
                    self._time(started, method, attributes, error)
        finally:
            if token is not None:
                otel_context.detach(token)

    def notification(self, note: Notification) -> None:
        """TM-OTEL-NOTIFY: a SERVER span for a notification the client sent, from its
        receipt to its hand-over (its hook, if any, runs later, in the session's own task),
        with the attributes and parent a request's span has, and its duration recorded."""
        if self.idle():
            return
        started = time.perf_counter()
        params: Mapping[str, Any] = note.params if isinstance(note.params, Mapping) else {}
        attributes: dict[str, str | int] = {"mcp.method.name": _bounded(note.method)}
        parent = _received(note.method, params, attributes)
        # A method no table row names is the client's choice: in the span's attribute, not
        # in its name nor the metric's series, which stay few.
        named = note.method if note.method in METHODS else OTHER
        self._tracer.start_span(
            named, context=parent, kind=SpanKind.SERVER, attributes=attributes,
            record_exception=False, set_status_on_exception=False,
        ).end()
        self._time(started, named, attributes, None)

    def _time(
        self, started: float, method: str, span_attributes: Mapping[str, str | int],
        error: str | None,
    ) -> None:
        """mcp.server.operation.duration, with the low-cardinality attributes only: a tool
        or prompt name only when it named one the server has (no JSON-RPC error)."""
        attributes: dict[str, str | int] = {"mcp.method.name": method}
        for key in ("mcp.protocol.version", "network.transport", "network.protocol.name",
                    "network.protocol.version"):
            if (value := span_attributes.get(key)) is not None:
                attributes[key] = value
        if error is not None:
            attributes["error.type"] = error
        if error is None or error in ("tool_error", "cancelled"):
            for key in ("gen_ai.tool.name", "gen_ai.prompt.name", "gen_ai.operation.name"):
                if (value := span_attributes.get(key)) is not None:
                    attributes[key] = value
        self._operation.record(time.perf_counter() - started, attributes)

    def session_ended(self, seconds: float, version: str) -> None:
        self._session.record(seconds, {"mcp.protocol.version": _bounded(version)})

    @contextlib.contextmanager
    def outgoing(self, method: str, request_id: int) -> Iterator[None]:
        if self.idle():
            yield
            return
        attributes = {"mcp.method.name": method, "jsonrpc.request.id": str(request_id)}
        with self._tracer.start_as_current_span(
            method, kind=SpanKind.CLIENT, attributes=attributes,
            record_exception=False, set_status_on_exception=False,
        ) as span:
            try:
                yield
            except ProtocolError as exc:
                span.set_attribute("error.type", str(exc.code))
                span.set_attribute("rpc.response.status_code", str(exc.code))
                span.set_status(StatusCode.ERROR, _bounded(exc.message))
                raise
            except trio.Cancelled:
                span.set_attribute("error.type", "cancelled")
                raise

    def with_context(self, params: Mapping[str, Any] | None) -> Mapping[str, Any]:
        out = dict(params or {})
        meta = out.get("_meta")
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        if not carrier:
            return params if params is not None else out
        out["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), **carrier}
        return out

    def request_event(
        self, request: Request, name: str, attributes: Mapping[str, str | int]
    ) -> None:
        span = self._open.get(id(request))
        if span is not None and span.is_recording():
            span.add_event(name, dict(attributes))
