# Exactly once (spec/client.md TM-CLIENT-ONCE): the client's record of its calls in flight
# and of the events it has applied. A server may send a message twice (a resume that replays
# from the start of a stream, a stream evicted whole answered again): every JSON-RPC
# response is applied once, by its request id, and every event once, by its event id; a
# progress notification that does not advance its token's progress is a replay too.
from __future__ import annotations

import collections
import enum
import inspect
import itertools
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, Final, TypeAlias

import attrs
import trio

from ._errors import ErrorAnswer, ResumptionFailed

__all__ = ["Call", "CallState", "EventIds", "Ledger", "ProgressCallback", "Tally"]

#: ``on_progress(progress, total, message)``; it may be a coroutine function.
ProgressCallback: TypeAlias = Callable[[float, "float | None", "str | None"],
                                       "Awaitable[None] | None"]
RequestId: TypeAlias = "str | int"

#: The event ids remembered per stream: a replay further back than this many events on one
#: stream would be applied again; no server's window is that long (trio-mcp keeps 256).
EVENT_IDS_KEPT: Final = 4096


class CallState(enum.Enum):
    WAITING = "waiting"
    ANSWERED = "answered"
    FAILED = "failed"


@attrs.frozen
class Tally:
    """What the ledger did with what it was given."""

    applied: int
    duplicates: int
    resumes: int = 0
    """Re-attaches of calls' streams (TM-CLIENT-RESUME)."""
    catch_ups: int = 0
    """Resumed streams read once more from their cursor (TM-CLIENT-CATCHUP)."""


class Call:
    """One request in flight: its id, its progress token and callback, and its outcome,
    which is set once."""

    def __init__(
        self,
        request_id: RequestId,
        method: str,
        on_progress: ProgressCallback | None,
        *,
        token: RequestId | None = None,
        progress: float | None = None,
    ) -> None:
        self.id = request_id
        self.method = method
        self.on_progress = on_progress
        #: The progress token: the request id, or the first round's for a retried round.
        self.token = request_id if token is None else token
        self.state = CallState.WAITING
        self.done = trio.Event()
        self._result: dict[str, Any] | None = None
        self._error: Exception | None = None
        self._progress = progress

    @property
    def last_progress(self) -> float | None:
        return self._progress

    def answer(self, message: Mapping[str, Any]) -> None:
        if self.state is not CallState.WAITING:
            return
        error = message.get("error")
        if isinstance(error, Mapping):
            code = error.get("code")
            text = str(error.get("message", ""))
            if code == -31001:
                self._error = ResumptionFailed(text, code=code, data=error.get("data"))
            else:
                self._error = ErrorAnswer(code if isinstance(code, int) else 0, text,
                                       error.get("data"))
            self.state = CallState.FAILED
        else:
            result = message.get("result")
            self._result = dict(result) if isinstance(result, Mapping) else {}
            self.state = CallState.ANSWERED
        self.done.set()

    def fail(self, error: Exception) -> None:
        if self.state is not CallState.WAITING:
            return
        self._error = error
        self.state = CallState.FAILED
        self.done.set()

    def outcome(self) -> dict[str, Any]:
        """The result; raises the call's failure. Only once done."""
        assert self.state is not CallState.WAITING
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def advances(self, progress: float) -> bool:
        """Whether ``progress`` is past the last applied (U-PROG: it increases with each
        notification); if so it becomes the last."""
        if self._progress is not None and progress <= self._progress:
            return False
        self._progress = progress
        return True


class EventIds:
    """The event ids applied on one stream, the newest EVENT_IDS_KEPT of them."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._order: collections.deque[str] = collections.deque()

    def __len__(self) -> int:
        return len(self._ids)

    def first_time(self, event_id: str) -> bool:
        """True once per id: the event is to be applied."""
        if event_id in self._ids:
            return False
        self._ids.add(event_id)
        self._order.append(event_id)
        if len(self._order) > EVENT_IDS_KEPT:
            self._ids.discard(self._order.popleft())
        return True


class Ledger:
    """The calls in flight by request id and token, and the event ids applied by stream."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._calls: dict[RequestId, Call] = {}
        self._tokens: dict[RequestId, Call] = {}
        self._streams: dict[Hashable, EventIds] = {}
        self._applied = 0
        self._duplicates = 0
        self._resumes = 0
        self._catch_ups = 0

    def open(
        self, method: str, on_progress: ProgressCallback | None = None, *,
        after: Call | None = None,
    ) -> Call:
        """A new call; ``after``: the round it retries (2026-07-28 input_required), whose
        progress token and progress it continues under a new request id."""
        if after is None:
            call = Call(next(self._ids), method, on_progress)
        else:
            call = Call(next(self._ids), method, on_progress, token=after.token,
                        progress=after.last_progress)
        self._calls[call.id] = call
        self._tokens[call.token] = call
        return call

    def close(self, call: Call) -> None:
        """``call`` is over: its id, its token and its stream's event ids are forgotten."""
        if self._calls.get(call.id) is call:
            del self._calls[call.id]
        if self._tokens.get(call.token) is call:
            del self._tokens[call.token]
        self._streams.pop(call.id, None)

    def tally(self) -> Tally:
        return Tally(applied=self._applied, duplicates=self._duplicates,
                     resumes=self._resumes, catch_ups=self._catch_ups)

    def note_resume(self) -> None:
        self._resumes += 1

    def note_catch_up(self) -> None:
        self._catch_ups += 1

    def first_time(self, stream: Hashable, event_id: str | None) -> bool:
        """Whether an event of ``stream`` is new; an event without an id of its own is."""
        if not event_id:
            return True
        ids = self._streams.get(stream)
        if ids is None:
            ids = self._streams[stream] = EventIds()
        if ids.first_time(event_id):
            return True
        self._duplicates += 1
        return False

    def remembered(self, stream: Hashable) -> int:
        """How many event ids of ``stream`` are kept (at most EVENT_IDS_KEPT)."""
        ids = self._streams.get(stream)
        return 0 if ids is None else len(ids)

    def forget_stream(self, stream: Hashable) -> None:
        self._streams.pop(stream, None)

    def answer(self, message: Mapping[str, Any]) -> bool:
        """Apply a response to its call; False for a response to a call already answered,
        failed or never made (dropped)."""
        call = self._calls.get(message.get("id"))  # type: ignore[arg-type]
        if call is None or call.state is not CallState.WAITING:
            self._duplicates += 1
            return False
        call.answer(message)
        self._applied += 1
        return True

    async def progress(self, params: Mapping[str, Any]) -> bool:
        """Apply a progress notification to its call's callback; False when it is for no
        call in flight or does not advance (a replay)."""
        call = self._tokens.get(params.get("progressToken"))  # type: ignore[arg-type]
        progress = params.get("progress")
        if (call is None or call.state is not CallState.WAITING
                or not isinstance(progress, int | float) or isinstance(progress, bool)):
            return False
        if not call.advances(float(progress)):
            self._duplicates += 1
            return False
        self._applied += 1
        if call.on_progress is not None:
            total = params.get("total")
            message = params.get("message")
            out = call.on_progress(
                float(progress),
                float(total) if isinstance(total, int | float) else None,
                message if isinstance(message, str) else None,
            )
            if inspect.isawaitable(out):
                await out
        return True

    def waiting(self) -> list[Call]:
        return [c for c in self._calls.values() if c.state is CallState.WAITING]
