# Middleware (spec/handlers.md TM-HAND-MIDDLEWARE): functions that wrap every request the
# application answers, in both eras, as ``async def mw(ctx, call_next)``. A middleware sees
# the request through its Context (``ctx.method``, ``ctx.params``, ``ctx.principal``,
# ``ctx.era``), may answer in the handler's place (return a result, or raise McpError), and
# runs inside the request's own task, so the request's cancellation reaches it.
from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..protocol import LocalProtocolError, RemoteProtocolError
from ._context import Context

__all__ = ["CallNext", "McpError", "Middleware", "check_middleware", "run_chain"]

CallNext = Callable[[], Awaitable[Mapping[str, Any]]]
Middleware = Callable[[Context, CallNext], Awaitable[Mapping[str, Any]]]


class McpError(RemoteProtocolError):
    """Raise from a middleware (or a handler) to answer the request with this JSON-RPC
    error: ``raise McpError(-32001, "Too many requests", data={"retryAfterMs": 500})``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message, code=code, data=data)


def check_middleware(fn: Any) -> Middleware:
    """``fn`` if it is an async function of (ctx, call_next) (TypeError otherwise)."""
    if not callable(fn):
        raise TypeError(f"middleware {fn!r} is not a function")
    call = fn if inspect.isroutine(fn) else type(fn).__call__
    if not inspect.iscoroutinefunction(call):
        raise TypeError(
            f"middleware {fn!r} must be an async function: async def mw(ctx, call_next)"
        )
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        raise TypeError(f"middleware {fn!r} must take two arguments: (ctx, call_next)") from None
    checked: Middleware = fn
    return checked


async def run_chain(
    middleware: Sequence[Middleware], ctx: Context, handler: CallNext
) -> Mapping[str, Any]:
    """Run ``handler`` inside ``middleware``, the first one outermost (TM-HAND-MW-ORDER)."""
    return await _step(middleware, 0, ctx, handler)


async def _step(
    middleware: Sequence[Middleware], index: int, ctx: Context, handler: CallNext
) -> Mapping[str, Any]:
    # One coroutine per middleware and a partial for its call_next, made as the chain is
    # walked: nothing is built for a middleware that answers without calling the rest.
    if index == len(middleware):
        return await handler()
    mw = middleware[index]
    result = await mw(ctx, functools.partial(_step, middleware, index + 1, ctx, handler))
    if type(result) is not dict and not isinstance(result, Mapping):
        # A middleware that forgot to return call_next()'s result is the application's bug:
        # an internal error, not a result of None.
        raise LocalProtocolError(
            f"middleware {getattr(mw, '__qualname__', mw)!r} returned "
            f"{type(result).__name__}, not the result (return await call_next())"
        )
    return result
