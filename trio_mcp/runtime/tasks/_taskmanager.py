# The tasks of one runtime (spec/tasks.md): their nursery, their table, their bounds and TTLs.
# A task's run (trio_mcp.runtime.tasks._tasks.TaskRun) asks this for what concerns every task: its
# id, its place in the running and kept pools (TM-TASK-BOUND, TM-SEC-FAIR), its TTL (TK-TTL),
# and the keeping of its changes in a shared store (TM-STORE-TASKS).
from __future__ import annotations

import collections
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

import attrs
import trio

from ...base._ports import App
from ...protocol import JSON, Request
from ...protocol._auth import Principal
from ...protocol._era import ModernCall
from ...protocol._fair import UnitPolicy
from ...protocol._headers import Headers
from ...protocol._tasks import (
    TaskAction,
    TaskSnapshot,
    TaskStatus,
    get_task_result,
    read_task_query,
    task_ack_result,
    task_not_found,
)
from .._memory import MemoryReleaser
from .._pools import Charge, Pool, newest
from .._reqstats import RequestMetrics
from .._stats import counter, gauge
from ._tasks import TASK_FOOTPRINT, Front, TaskRun

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["TaskManager", "TaskStatistics", "TaskStats"]

logger = logging.getLogger("trio_mcp.tasks")


@attrs.frozen
class TaskStatistics:
    """The tasks (TM-BP-COUNTERS), named ``tasks_*``."""

    created: int = counter()
    """Runs published as tasks."""
    answered_at_once: int = counter()
    """Runs that ended (or asked for input) before they became tasks."""
    completed: int = counter()
    failed: int = counter()
    cancelled: int = counter()
    expired: int = counter()
    """Tasks freed at the end of their TTL (those still running were cancelled)."""
    refused: int = counter()
    """Calls that found no room (TM-TASK-BOUND): every running slot taken, and their
    client holding its fair share or more (TM-SEC-FAIR)."""
    preempted: int = counter()
    """Running tasks ended (failed) to make room for a client holding fewer (TM-SEC-FAIR)."""
    evicted: int = counter()
    """Ended tasks deleted before their TTL to make room for a client keeping less
    (TM-SEC-FAIR), or because even their record found no room."""
    withdrawn: int = counter()
    """Tasks whose CreateTaskResult could not reach their client (TM-TASK-WITHDRAW)."""
    results_too_large: int = counter()
    alive: int = gauge()
    running: int = gauge()
    result_bytes: int = gauge()


@attrs.define
class TaskStats:
    """The tasks' counters since the server started (TaskStatistics says what each is)."""

    created: int = 0
    answered_at_once: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    expired: int = 0
    refused: int = 0
    preempted: int = 0
    evicted: int = 0
    withdrawn: int = 0
    results_too_large: int = 0


