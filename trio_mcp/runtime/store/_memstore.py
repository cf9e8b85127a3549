# An in-process shared store (TM-STORE-*): the store contract (trio_mcp.runtime.store._store) kept
# in
# this process's memory, for runtimes that run in one trio run, as the workers of a test or
# of an embedding application do. It is a store like Redis, not a stand-in for one: the same
# counts and bounds (TM-STORE-BOUND), subscriptions with their versions (TM-STORE-SUBS),
# expiry, a control bus that delivers at most once and never to its sender
# (TM-STORE-CONTROL), stream copies and their claims (TM-STORE-STREAMS), and task records
# whose end never moves (TM-STORE-TASKS). The contract tests (tests/store/) run against it
# and against Redis alike.
#
# SharedMemory is the store; each runtime connects to it (``SharedMemory.connect``, a
# StoreFactory for ServerConfig.store) and gets an InProcessStore: its own origin, its own
# place on the control bus. Every call is a checkpoint, as a round trip to a server would be,
# and what it stores is copied through JSON, as a server would keep it. The store can be
# stopped (its data lost, as a crashed Redis's) and its writes paused, so that the tests of
# an unavailable store (TM-STORE-DOWN) run against it too.
from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import trio

from ...protocol import JSON
from ...protocol._logtext import LogLimiter
from ._memdata import StoreData
from ._store import (
    Claim,
    Control,
    ControlKind,
    CreateOutcome,
    SessionRecord,
    SharedState,
    StoredTask,
    StoreLimits,
    StoreUnavailable,
    StreamChange,
    SubscriptionChange,
)

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["InProcessStore", "SharedMemory"]

logger = logging.getLogger("trio_mcp.store")

#: Control messages waiting for one worker's listener; past it, the newest are lost (the
#: bus delivers at most once, as a Redis client over its output buffer is cut off).
MAX_WAITING = 10_000
#: How long a listener waits to listen again after the store stopped.
_RECONNECT = (0.1, 5.0)


class SharedMemory:
    """A store that runtimes of this process share: ``connect`` is what ServerConfig.store
    takes (``ServerConfig(store=SharedMemory().connect)``, the same one for every worker)."""

    def __init__(self) -> None:
        self.down = False
        self._paused_until = -math.inf
        #: Each listening connection's inbox, by origin.
        self._listeners: dict[str, trio.MemorySendChannel[str]] = {}
        self._clear()

    def _clear(self) -> None:
        #: What the store holds.
        self.data = StoreData()
        #: Task keys the store cannot read (break_task).
        self._broken: set[str] = set()

    def connect(
        self, config: ServerConfig | None = None, *, timeout: float | None = None
    ) -> InProcessStore:
        """A runtime's connection to this store; each call is bounded by ``timeout``
        (default: the configuration's ``store_timeout``, else 1 s)."""
        if timeout is None:
            timeout = 1.0 if config is None else config.store_timeout
        return InProcessStore(self, timeout=timeout)

    # -- failures, for the tests of an unavailable store (TM-STORE-DOWN) ------------------------

    def stop(self) -> None:
        """The store goes down, and what it held is lost (a crash): calls fail, listeners
        lose their place on the control bus until it is back."""
        self.down = True
        self._clear()
        for inbox in self._listeners.values():
            inbox.close()
        self._listeners.clear()

    def start(self) -> None:
        """The store is back, empty."""
        self.down = False

    def pause_writes(self, seconds: float) -> None:
        """Calls that write wait ``seconds`` from now before they are served (as Redis's
        CLIENT PAUSE WRITE): a caller's timeout may run out first."""
        self._paused_until = trio.current_time() + seconds

    def break_task(self, task_id: str) -> None:
        """Make the key of ``task_id`` one the store cannot read (as a Redis key of another
        type): every call that reads it fails (for tests)."""
        self._broken.add(task_id)

    def end_silently(self, session_id: str) -> bool:
        """Delete a session's record with no word on the control bus (a message lost)."""
        return self.data.delete(session_id)

    @property
    def paused_until(self) -> float:
        return self._paused_until

    def broken(self, task_id: str) -> bool:
        return task_id in self._broken

    # -- the control bus, for the connections --------------------------------------------------

    def publish(self, origin: str, message: str) -> None:
        for listener, inbox in list(self._listeners.items()):
            if listener == origin:
                continue  # never back to the worker that published it
            try:
                inbox.send_nowait(message)
            except trio.WouldBlock:
                logger.warning("in-process store: a control message to a slow worker was lost")
            except trio.ClosedResourceError:
                self._listeners.pop(listener, None)

    def listen(self, origin: str) -> trio.MemoryReceiveChannel[str]:
        send, receive = trio.open_memory_channel[str](MAX_WAITING)
        old = self._listeners.get(origin)
        if old is not None:
            old.close()
        self._listeners[origin] = send
        return receive

    def unlisten(self, origin: str, inbox: trio.MemoryReceiveChannel[str]) -> None:
        send = self._listeners.get(origin)
        if send is not None:
            send.close()
            del self._listeners[origin]
        inbox.close()


