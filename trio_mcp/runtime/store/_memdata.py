# What an in-process shared store holds (trio_mcp.runtime.store._memstore), and how each call of the
# store contract changes it: session records counted against the store's caps and expiring
# (TM-STORE-BOUND), their subscriptions (TM-STORE-SUBS), request streams' copies and their
# claims (TM-STORE-STREAMS), relay addresses and tasks (TM-STORE-TASKS). The same steps as
# the Redis store's scripts (trio_mcp.runtime.store._redis_lua), each atomic here because it never
# awaits; time is passed in (the store's clock: trio's).
from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from typing import Any

import attrs

from ...protocol import RequestId
from ._store import (
    Claim,
    ClaimKind,
    CreateKind,
    CreateOutcome,
    SessionRecord,
    SharedState,
    StoredEvent,
    StoredTask,
    StoreLimits,
    StreamChange,
    SubscriptionChange,
)

__all__ = ["MAX_EVICT", "StoreData"]

#: The most records one creation deletes to make room (TM-STORE-BOUND), as Redis's script.
MAX_EVICT = 8


def _copied(value: Any) -> Any:
    """``value`` as a store keeps it: JSON, and nothing shared with the caller."""
    return json.loads(json.dumps(value))


@attrs.define(eq=False)
class _Record:
    record: SessionRecord
    """As created, its subscriptions and their version left to the fields below."""
    at: float
    """When it was last renewed."""
    expires: float
    initialized: bool = False
    log_level: str | None = None
    subscriptions: set[str] = attrs.Factory(set)
    version: int = 0
    copies: set[tuple[str, str, int]] = attrs.Factory(set)
    """The keys of its streams' copies (deleted with it)."""


@attrs.define(eq=False)
class _Copy:
    expires: float
    events: list[StoredEvent] = attrs.Factory(list)
    last_id: int = -1
    """The newest seq ever added (a seq is added once, in order, as a Redis stream's ids)."""
    requests: tuple[RequestId, ...] | None = None
    answered: dict[RequestId, int] = attrs.Factory(dict)
    lost: int = -1
    ended: bool = False