class TaskManager:
    """The tasks of one runtime: their nursery, their table, their bounds and TTLs."""

    def __init__(
        self,
        app: App,
        config: ServerConfig,
        *,
        on_change: Callable[[TaskSnapshot], object] | None = None,
        releaser: MemoryReleaser | None = None,
        requests: RequestMetrics | None = None,
        origin: str = "",
        keep: Callable[[TaskSnapshot, str], None] | None = None,
        units: UnitPolicy | None = None,
    ) -> None:
        self.app = app
        #: TM-SEC-UNIT: whose share a call takes, when its caller does not say.
        self._units = units if units is not None else UnitPolicy.of(
            ipv4_prefix=config.client_ipv4_prefix,
            ipv6_prefix=config.client_ipv6_prefix,
            trusted_proxies=config.trusted_proxies,
            header=config.client_address_header,
        )
        #: This worker's name among those sharing a store: the start of its task ids
        #: (TM-STORE-TASKS); "" for a server alone.
        self.origin = origin
        #: Told of every change of a published task, with its owner's key, to keep it in a
        #: shared store (TM-STORE-TASKS).
        self._keep = keep
        self.requests = requests
        #: TM-SESS-RELEASE: what expired tasks held counts toward the next heap trim.
        self._releaser = releaser
        self.config = config
        self.stats = TaskStats()
        self._on_change = on_change
        self._nursery: trio.Nursery | None = None
        #: Every run alive: published tasks, and runs still deciding.
        self.runs: dict[str, TaskRun] = {}
        #: TM-TASK-BOUND / TM-SEC-FAIR: the runs whose handler runs (deciding or published),
        #: by client; a full pool takes the newest of the client holding the most.
        self.running: Pool[TaskRun] = Pool(
            "tasks_running", config.max_tasks, evict=self._preempt, pick=newest
        )
        #: TM-TASK-BOUND / TM-SEC-FAIR: the ended tasks kept until their TTL, in bytes (their
        #: result and record), by client, oldest first; a full pool deletes the oldest of the
        #: client keeping the most, or a client's own oldest when it keeps the most.
        self.retained: Pool[TaskRun] = Pool(
            "tasks_retained", config.max_task_results_memory, evict=self._evict_kept,
            replace=_oldest,
        )
        #: Published tasks in order of their TTL's end: one TTL for all, so creation order.
        self._expiry: collections.deque[TaskRun] = collections.deque()
        #: Runs in _expiry forgotten before their TTL (compacted away when they are many).
        self._expiry_dead = 0
        self._expiry_changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The nursery the tasks run in, and the TTLs' end (TK-TTL)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await self._expire_forever()
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    def stop(self) -> None:
        """Shutdown (TM-TASK-SHUTDOWN): every task's work is cancelled now; with the server
        refusing requests, no client could read what they would produce."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _expire_forever(self) -> None:
        while True:
            if not self._expiry:
                await self._expiry_changed.wait()
                self._expiry_changed = trio.Event()
                continue
            head = self._expiry[0]
            await trio.sleep_until(head.deadline)
            now = trio.current_time()
            while self._expiry and self._expiry[0].deadline <= now:
                self._expire(self._expiry.popleft())

    def _expire(self, run: TaskRun) -> None:
        # TK-TTL: nothing of a task outlives its TTL; work still running is cancelled.
        run.scope.cancel()
        if self.runs.get(run.task_id) is run:
            self.stats.expired += 1
            self._forget(run)
        else:
            self._expiry_dead -= 1

    # -- the calls ---------------------------------------------------------------------------

    def start(
        self,
        call: ModernCall,
        *,
        front: Front,
        principal: Principal | None,
        peer: str | None = None,
        unit: str | None = None,
        answers: Mapping[str, JSON],
        publish: bool,
        charge: Charge | None = None,
    ) -> TaskRun | None:
        """Start a call's handler as a run in the tasks' nursery; published at once with
        ``publish``. ``unit`` is its client (TM-SEC-UNIT; without it, the principal's or
        ``peer``'s); ``charge`` what its request is charged, which the run holds until its
        handler ends. None when there is no room (TM-TASK-BOUND) or the server is stopping."""
        if unit is not None:
            owner = unit
        elif principal is not None:
            owner = self._units.of_request(principal.key, None, _NO_HEADERS).key
        else:
            owner = self._units.of_address(peer).key
        if self._nursery is None or not self.running.admit(owner):
            self.stats.refused += 1
            return None
        run = TaskRun(
            self, call, front=front, principal=principal, owner=owner, answers=answers,
            charge=charge, peer=peer,
        )
        if charge is not None:
            charge.hold()
        self.runs[run.task_id] = run
        self.running.add(owner, run)
        if publish:
            run.publish()
        self._nursery.start_soon(run.main, name=f"task {call.request.method}")
        return run

    def published(self, run: TaskRun) -> tuple[TaskSnapshot, float]:
        """``run`` becomes a task: its first snapshot, and when its TTL ends (TK-TTL)."""
        now = time.time()
        ttl_ms = max(1, round(self.config.task_ttl * 1000))
        snapshot = TaskSnapshot(
            task_id=run.task_id,
            status=TaskStatus.WORKING,
            created_at=now,
            updated_at=now,
            ttl_ms=ttl_ms,
            poll_interval_ms=max(1, round(self.config.task_poll_interval * 1000)),
        )
        self._expiry.append(run)
        self._expiry_changed.set()
        self.stats.created += 1
        return snapshot, trio.current_time() + self.config.task_ttl

    def withdraw(self, run: TaskRun) -> None:
        """TM-TASK-WITHDRAW: a published task whose creator never learnt its id: its work is
        cancelled and it is forgotten at once."""
        run.scope.cancel()
        if self.runs.get(run.task_id) is run:
            self.stats.withdrawn += 1
            self._forget(run)

    def discard(self, run: TaskRun) -> None:
        """A run that ended before it was published: it was never a task."""
        if self.runs.get(run.task_id) is run:
            self.stats.answered_at_once += 1
            self._forget(run)

    def stopped(self, run: TaskRun) -> None:
        """A run's handler has ended: its running slot is free at once (TM-TASK-BOUND)."""
        self.running.discard(run)

    def _preempt(self, run: TaskRun) -> None:
        """The running pool took ``run`` for another client (TM-SEC-FAIR)."""
        self.stats.preempted += 1
        run.preempt()

    def _forget(self, run: TaskRun) -> None:
        del self.runs[run.task_id]
        self.running.discard(run)
        self.retained.discard(run)
        held = run.release()
        if run.published:
            if run.deadline > trio.current_time():
                # Its entry in the expiry queue is dead now; the queue is compacted once
                # dead entries outnumber the live tasks, so that churn cannot grow it.
                self._expiry_dead += 1
                if self._expiry_dead > len(self.runs) + 64:
                    self._expiry = collections.deque(
                        r for r in self._expiry if self.runs.get(r.task_id) is r
                    )
                    self._expiry_dead = 0
            if self._releaser is not None:
                # TM-SESS-RELEASE: what the task kept (its record's share included).
                self._releaser.freed(max(held, TASK_FOOTPRINT))

    def holds(self, run: TaskRun) -> bool:
        return self.runs.get(run.task_id) is run

    def hold_result(self, run: TaskRun, size: int) -> bool:
        """Room in the kept pool for ``run``'s result of ``size`` bytes and its record
        (TM-TASK-BOUND, TM-SEC-FAIR); False: it is too large to keep."""
        amount = TASK_FOOTPRINT + size
        if size > self.config.max_task_result_bytes or not self.retained.admit(run.owner, amount):
            self.stats.results_too_large += 1
            return False
        run.kept_with(amount)
        self.retained.add(run.owner, run, amount)
        return True

    def keep_ended(self, run: TaskRun) -> None:
        """``run`` ended (TK-LIFE): kept until its TTL in the kept pool, with its result when
        ``hold_result`` found room for it, else its record alone; a record that finds no room
        either is deleted now (TM-SEC-FAIR)."""
        if run in self.retained or not self.holds(run):
            return
        if not self.retained.admit(run.owner, TASK_FOOTPRINT):
            self.stats.evicted += 1
            self._forget(run)
            return
        run.kept_with(TASK_FOOTPRINT)
        self.retained.add(run.owner, run, TASK_FOOTPRINT)

    def _evict_kept(self, run: TaskRun) -> None:
        """The kept pool deleted ``run`` for another (TM-SEC-FAIR): tasks/get now answers
        that it is unknown, as after its TTL."""
        if self.holds(run):
            self.stats.evicted += 1
            self._forget(run)

    def changed(self, run: TaskRun) -> None:
        status = run.status
        if status is TaskStatus.COMPLETED:
            self.stats.completed += 1
        elif status is TaskStatus.FAILED:
            self.stats.failed += 1
        elif status is TaskStatus.CANCELLED:
            self.stats.cancelled += 1
        if self._on_change is not None and run.snapshot is not None:
            self._on_change(run.snapshot)
        self.kept(run)

    def ended_elsewhere(self, task_id: str, task: Mapping[str, JSON]) -> None:
        """The store holds an end of a task of this worker that another worker wrote
        (TM-STORE-TASKS): the task takes it, if it has not ended here otherwise (logged:
        its clients here and elsewhere have seen two ends)."""
        run = self.runs.get(task_id)
        if run is None or run.snapshot is None or task.get("status") != "failed":
            return
        if not run.ended_elsewhere(task):
            logger.warning(
                "task %s ended %s here, but another worker had declared it failed",
                task_id[:12], run.snapshot.status.value,
            )

    def kept(self, run: TaskRun) -> None:
        """A published task as it is now, for a shared store (TM-STORE-TASKS)."""
        if self._keep is not None and run.snapshot is not None:
            self._keep(run.snapshot, run.principal_key)

    # -- tasks/* ----------------------------------------------------------------------------

    def new_task_id(self) -> str:
        """A fresh task id: 192 random bits, after the name of the worker running it when
        several share a store (``<origin>~<random>``), so that any worker can tell where a
        task runs (TM-STORE-TASKS)."""
        token = secrets.token_urlsafe(24)
        return f"{self.origin}~{token}" if self.origin else token

    def follower(self, principal: Principal | None) -> Callable[[str], bool]:
        """TK-NOTIFY / TK-BIND: which task ids a listener of ``principal`` may follow."""
        return lambda task_id: self.find(task_id, principal) is not None

    def find(self, task_id: str, principal: Principal | None) -> TaskRun | None:
        """TK-BIND: the published task ``task_id`` of this principal; None for any other."""
        run = self.runs.get(task_id)
        key = principal.key if principal is not None else ""
        if run is None or not run.published or run.principal_key != key:
            return None
        return run

    def answer(self, request: Request, principal: Principal | None) -> dict[str, JSON]:
        """The result of a tasks/get, tasks/update or tasks/cancel (after the header and
        capability gates: TK-GATE).

        Raises:
            RemoteProtocolError: -32602 for an unknown id or malformed params.
        """
        query = read_task_query(request)
        run = self.find(query.task_id, principal)
        if run is None or run.snapshot is None:
            raise task_not_found(request)
        if query.action is TaskAction.GET:
            return get_task_result(run.snapshot)
        if query.action is TaskAction.CANCEL:
            run.cancel()
        else:
            assert query.answers is not None
            run.update(query.answers, request)
        # TK-ACK: an update and a cancel are acknowledged with an empty complete result.
        return task_ack_result()

    def time_left(self, task_id: str) -> float | None:
        """How long published task ``task_id`` has left to live (TK-TTL); None when it is
        not published, or gone (TM-STORE-TASKS)."""
        run = self.runs.get(task_id)
        if run is None or not run.published:
            return None
        return run.deadline - trio.current_time()

    def unended(self) -> list[str]:
        """The published tasks that have not ended (TM-STORE-TASKS)."""
        return [
            run.task_id for run in self.runs.values()
            if run.status is not None and not run.status.terminal
        ]

    def statistics(self) -> TaskStatistics:
        return TaskStatistics(
            **attrs.asdict(self.stats),
            alive=len(self.runs),
            running=len(self.running),
            result_bytes=self.retained.total,
        )


def _oldest(runs: dict[TaskRun, None]) -> TaskRun | None:
    return next(iter(runs), None)


_NO_HEADERS: Final = Headers([])