class InProcessStore:
    """One runtime's connection to a SharedMemory (a SharedStore)."""

    def __init__(self, memory: SharedMemory, *, timeout: float = 1.0) -> None:
        self.memory = memory
        self.timeout = timeout
        self._origin = secrets.token_hex(4)
        # As for Redis: this worker's server request ids start at a random multiple of 2**32.
        self._outbound_base = (secrets.randbelow(2**20) << 32) + 1
        self._running = False
        self._down_log = LogLimiter(interval=10.0)

    @property
    def origin(self) -> str:
        return self._origin

    @property
    def outbound_base(self) -> int:
        return self._outbound_base

    async def run(
        self,
        on_control: Callable[[Control], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self._running = True
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._listen, on_control)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._running = False

    async def _listen(self, on_control: Callable[[Control], None]) -> None:
        """Deliver what other workers publish; listen again, for ever, when the store comes
        back. What is published while this worker is not listening is lost."""
        delay = _RECONNECT[0]
        while True:
            if not self.memory.down:
                inbox = self.memory.listen(self._origin)
                delay = _RECONNECT[0]
                try:
                    async for message in inbox:
                        control = _decode(message)
                        if control is not None:
                            on_control(control)
                finally:
                    self.memory.unlisten(self._origin, inbox)
            await trio.sleep(delay)
            delay = min(delay * 2, _RECONNECT[1])

    async def _call(self, what: str, *, write: bool = True) -> float:
        """Enter one call: a round trip's checkpoint, then the store's time; raises
        StoreUnavailable as a remote store would fail."""
        memory = self.memory
        if not self._running:
            raise StoreUnavailable("the in-process store is not running")
        if memory.down:
            self._failed(what, "the store is down")
        await trio.lowlevel.checkpoint()
        if write and memory.paused_until > trio.current_time():
            with trio.move_on_after(self.timeout):
                await trio.sleep_until(memory.paused_until)
                if not memory.down:
                    return trio.current_time()
            self._failed(what, "timed out")
        if memory.down:
            self._failed(what, "the store is down")
        return trio.current_time()

    def _failed(self, what: str, why: str) -> None:
        tail = self._down_log.tail("store failures")
        if tail is not None:
            logger.warning("in-process store %s failed: %s%s", what, why, tail)
        raise StoreUnavailable(f"in-process store {what}: {why}")

    # -- SessionRecords ---------------------------------------------------------------------------

    async def create(
        self, record: SessionRecord, ttl: float, limits: StoreLimits
    ) -> CreateOutcome:
        now = await self._call("create")
        outcome = self.memory.data.create(record, ttl, limits, now)
        for gone in outcome.evicted:
            # Their holders end them, as after a DELETE (TM-STORE-CONTROL).
            await self.publish(Control(ControlKind.END, gone, "evicted"))
        return outcome

    async def fetch(
        self, session_id: str, *, idle_ttl: float, uninitialized_ttl: float,
        subscriptions_seen: int | None = None,
    ) -> SessionRecord | None:
        now = await self._call("fetch")
        return self.memory.data.fetch(
            session_id, idle_ttl, uninitialized_ttl, subscriptions_seen, now
        )

    async def save(self, session_id: str, state: SharedState, ttl: float) -> bool:
        now = await self._call("save")
        return self.memory.data.save(session_id, state, ttl, now)

    async def subscribe(
        self, session_id: str, uri: str, *, max_subscriptions: int, ttl: float
    ) -> SubscriptionChange:
        now = await self._call("subscribe")
        return self.memory.data.subscribe(session_id, uri, max_subscriptions, True, ttl, now)

    async def unsubscribe(self, session_id: str, uri: str, *, ttl: float) -> SubscriptionChange:
        now = await self._call("unsubscribe")
        return self.memory.data.subscribe(session_id, uri, None, False, ttl, now)

    async def keep_alive(self, session_ids: Iterable[str], ttl: float) -> set[str]:
        ids = list(session_ids)
        if not ids:
            return set()
        now = await self._call("keep_alive")
        return self.memory.data.keep_alive(ids, ttl, now)

    async def delete(self, session_id: str, reason: str) -> None:
        await self._call("delete")
        self.memory.data.delete(session_id)
        await self.publish(Control(ControlKind.END, session_id, reason))

    async def evict(self, session_id: str, idle_after: float) -> bool:
        now = await self._call("evict")
        if not self.memory.data.evict(session_id, idle_after, now):
            return False
        await self.publish(Control(ControlKind.END, session_id, "evicted"))
        return True

    async def counts(self, unit: str) -> tuple[int, int]:
        now = await self._call("counts", write=False)
        return self.memory.data.counts(unit, now)

    # -- ControlBus -------------------------------------------------------------------------------

    async def publish(self, control: Control) -> None:
        await self._call("publish")
        message = json.dumps(
            {"k": control.kind.value, "s": control.session_id, "o": self._origin,
             "p": control.payload}
        )
        self.memory.publish(self._origin, message)

    # -- Directory --------------------------------------------------------------------------------

    async def advertise(self, address: str, ttl: float) -> bool:
        now = await self._call("advertise")
        return self.memory.data.advertise(self._origin, address, ttl, now)

    async def locate(self, origin: str) -> str | None:
        now = await self._call("locate", write=False)
        return self.memory.data.locate(origin, now)

    # -- StreamCopies -----------------------------------------------------------------------------

    async def copy(self, changes: Sequence[StreamChange], ttl: float) -> list[bool]:
        if not changes:
            return []
        now = await self._call("copy")
        return [self.memory.data.copy(self._origin, change, ttl, now) for change in changes]

    async def claim(
        self, session_id: str, origin: str, stream: int, after: int, *, ttl: float
    ) -> Claim:
        now = await self._call("claim")
        return self.memory.data.claim(session_id, origin, stream, after, ttl, now)

    # -- TaskRecords ------------------------------------------------------------------------------

    async def save_task(self, task: StoredTask, ttl: float) -> StoredTask | None:
        now = await self._call("save_task")
        if self.memory.broken(task.task_id):
            self._failed("save_task", "the task's key cannot be read")
        held = self.memory.data.save_task(task, ttl, now)
        return None if held is None else _task_of(task.task_id, held)

    async def load_task(self, task_id: str) -> StoredTask | None:
        await self._call("load_task", write=False)
        if self.memory.broken(task_id):
            self._failed("load_task", "the task's key cannot be read")
        held = self.memory.data.task_json(task_id, trio.current_time())
        return None if held is None else _task_of(task_id, held)


def _task_of(task_id: str, value: str) -> StoredTask | None:
    try:
        raw = json.loads(value)
        return StoredTask(task_id=task_id, owner=str(raw["o"]), task=dict(raw["t"]))
    except (ValueError, KeyError, TypeError):
        logger.warning("task record %s is unreadable: ignored", task_id[:8])
        return None


def _decode(message: str) -> Control | None:
    try:
        raw: JSON = json.loads(message)
        if not isinstance(raw, dict):
            return None
        return Control(ControlKind(raw["k"]), str(raw["s"]), raw.get("p"))
    except (ValueError, KeyError, TypeError):
        logger.warning("in-process store: an unreadable control message was ignored")
        return None
