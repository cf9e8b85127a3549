# Tasks across workers (spec/workers.md, TM-STORE-TASKS): a task runs in the worker that
# created it, and its id names that worker (``<origin>~<random>``). Each change of a published
# task is written to the shared store, in order, so that when its worker is gone another can
# still answer for it; a tasks/* request for another worker's task is relayed to that worker,
# once, after the gates every tasks/* request meets (TM-TASK-ORDER).
from __future__ import annotations

import collections
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...protocol._logtext import LogLimiter
from ...protocol._tasks import (
    TASK_METHODS,
    TaskAction,
    TaskQuery,
    TaskSnapshot,
    holder_unreachable,
    is_terminal,
    lost_task,
    read_task_query,
    remaining_ttl,
    stored_task_result,
    task_ack_result,
    task_lost,
    task_notification,
    task_origin,
)
from ...protocol._transport import HttpRequest
from ._store import SharedStore, StoredTask, StoreUnavailable

if TYPE_CHECKING:
    from ...protocol._era import ModernCall
    from ..backpressure._responder import Responder
    from ..modern._modern import ModernServer
    from ..tasks._taskmanager import TaskManager

__all__ = ["ClusterTasks"]

logger = logging.getLogger("trio_mcp.cluster")

#: Passes a request to another worker (Cluster.relay_to): None once it answered, else where it
#: was thought to listen ("" when the store no longer has its address).
RelayTo = Callable[[str, HttpRequest, "Responder"], Awaitable[str | None]]


class ClusterTasks:
    """This worker's tasks, as the other workers sharing ``store`` see them."""

    def __init__(
        self, store: SharedStore, *, relay_to: RelayTo, stored: Callable[[Any], Awaitable[Any]]
    ) -> None:
        self._store = store
        self._relay_to = relay_to
        #: Awaits a store call, a 503 when it does not answer (Cluster.stored).
        self._stored = stored
        #: Task changes on their way to the store, in order.
        self._kept: collections.deque[StoredTask] = collections.deque()
        self._wake = trio.Event()
        self._log = LogLimiter(interval=10.0)
        self._tasks: TaskManager | None = None
        self._modern: ModernServer | None = None

    def keep(self, snapshot: TaskSnapshot, owner: str) -> None:
        """A published task changed; keep it in the shared store."""
        self._kept.append(StoredTask(
            task_id=snapshot.task_id, owner=owner, task=task_notification(snapshot)
        ))
        self._wake.set()

    async def run(self, tasks: TaskManager, modern: ModernServer) -> None:
        """Write task changes to the shared store one at a time, in the order they happened,
        each for the rest of its task's time to live. One that cannot be written is dropped
        with a log line: the task lives on here, and only a worker's death reads the store.
        One the store refuses, because it holds an end another worker wrote when this one
        could not be reached for longer than its address lives, ends the task here the same
        way (TK-STATES)."""
        self._tasks, self._modern = tasks, modern
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self._kept:
                kept = self._kept.popleft()
                ttl = tasks.time_left(kept.task_id)
                if ttl is None or ttl <= 0:
                    continue  # expired or withdrawn meanwhile
                try:
                    held = await self._store.save_task(kept, ttl)
                except StoreUnavailable:
                    tail = self._log.tail("task changes")
                    if tail is not None:
                        logger.warning("a task's change could not be kept in the store%s", tail)
                    continue
                if held is not None:
                    tasks.ended_elsewhere(kept.task_id, held.task)

    async def reconcile(self) -> None:
        """This worker's address had lapsed in the store, so another worker may have found
        it gone and declared its running tasks failed there. Each task the store holds an
        end of ends here the same way, its work cancelled (TK-STATES)."""
        tasks = self._tasks
        if tasks is None:
            return
        for task_id in tasks.unended():
            try:
                held = await self._store.load_task(task_id)
            except StoreUnavailable:
                return  # the next lapse, or the task's next change, tries again
            if held is not None and is_terminal(held.task):
                tasks.ended_elsewhere(task_id, held.task)

    async def relay(self, call: ModernCall, request: HttpRequest, responder: Responder) -> bool:
        """A tasks/* request for a task another worker runs goes to that worker, once,
        after the gates every tasks/* request meets (TM-TASK-ORDER); True when it was
        answered so, or here for a worker that cannot be reached."""
        if call.request.method not in TASK_METHODS:
            return False
        task_id = (call.request.params or {}).get("taskId")
        origin = task_origin(task_id) if isinstance(task_id, str) else ""
        if origin in ("", self._store.origin):
            return False
        assert self._modern is not None
        # TK-GATE / TM-TASK-ORDER: the extension (and whether tasks are served at all) is
        # checked here as at the worker running the task, before any lookup.
        self._modern.check(call, request.headers)
        query = read_task_query(call.request)
        where = await self._relay_to(origin, request, responder)
        if where is None:
            return True
        # Only an address the store no longer has says the worker stopped (it renews it
        # while it runs); one that is there but does not answer may be a worker briefly out
        # of reach, or a stale address reached by a relayed request, whose tasks live on.
        gone = where == "" and not request.relayed
        await self._answer_unreached(call, query, request, responder, gone=gone)
        return True

    async def _answer_unreached(
        self, call: ModernCall, query: TaskQuery, request: HttpRequest, responder: Responder,
        *, gone: bool,
    ) -> None:
        """The worker running the task ``query`` names was not reached. An end the store holds
        is final (TK-STATES), and answered as it is. Otherwise, a worker that is ``gone``
        took the task's work with it: failed, and kept so for the next worker asked, unless
        the store holds an end by then; the store without the task (or with another
        principal's), lost. A worker not known to be gone may still run the task, and move
        it: the request is to be retried (503, -31002), nothing said of the task."""
        assert self._modern is not None
        stored: StoredTask | None = await self._stored(self._store.load_task(query.task_id))
        principal = request.principal.key if request.principal is not None else ""
        mine = stored is not None and stored.owner == principal
        if stored is None or not mine or not is_terminal(stored.task):
            if not gone:
                raise holder_unreachable(call.request, query.task_id)
            if stored is None or not mine:
                raise task_lost(call.request, query.task_id)
            failed = attrs.evolve(stored, task=lost_task(stored.task, time.time()))
            ttl = remaining_ttl(stored.task, time.time())
            held = await self._stored(self._store.save_task(failed, ttl)) if ttl > 0 else None
            stored = held or failed
        if query.action is TaskAction.GET:
            await self._modern.reply_complete(call, stored_task_result(stored.task), responder)
            return
        # TK-ACK: an update or a cancel of an ended task changes nothing, and is acked.
        await self._modern.reply_complete(call, task_ack_result(), responder)
