# Running one request's handler, the same way in both eras: what the App answers, or the
# JSON-RPC error it raised, as the message to send back. Never a stack trace on the wire.
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from ..protocol import (
    JSON,
    ErrorCode,
    ErrorResponse,
    ProtocolError,
    Request,
    Response,
)

__all__ = ["outcome_of"]

logger = logging.getLogger("trio_mcp.session")


async def outcome_of(
    handler: Callable[[], Awaitable[Mapping[str, JSON]]], request: Request
) -> Response | ErrorResponse:
    """Run ``handler`` for ``request``: its result as a Response, or its error.

    Cancellation, and any other BaseException (a modern request's InputRequired), passes
    through to the caller.
    """
    try:
        return Response(id=request.id, result=await handler())
    except ProtocolError as exc:
        return ErrorResponse(id=request.id, code=exc.code, message=exc.message, data=exc.data)
    except Exception:
        # U-LOG-6 spirit: the trace goes to the server log, not to the client.
        logger.exception("handler for %s failed", request.method)
        return ErrorResponse(id=request.id, code=ErrorCode.INTERNAL_ERROR, message="Internal error")
