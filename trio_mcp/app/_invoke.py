# Calling a handler function (spec/handlers.md): awaited when it is async, in a worker
# thread when it is a plain ``def`` (TM-HAND-THREAD), after its dependencies are resolved,
# and with their teardowns run once it is done (TM-HAND-DEPENDS). Era-neutral: tools run
# this the same for a legacy session and a modern request.
from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import trio

from ._depends import Dependency, Injection

__all__ = ["DEFAULT_THREADS", "Invocation", "ServerState", "call_handler", "handler_kind"]

#: Worker threads running plain ``def`` handlers at once, per server, unless
#: ``Server(max_threads=...)`` says otherwise: trio's own default for to_thread.
DEFAULT_THREADS = 40


class ServerState:
    """What the handlers of one server share while it serves: the limiter of the worker
    threads plain ``def`` handlers run in, and the lifespan's value (TM-HAND-LIFESPAN)."""

    def __init__(self, max_threads: int) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.limiter = trio.CapacityLimiter(max_threads)
        self._lifespan: Any = None
        self._reader: Callable[[str, Any], Awaitable[list[dict[str, Any]]]] | None = None

    def serve_reads(self, reader: Callable[[str, Any], Awaitable[list[dict[str, Any]]]]) -> None:
        """``reader(uri, ctx)`` reads the server's resources for ``ctx.read_resource``."""
        self._reader = reader

    async def read_resource(self, uri: str, ctx: Any) -> list[dict[str, Any]]:
        if self._reader is None:
            raise RuntimeError("this server has no resources to read")
        return await self._reader(uri, ctx)

    @property
    def lifespan(self) -> Any:
        return self._lifespan

    @contextlib.contextmanager
    def lifespan_value(self, value: Any) -> Iterator[None]:
        """``value`` is the lifespan's for the duration of the block."""
        self._lifespan = value
        try:
            yield
        finally:
            self._lifespan = None


async def _in_thread(
    fn: Callable[..., Any], kwargs: Mapping[str, Any], limiter: trio.CapacityLimiter,
    *, abandon: bool,
) -> Any:
    # TM-HAND-THREAD: a thread cannot be interrupted. With ``abandon`` a cancelled request
    # stops waiting for it at once (its answer or its silence goes out), and the thread
    # keeps its limiter slot until it really returns, so the bound holds.
    return await trio.to_thread.run_sync(
        functools.partial(fn, **kwargs), limiter=limiter, abandon_on_cancel=abandon
    )


class Invocation:
    """One request's dependencies: each resolved once (unless ``use_cache=False``), torn
    down in reverse order when the request's handler is done."""

    def __init__(
        self, ctx: Any, stack: contextlib.AsyncExitStack | None, limiter: trio.CapacityLimiter
    ) -> None:
        self._ctx = ctx
        self._stack = stack
        self._limiter = limiter
        self._cache: dict[Callable[..., Any], Any] = {}

    async def resolve(self, injections: Sequence[Injection]) -> dict[str, Any]:
        return {i.name: await self._value(i.dependency) for i in injections}

    async def _value(self, dep: Dependency) -> Any:
        fn = dep.marker.dependency
        if dep.marker.use_cache and fn in self._cache:
            return self._cache[fn]
        kwargs: dict[str, Any] = dict.fromkeys(dep.context_params, self._ctx)
        for name, sub in dep.sub:
            kwargs[name] = await self._value(sub)
        value = await self._enter(fn, dep, kwargs)
        if dep.marker.use_cache:
            self._cache[fn] = value
        return value

    async def _enter(self, fn: Callable[..., Any], dep: Dependency, kwargs: dict[str, Any]) -> Any:
        kind = dep.kind
        # Only a request with a generator among its dependencies has a stack.
        stack = self._stack
        if kind.is_async and kind.is_generator:
            assert stack is not None
            return await stack.enter_async_context(
                contextlib.asynccontextmanager(fn)(**kwargs)
            )
        if kind.is_async:
            return await fn(**kwargs)
        if kind.is_generator:
            assert stack is not None
            # A sync generator's set-up and teardown run in a worker thread, as a plain
            # handler does; they are waited for (never abandoned), so the teardown always
            # follows its set-up.
            manager = contextlib.contextmanager(fn)(**kwargs)
            with trio.CancelScope(shield=True):
                # Shielded, so that a set-up that ran is always followed by its teardown.
                value = await _in_thread(manager.__enter__, {}, self._limiter, abandon=False)

            async def exit_in_thread(*exc_info: Any) -> bool | None:
                # Shielded: a cancelled request still runs the teardown of what it set up
                # (the thread could not be stopped anyway).
                with trio.CancelScope(shield=True):
                    done: bool | None = await trio.to_thread.run_sync(
                        manager.__exit__, *exc_info, limiter=self._limiter
                    )
                return done

            stack.push_async_exit(exit_in_thread)
            return value
        return await _in_thread(fn, kwargs, self._limiter, abandon=False)


def handler_kind(fn: Callable[..., Any], what: str) -> bool:
    """Whether ``fn`` is awaited (an ``async def``, or an object whose ``__call__`` is one);
    a plain function runs in a worker thread (TM-HAND-THREAD). A generator is refused: a
    handler returns its result."""
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise TypeError(f"{what} {fn!r} is a generator: a handler returns its result")
    if inspect.iscoroutinefunction(fn):
        return True
    if not callable(fn):
        raise TypeError(f"{what} {fn!r} is not a function")
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


async def call_handler(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    *,
    is_async: bool,
    injections: Sequence[Injection],
    ctx: Any,
    limiter: trio.CapacityLimiter,
) -> Any:
    """Resolve ``injections`` into ``kwargs``, call ``fn`` (awaited, or in a worker thread),
    then tear the dependencies down, the handler's exception passed to each generator."""
    if not injections:
        # No dependency: nothing to enter or leave (the path without one stays as cheap as
        # it was).
        if is_async:
            return await fn(**kwargs)
        return await _in_thread(fn, kwargs, limiter, abandon=True)
    if not any(i.dependency.tears_down for i in injections):
        # Nothing to tear down (no generator among them): no exit stack to enter and leave.
        kwargs.update(await Invocation(ctx, None, limiter).resolve(injections))
        if is_async:
            return await fn(**kwargs)
        return await _in_thread(fn, kwargs, limiter, abandon=True)
    async with contextlib.AsyncExitStack() as stack:
        invocation = Invocation(ctx, stack, limiter)
        kwargs.update(await invocation.resolve(injections))
        if is_async:
            return await fn(**kwargs)
        return await _in_thread(fn, kwargs, limiter, abandon=True)