class StoreData:
    """Everything an in-process store holds."""

    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}
        #: Session ids by last renewal, oldest first: in all, and by unit.
        self._used: dict[str, None] = {}
        self._used_by_unit: dict[str, dict[str, None]] = {}
        #: (expiry, id) for each renewal; a stale one is skipped when met.
        self._expiry: list[tuple[float, str]] = []
        self._copies: dict[tuple[str, str, int], _Copy] = {}
        self._relays: dict[str, tuple[str, float]] = {}
        self._tasks: dict[str, tuple[str, float]] = {}

    # -- what it holds, for tests -------------------------------------------------------------

    def footprint(self) -> int:
        """About how many bytes the store holds: its records, subscriptions, copies and
        tasks, as their JSON."""
        size = 0
        for rec in self._records.values():
            size += len(json.dumps(attrs.asdict(rec.record), default=list))
            size += sum(len(u) for u in rec.subscriptions)
        for copy in self._copies.values():
            size += sum(len(e.data) + 16 for e in copy.events)
        size += sum(len(value) for value, _ in self._tasks.values())
        return size

    def holds_session(self, session_id: str, now: float) -> bool:
        return self._live(session_id, now) is not None

    def subscriptions_of(self, session_id: str, now: float) -> frozenset[str]:
        rec = self._live(session_id, now)
        return frozenset() if rec is None else frozenset(rec.subscriptions)

    def copy_lengths(self, now: float) -> list[int]:
        """How many events each live stream copy holds."""
        return [len(c.events) for c in self._copies.values() if c.expires > now]

    def task_json(self, task_id: str, now: float) -> str | None:
        held = self._tasks.get(task_id)
        return None if held is None or held[1] <= now else held[0]

    def forget_relay(self, origin: str) -> bool:
        """Drop a worker's relay address, as if it had lapsed; whether it was there."""
        return self._relays.pop(origin, None) is not None

    # -- the records (SessionRecords) -----------------------------------------------------------

    def _live(self, session_id: str, now: float) -> _Record | None:
        rec = self._records.get(session_id)
        if rec is not None and rec.expires <= now:
            self._drop(session_id)
            return None
        return rec

    def _expire(self, now: float) -> None:
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            at, session_id = heapq.heappop(expiry)
            rec = self._records.get(session_id)
            if rec is not None and rec.expires == at:
                self._drop(session_id)
        if len(expiry) > 4 * len(self._records) + 64:
            self._expiry = [(r.expires, sid) for sid, r in self._records.items()]
            heapq.heapify(self._expiry)

    def _renew(self, session_id: str, rec: _Record, ttl: float, now: float) -> None:
        rec.at = now
        rec.expires = now + ttl
        heapq.heappush(self._expiry, (rec.expires, session_id))
        self._used.pop(session_id, None)
        self._used[session_id] = None
        unit = self._used_by_unit.setdefault(rec.record.unit, {})
        unit.pop(session_id, None)
        unit[session_id] = None

    def _drop(self, session_id: str) -> bool:
        rec = self._records.pop(session_id, None)
        if rec is None:
            return False
        self._used.pop(session_id, None)
        unit = self._used_by_unit.get(rec.record.unit)
        if unit is not None:
            unit.pop(session_id, None)
            if not unit:
                del self._used_by_unit[rec.record.unit]
        for key in rec.copies:
            self._copies.pop(key, None)
        return True

    def _make_room(
        self, used: dict[str, None], cap: int | None, idle_before: float, evicted: list[str]
    ) -> bool:
        if cap is None:
            return True
        while len(used) >= cap:
            if len(evicted) >= MAX_EVICT:
                return False
            oldest = next(iter(used))
            if self._records[oldest].at > idle_before:
                return False
            self._drop(oldest)
            evicted.append(oldest)
        return True

    def create(
        self, record: SessionRecord, ttl: float, limits: StoreLimits, now: float
    ) -> CreateOutcome:
        self._expire(now)
        evicted: list[str] = []
        idle_before = now - limits.idle_after
        unit = self._used_by_unit.get(record.unit, {})
        if not self._make_room(unit, limits.max_per_unit, idle_before, evicted):
            return CreateOutcome(CreateKind.UNIT_FULL, tuple(evicted))
        if not self._make_room(self._used, limits.max_sessions, idle_before, evicted):
            return CreateOutcome(CreateKind.STORE_FULL, tuple(evicted))
        kept = attrs.evolve(
            record,
            client_info=_copied(record.client_info),
            client_capabilities=_copied(record.client_capabilities),
            server_capabilities=_copied(record.server_capabilities),
            subscriptions=frozenset(),
            subscriptions_version=0,
        )
        self._drop(record.id)
        rec = _Record(
            kept, at=now, expires=now + ttl, initialized=record.initialized,
            log_level=record.log_level,
        )
        self._records[record.id] = rec
        self._renew(record.id, rec, ttl, now)
        return CreateOutcome(CreateKind.CREATED, tuple(evicted))

    def fetch(
        self, session_id: str, idle_ttl: float, uninitialized_ttl: float,
        subscriptions_seen: int | None, now: float,
    ) -> SessionRecord | None:
        rec = self._live(session_id, now)
        if rec is None:
            return None
        self._renew(session_id, rec, idle_ttl if rec.initialized else uninitialized_ttl, now)
        subscriptions = None if subscriptions_seen == rec.version else frozenset(
            rec.subscriptions
        )
        return attrs.evolve(
            rec.record,
            client_info=_copied(rec.record.client_info),
            client_capabilities=_copied(rec.record.client_capabilities),
            server_capabilities=_copied(rec.record.server_capabilities),
            initialized=rec.initialized,
            log_level=rec.log_level,
            subscriptions=subscriptions,
            subscriptions_version=rec.version,
        )

    def save(self, session_id: str, state: SharedState, ttl: float, now: float) -> bool:
        rec = self._live(session_id, now)
        if rec is None:
            return False
        rec.initialized = state.initialized
        rec.log_level = state.log_level
        self._renew(session_id, rec, ttl, now)
        return True

    def subscribe(
        self, session_id: str, uri: str, max_subscriptions: int | None, added: bool, ttl: float,
        now: float,
    ) -> SubscriptionChange:
        rec = self._live(session_id, now)
        if rec is None:
            return SubscriptionChange(changed=False, version=0, gone=True)
        if added == (uri in rec.subscriptions):
            return SubscriptionChange(changed=False, version=rec.version)
        if added and max_subscriptions is not None and len(rec.subscriptions) >= max_subscriptions:
            return SubscriptionChange(changed=False, version=rec.version, full=True)
        if added:
            rec.subscriptions.add(uri)
        else:
            rec.subscriptions.discard(uri)
        rec.version += 1
        self._renew(session_id, rec, ttl, now)
        return SubscriptionChange(changed=True, version=rec.version)

    def keep_alive(self, session_ids: Iterable[str], ttl: float, now: float) -> set[str]:
        gone = set()
        for session_id in session_ids:
            rec = self._live(session_id, now)
            if rec is None:
                gone.add(session_id)
            else:
                self._renew(session_id, rec, ttl, now)
        return gone

    def evict(self, session_id: str, idle_after: float, now: float) -> bool:
        rec = self._live(session_id, now)
        return rec is not None and now - rec.at >= idle_after and self._drop(session_id)

    def delete(self, session_id: str) -> bool:
        """Drop everything of a session: its record, subscriptions, copies and counts."""
        return self._drop(session_id)

    def counts(self, unit: str, now: float) -> tuple[int, int]:
        self._expire(now)
        return len(self._used), len(self._used_by_unit.get(unit, ()))

    # -- the other jobs -------------------------------------------------------------------------

    def copy(self, origin: str, change: StreamChange, ttl: float, now: float) -> bool:
        rec = self._live(change.session_id, now)
        key = (change.session_id, origin, change.stream)
        copy = self._copies.get(key)
        if copy is not None and copy.expires <= now:
            del self._copies[key]
            copy = None
        if copy is not None and copy.ended:
            return False
        if rec is None:
            # TM-STORE-BOUND: nothing is copied of a session that has ended.
            return False
        if copy is None:
            copy = self._copies[key] = _Copy(expires=now + ttl)
            rec.copies.add(key)
        if copy.requests is None and change.requests:
            copy.requests = change.requests
        if change.seq is not None:
            if change.seq > copy.last_id:
                copy.events.append(StoredEvent(seq=change.seq, data=change.data))
                copy.last_id = change.seq
            if change.answers is not None:
                copy.answered[change.answers] = change.seq
            while copy.events and copy.events[0].seq < change.first_kept:
                del copy.events[0]
        copy.lost = max(copy.lost, change.lost)
        copy.expires = max(copy.expires, now + ttl)
        return True

    def claim(
        self, session_id: str, origin: str, stream: int, after: int, ttl: float, now: float
    ) -> Claim:
        key = (session_id, origin, stream)
        copy = self._copies.get(key)
        if copy is None or copy.expires <= now:
            self._copies.pop(key, None)
            return Claim(ClaimKind.UNKNOWN)
        requests = copy.requests or ()
        if after < copy.lost:
            return Claim(
                ClaimKind.GAP, requests=requests, answered=dict(copy.answered), lost=copy.lost
            )
        if not copy.ended:
            copy.ended = True
            seq = max(after, copy.events[-1].seq if copy.events else after)
            for rid in requests:
                if rid not in copy.answered:
                    seq += 1
                    copy.events.append(StoredEvent(seq=seq, unanswered=rid))
                    copy.answered[rid] = seq
            copy.last_id = max(copy.last_id, seq)
            copy.expires = now + ttl
        return Claim(
            ClaimKind.EVENTS, requests=requests, answered=dict(copy.answered),
            events=tuple(e for e in copy.events if e.seq > after), lost=copy.lost,
        )

    def advertise(self, origin: str, address: str, ttl: float, now: float) -> bool:
        held = self._relays.get(origin)
        self._relays[origin] = (address, now + ttl)
        return held is None or held[1] <= now

    def locate(self, origin: str, now: float) -> str | None:
        held = self._relays.get(origin)
        return None if held is None or held[1] <= now else held[0]

    def save_task(self, task: StoredTask, ttl: float, now: float) -> str | None:
        """The end the store holds (as kept), or None once ``task`` is kept."""
        old = self.task_json(task.task_id, now)
        if old is not None:
            try:
                kept = json.loads(old)["t"]["status"]
            except (ValueError, KeyError, TypeError):
                kept = None
            if kept in ("completed", "failed", "cancelled"):
                return old
        value = json.dumps({"o": task.owner, "t": task.task})
        self._tasks[task.task_id] = (value, now + ttl)
        return None
