# Running one request's handler, the same way in both eras: what the App answers, or the
# JSON-RPC error it raised, as the message to send back. Never a stack trace on the wire.
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from ..base._ports import InputRequired
from ..protocol import (
    JSON,
    ErrorCode,
    ErrorResponse,
    ProtocolError,
    Request,
    Response,
)
from ._failures import FailureLog
from ._reqstats import Outcome, RequestMetrics

__all__ = ["outcome_of"]

logger = logging.getLogger("trio_mcp.session")
#: Handlers that raised (a bug): the first from each place with its traceback, then counted,
#: so that a client repeating the request that triggers it cannot fill the log (TM-SEC-LOG).
failures = FailureLog(logger, "a handler failed; answered -32603")


def outcome_of(
    handler: Callable[[], Awaitable[Mapping[str, JSON]]],
    request: Request,
    metrics: RequestMetrics | None = None,
) -> Coroutine[Any, Any, Response | ErrorResponse]:
    """Run ``handler`` for ``request`` (awaited): its result as a Response, or its error;
    counted in ``metrics`` with the time it took.

    Cancellation, and any other BaseException (a modern request's InputRequired), passes
    through to the caller. With telemetry on (TM-OTEL-SPAN) it runs under a SERVER span.
    Not a coroutine function itself: the caller awaits the body's coroutine directly, so
    telemetry off adds no coroutine of its own to each request.
    """
    if metrics is not None and metrics.telemetry is not None:
        return metrics.telemetry.run(_outcome_of, handler, request, metrics)
    return _outcome_of(handler, request, metrics)


async def _outcome_of(
    handler: Callable[[], Awaitable[Mapping[str, JSON]]],
    request: Request,
    metrics: RequestMetrics | None,
) -> Response | ErrorResponse:
    started = time.perf_counter()
    outcome = Outcome.CANCELLED
    try:
        response = Response(id=request.id, result=await handler())
        outcome = Outcome.OK
        return response
    except ProtocolError as exc:
        outcome = Outcome.ERROR
        return ErrorResponse(id=request.id, code=exc.code, message=exc.message, data=exc.data)
    except Exception:
        # U-LOG-6 spirit: the trace goes to the server log, not to the client.
        failures.caught(sys.exc_info()[1], context=f"the handler of {request.method}")
        outcome = Outcome.ERROR
        return ErrorResponse(id=request.id, code=ErrorCode.INTERNAL_ERROR, message="Internal error")
    except InputRequired:
        outcome = Outcome.INPUT_REQUIRED
        raise
    finally:
        if metrics is not None:
            metrics.record(request.method, outcome, time.perf_counter() - started)

