# The runtime's view of one HTTP exchange: what it may do to answer (a complete reply, or a
# stream of chunks), and an event that fires when the client goes away. The ASGI adapter
# implements it, and so does trio-mcp's own HTTP server; tests may implement it in memory. A
# responder may also offer what the kernel knows about its connection's socket (`TcpProbing`):
# its connection is then judged by the kernel-informed judge, which watches the reader's
# acknowledgements and window, not only the writes (trio_mcp/runtime/backpressure/_judge.py,
# TM-BP-STALL).
from __future__ import annotations

import contextlib
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import trio

from ...protocol import Reply
from ._tcpprobe import TcpSample

__all__ = [
    "Departure",
    "Resettable",
    "Responder",
    "SendRoom",
    "TcpProbing",
    "run_watching_disconnect",
    "watching_disconnect",
]

T = TypeVar("T")


class Responder(Protocol):
    disconnected: trio.Event
    """Set when the client has closed the connection."""
    started: bool
    """Whether a response has begun (a reply, or a stream's head)."""
    finished: bool
    """Whether the whole response has gone out (a reply, or a stream's end)."""

    async def reply(self, reply: Reply) -> None:
        """Send a complete response."""

    async def start_stream(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        """Send the status line and headers of a streamed response."""

    async def write(self, data: bytes) -> None:
        """Send one chunk of a streamed response."""

    async def end(self) -> None:
        """Finish a streamed response."""


@runtime_checkable
class TcpProbing(Protocol):
    """What a responder whose connection is a TCP socket of this process may offer besides
    (optional). A responder with both methods gets the kernel-informed judge
    (``_judge.KernelJudge``); one without them is judged by its writes alone
    (``_judge.WriteProgressJudge``): ``_judge.judge_for`` decides."""

    def tcp_sample(self) -> TcpSample | None:
        """The kernel's figures for the connection's socket now; None when they cannot be
        had (not Linux, socket not found, probe released). The first call looks the socket
        up, which costs a scan of the process's descriptors at worst: call it only for a
        connection worth watching."""

    def release_tcp_probe(self) -> None:
        """Close what ``tcp_sample`` holds open; it returns None from then on."""


@runtime_checkable
class SendRoom(Protocol):
    """What a responder that writes to a socket of its own may offer besides (optional): how
    much one write takes now without waiting. A stream's writer then hands such a write all
    of a chunk at once, and slices only what would wait (TM-BP-BOUNDED)."""

    def send_room(self) -> int:
        """Bytes one ``write`` takes now without waiting for the reader (0 when unknown)."""


@runtime_checkable
class Resettable(Protocol):
    """What a responder whose connection is a TCP socket of this process may offer besides
    (optional): closing it by a reset, so that a cut reader is sent nothing more
    (TM-BP-CLOSE)."""

    def reset_on_close(self) -> bool:
        """Make the connection's coming close a reset (RST): what the kernel still holds for
        the client, unsent or unacknowledged, is dropped rather than delivered first. False
        when it cannot (no socket found, not Linux)."""


class Departure:
    """The client's leaving, as an HTTP edge learns it: an event, and callbacks run once when
    it happens (at once for one registered after). Both edges' responders keep one, for
    their ``disconnected`` and ``on_disconnect``."""

    def __init__(self) -> None:
        self.event = trio.Event()
        self._callbacks: list[Callable[[], None]] = []

    def on(self, callback: Callable[[], None]) -> None:
        if self.event.is_set():
            callback()
        else:
            self._callbacks.append(callback)

    def happened(self) -> None:
        if not self.event.is_set():
            self.event.set()
            callbacks, self._callbacks = self._callbacks, []
            for callback in callbacks:
                callback()


def watching_disconnect(
    responder: Responder, callback: Callable[[], None]
) -> contextlib.AbstractAsyncContextManager[None]:
    """Call ``callback`` if the client goes away while the block runs (or after it: the
    callback must be harmless then).

    A responder with an ``on_disconnect(callback)`` method (both HTTP edges') calls it from
    the task that already watches the connection, and the block costs nothing more; any other
    gets a task that waits for its ``disconnected`` event. A nursery and a task per request
    cost more than the rest of a small request's own work, which is why the first way exists.
    """
    register = getattr(responder, "on_disconnect", None)
    if register is not None:
        register(callback)
        return _NOTHING
    return _watching_task(responder, callback)


_NOTHING: contextlib.nullcontext[None] = contextlib.nullcontext()


@contextlib.asynccontextmanager
async def _watching_task(
    responder: Responder, callback: Callable[[], None]
) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            await responder.disconnected.wait()
            callback()

        nursery.start_soon(watch)
        yield
        nursery.cancel_scope.cancel()


async def run_watching_disconnect(
    responder: Responder,
    callback: Callable[[], None],
    coro: Coroutine[Any, Any, T],
    *,
    then: Callable[[], None] | None = None,
) -> T:
    """Await ``coro`` in this task, and call ``callback`` if the client goes away while it
    runs (or after: the callback must be harmless then), watching only from the moment
    ``coro`` first yields to the scheduler.

    A coroutine that returns without ever yielding (a handler whose answer is ready at once)
    gives the scheduler no moment in which the client's leaving could be heard, nor could
    it be cancelled if it were: it needs no watch, and gets none (on the own server no
    reader task, under hypercorn no task waiting for ``http.disconnect``). One that yields,
    to wait or only to let others run, is watched from just before its first yield, so
    that it is cancelled as promptly as if it had been watched from its start. A responder
    without ``on_disconnect`` gets ``watching_disconnect``'s task for the whole call.
    ``then``, if given, is called at that first yield too, once the watch is set up.
    """
    register = getattr(responder, "on_disconnect", None)
    if register is None:
        async with _watching_task(responder, callback):
            return await (coro if then is None else _first_yield(coro, then))

    def first_yield() -> None:
        register(callback)
        if then is not None:
            then()

    return await _first_yield(coro, first_yield)


@types.coroutine
def _first_yield(
    coro: Coroutine[Any, Any, T], on_yield: Callable[[], None]
) -> Generator[Any, Any, T]:
    """Run ``coro`` as ``await coro`` would, calling ``on_yield`` once, just before its
    first yield reaches the scheduler. From then on each of its yields is passed up and
    each value (or exception) the scheduler sends back is passed down, as ``await`` does."""
    send: Callable[[Any], Any] = coro.send
    value: Any = None
    watched = False
    try:
        while True:
            try:
                trap = send(value)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if not watched:
                watched = True
                on_yield()
            try:
                value = yield trap
                send = coro.send
            except GeneratorExit:
                raise
            except BaseException as exc:  # thrown in: passed down, as await does
                send, value = coro.throw, exc
    finally:
        coro.close()
