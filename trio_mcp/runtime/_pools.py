# The server's pools under the one admission rule (TM-SEC-FAIR), and the byte budgets of what
# requests hold (TM-SEC-MEMORY). protocol._fair decides; these keep the items and carry the
# decisions out: which item of the unit holding the most is given up, and how.
from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import attrs
import trio

from ..base._config import DECODE_ON_LOOP
from ..protocol import JSON, ErrorCode, RemoteProtocolError
from ..protocol._fair import FairShare
from ..protocol._footprint import body_cost_steps, post_cost, requests_in
from ..protocol._jsonrpc import request_id_of
from ..protocol._transport import HttpRequest, read_post_body
from ._memory import MemoryReleaser
from ._stats import counter, gauge

__all__ = [
    "Charge",
    "Ledger",
    "LedgerStatistics",
    "Meter",
    "Pool",
    "PoolStatistics",
    "PoolStats",
    "handler_pool",
    "newest",
    "pool_busy",
    "preempted",
]

T = TypeVar("T")

#: The smallest release of a charge told to the memory releaser (TM-SESS-RELEASE): a small
#: request's memory lies in the allocator's free lists, which the next requests take again,
#: and telling each would have the releaser collect and trim every loop period under load.
#: A large one (a megabyte argument, a listen's long filter) is what stays resident.
RELEASE_WORTH = 64 * 1024
#: TM-SEC-DECODE: a large body's pricing walks its first PRICE_AT_ONCE values at once (about
#: 60 ms: a batch of 20,000 notifications, 100,000 values, is priced without a pause), then
#: lets others run after every PRICE_STEP (about 3 ms).
PRICE_AT_ONCE = 200_000
PRICE_STEP = 10_000


@attrs.frozen
class PoolStatistics:
    """What a pool refused and evicted since the server started (TM-BP-COUNTERS), named
    after the pool (``streams_refused``)."""

    refused: int = counter()
    """Requests for a slot refused: the pool was full and the asker over its share."""
    evicted: int = counter()
    """Items taken from the unit holding the most, for a unit below its share."""

    def __add__(self, other: PoolStatistics) -> PoolStatistics:
        return PoolStatistics(self.refused + other.refused, self.evicted + other.evicted)


@attrs.frozen
class LedgerStatistics:
    """What requests hold while they are served (TM-SEC-MEMORY), named ``request_memory_*``."""

    held: int = gauge()
    clients: int = gauge()
    refused: int = counter()
    """Requests refused for the server's budget."""
    per_client_refused: int = counter()
    per_session_refused: int = counter()


class PoolStats:
    """What a pool refused and evicted since the server started (its own counters)."""

    __slots__ = ("evicted", "refused", "replaced")

    def __init__(self) -> None:
        self.refused = 0
        """Requests for a slot refused: the pool was full and the asker over its share."""
        self.evicted = 0
        """Items taken from the unit holding the most, for a unit below its share."""
        self.replaced = 0
        """Items a unit at its share gave up for a new one of its own (sessions only)."""


class Pool(Generic[T]):
    """One pool of ``capacity`` held by units (``Unit.key``), under max-min fairness: slots
    (each item holds one) or bytes (each item holds its ``amount``).

    ``admit`` makes room for one more item of a unit, or says no; ``add``, ``discard`` and
    ``touch`` keep the items. Each unit's items are kept in order: arrival order, and with
    ``touch`` least recently used first. When room must be taken from a unit, ``pick`` chooses
    which of its items goes (default: the first in that order) and ``evict`` ends it; the item
    leaves the pool at once, whatever ``evict`` does after. ``replace`` lets a unit over its
    share give up items of its own for the new one (None: it is refused).

    Costs: ``add``, ``discard``, ``touch`` O(1) (O(log n) at a unit's new high); ``admit``
    O(log n) amortized, n the units holding items, for each item taken, plus what ``pick``
    looks at.
    """

    def __init__(
        self,
        name: str,
        capacity: int,
        *,
        evict: Callable[[T], object],
        pick: Callable[[dict[T, None]], T] | None = None,
        replace: Callable[[dict[T, None]], T | None] | None = None,
    ) -> None:
        self.name = name
        self.share = FairShare(capacity)
        self.stats = PoolStats()
        self._evict = evict
        self._pick = pick
        self._replace = replace
        #: Each unit's items, in order (dicts keep insertion order; a touch moves to the end).
        self._items: dict[str, dict[T, None]] = {}
        #: Each item's unit and amount.
        self._held: dict[T, tuple[str, int]] = {}

    @property
    def capacity(self) -> int:
        return self.share.capacity

    @property
    def total(self) -> int:
        return self.share.total

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, item: object) -> bool:
        return item in self._held

    def items_of(self, unit: str) -> list[T]:
        return list(self._items.get(unit, ()))

    def held(self, unit: str) -> int:
        return self.share.held(unit)

    def admit(self, unit: str, amount: int = 1) -> bool:
        """Make room for ``amount`` more of ``unit``: True when it may be added now (items of
        the units holding the most, or with ``replace`` of its own, were ended for it); False
        when the pool is full and ``unit`` holds its fair share or more."""
        share = self.share
        if share.total + amount <= share.capacity:
            return True
        if share.can_take(unit, amount):
            while share.total + amount > share.capacity:
                victim = share.victim(unit, amount)
                if victim is None:  # pragma: no cover - can_take said there was room
                    break
                items = self._items[victim]
                item = next(iter(items)) if self._pick is None else self._pick(items)
                self.stats.evicted += 1
                self._end(item)
            else:
                return True
        if self._replace is not None and share.held(unit) + share.capacity >= share.total + amount:
            while share.total + amount > share.capacity and unit in self._items:
                own = self._replace(self._items[unit])
                if own is None:
                    break
                self.stats.replaced += 1
                self._end(own)
            if share.total + amount <= share.capacity:
                return True
        self.stats.refused += 1
        return False

    def _end(self, item: T) -> None:
        self.discard(item)
        self._evict(item)

    def add(self, unit: str, item: T, amount: int = 1) -> None:
        if item in self._held:
            return
        self._held[item] = (unit, amount)
        self._items.setdefault(unit, {})[item] = None
        self.share.add(unit, amount)

    def grow(self, item: T, amount: int) -> None:
        """``item`` holds ``amount`` more (a pool of bytes: a body still arriving), once
        ``admit`` has made room for them."""
        unit, held = self._held[item]
        self._held[item] = (unit, held + amount)
        self.share.add(unit, amount)

    def discard(self, item: T) -> int:
        """Take ``item`` out; what it held (0 when it was not in)."""
        held = self._held.pop(item, None)
        if held is None:
            return 0
        unit, amount = held
        items = self._items[unit]
        del items[item]
        if not items:
            del self._items[unit]
        self.share.remove(unit, amount)
        return amount

    def touch(self, item: T) -> None:
        """``item`` was used: last of its unit's to go."""
        held = self._held.get(item)
        if held is not None:
            items = self._items[held[0]]
            del items[item]
            items[item] = None

    def statistics(self) -> PoolStatistics:
        return PoolStatistics(refused=self.stats.refused, evicted=self.stats.evicted)


def newest(items: dict[T, None]) -> T:
    """The item of a unit a pool takes: its newest, which has done least."""
    return next(reversed(items))


class Preemptible(Protocol):
    def preempt(self) -> None:
        """End at once: the pool gave this item's room to another client (TM-SEC-FAIR)."""


def handler_pool(capacity: int) -> Pool[Preemptible]:
    """TM-SEC-FAIR: the handlers running at once, both eras (``max_handlers``); a full pool
    ends the newest handler of the client holding the most (its ``preempt``)."""
    return Pool("handlers", capacity, evict=lambda item: item.preempt(), pick=newest)


def preempted(what: str) -> tuple[int, str, dict[str, str]]:
    """The error code, message and data of a request a full pool ended for another client
    (TM-SEC-FAIR): the request may be tried again."""
    return (
        ErrorCode.SERVER_BUSY,
        f"Service Unavailable: the server's {what} were all in use, and this client held "
        "more than its fair share of them: its newest was ended for another client; retry "
        "later.",
        {"pool": what},
    )


def pool_busy(what: str, *, retry_after: int = 1, request_id: object = None) -> RemoteProtocolError:
    """The refusal of a unit over its fair share of a full pool (TM-SEC-FAIR): 503, with
    ``Retry-After``, and -31002 naming the pool."""
    return RemoteProtocolError(
        f"Service Unavailable: the server's {what} are all in use, and this client holds "
        "its fair share of them or more; retry later.",
        code=ErrorCode.SERVER_BUSY,
        http_status=503,
        headers=(("retry-after", str(retry_after)),),
        data={"pool": what},
        request_id=request_id,  # type: ignore[arg-type]
    )


class Meter:
    """Bytes one session holds in requests in flight (TM-SEC-MEMORY); its own object, which
    the ledger adds to and takes from."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = 0

    def add(self, nbytes: int) -> None:
        self.held += nbytes

    def take(self, nbytes: int) -> None:
        self.held -= nbytes


class Ledger:
    """The byte budgets of what requests hold while they are served (TM-SEC-MEMORY): per
    session, per unit and for the whole server. Refuse-only: what is accepted is kept until
    it is done with, and the release of each charge is told to the memory releaser
    (TM-SESS-RELEASE)."""

    def __init__(
        self,
        *,
        server: int,
        per_client: int,
        per_session: int,
        releaser: MemoryReleaser | None = None,
        enabled: bool = True,
    ) -> None:
        self.server = server
        self.per_client = per_client
        self.per_session = per_session
        self.enabled = enabled
        self.held = 0
        self.units: dict[str, int] = {}
        self._releaser = releaser
        #: TM-SEC-DECODE: one large body decoded and priced at a time.
        self._decoding = trio.Lock()
        self.refused: dict[str, int] = {
            "request_memory": 0,
            "request_memory_per_client": 0,
            "request_memory_per_session": 0,
        }

    def room(self, unit: str, meter: Meter | None = None) -> int:
        """The most a new charge of ``unit`` (in the session of ``meter``) may take."""
        room = min(self.server - self.held, self.per_client - self.units.get(unit, 0))
        if meter is not None:
            room = min(room, self.per_session - meter.held)
        return room

    def check_body(self, unit: str, nbytes: int) -> None:
        """Refuse, before it is decoded, a body whose bytes alone pass the room ``unit`` has
        left: its charge would be refused anyway, once its text and values had been built.

        Raises:
            RemoteProtocolError: 503, -31002 and ``Retry-After``, naming the budget.
        """
        if self.enabled:
            self._check(unit, nbytes, None)

    def charge(
        self, unit: str, nbytes: int, *, raw: int = 0, request_id: object = None
    ) -> Charge | None:
        """Charge ``nbytes`` (``raw`` of them the body's bytes, which the exchange alone
        holds) to ``unit`` and the server; None when accounting is off.

        Raises:
            RemoteProtocolError: 503, -31002 and ``Retry-After``, naming the budget.
        """
        if not self.enabled:
            return None
        self._take(unit, nbytes, request_id)
        return Charge(self, unit, nbytes, raw)

    def charge_post(
        self, raw: bytes, body: JSON, unit: str, *, request_id: object = None
    ) -> Charge | None:
        """Charge a POST of ``raw`` bytes that decoded to ``body``: the body, what it
        decoded to and the handlers its requests start (protocol._footprint.post_cost), to
        ``unit`` and the server; None when accounting is off (raises RemoteProtocolError
        503 naming the budget)."""
        if not self.enabled:
            return None
        cost = post_cost(raw, body, limit=self.room(unit))
        return self.charge(unit, cost, raw=len(raw), request_id=request_id)

    async def decode_post(
        self, request: HttpRequest, unit: str, *, max_body_bytes: int
    ) -> tuple[JSON, Charge | None]:
        """Decode a POST's body (``read_post_body``) and charge it to ``unit`` as
        ``charge_post`` does. A body of more than ``DECODE_ON_LOOP`` bytes is priced with a
        checkpoint after its first ``PRICE_AT_ONCE`` values and every ``PRICE_STEP`` more,
        one such body at a time, charged before the next is decoded (TM-SEC-DECODE): priced
        at once, it would hold every other request for as long as its walk takes.

        Raises:
            RemoteProtocolError: the body's own error, or 503 naming the budget.
        """
        raw = request.body
        if len(raw) <= DECODE_ON_LOOP:
            body = read_post_body(request, max_body_bytes=max_body_bytes)
            return body, self.charge_post(raw, body, unit, request_id=request_id_of(body))
        async with self._decoding:
            body = read_post_body(request, max_body_bytes=max_body_bytes)
            if not self.enabled:
                return body, None
            steps = body_cost_steps(
                raw, body, requests=requests_in(body), limit=self.room(unit), step=PRICE_STEP,
                first=PRICE_AT_ONCE,
            )
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    cost: int = done.value
                    break
                await trio.lowlevel.checkpoint()
            self._take(unit, cost, request_id_of(body))
            return body, Charge(self, unit, cost, len(raw))

    def _check(self, unit: str, nbytes: int, request_id: object) -> None:
        """Refuse ``nbytes`` more for ``unit`` if they would pass its budget or the server's."""
        held = self.units.get(unit, 0)
        if held + nbytes > self.per_client:
            self._refuse("request_memory_per_client", self.per_client, held, nbytes, request_id)
        if self.held + nbytes > self.server:
            self._refuse("request_memory", self.server, self.held, nbytes, request_id)

    def _take(self, unit: str, nbytes: int, request_id: object) -> None:
        self._check(unit, nbytes, request_id)
        self.units[unit] = self.units.get(unit, 0) + nbytes
        self.held += nbytes

    def _refuse(
        self, budget: str, limit: int, held: int, asked: int, request_id: object
    ) -> None:
        self.refused[budget] += 1
        whose = {
            "request_memory": "the server's",
            "request_memory_per_client": "this client's",
            "request_memory_per_session": "this session's",
        }[budget]
        raise RemoteProtocolError(
            f"Service Unavailable: {whose} memory for requests in flight ({budget}, "
            f"{limit} bytes) cannot hold this one ({asked} bytes) now; retry when its "
            "requests have ended.",
            code=ErrorCode.SERVER_BUSY,
            http_status=503,
            headers=(("retry-after", "1"),),
            data={"budget": budget, "limit": limit, "held": held, "asked": asked},
            request_id=request_id,  # type: ignore[arg-type]
        )

    def _release(self, unit: str, nbytes: int) -> None:
        self.held -= nbytes
        left = self.units[unit] - nbytes
        if left:
            self.units[unit] = left
        else:
            del self.units[unit]
        if self._releaser is not None and nbytes >= RELEASE_WORTH:
            self._releaser.freed(nbytes)

    def statistics(self) -> LedgerStatistics:
        refused = self.refused
        return LedgerStatistics(
            held=self.held,
            clients=len(self.units),
            refused=refused["request_memory"],
            per_client_refused=refused["request_memory_per_client"],
            per_session_refused=refused["request_memory_per_session"],
        )


class Charge:
    """One request's charge: held by its exchange and by each handler it started; the body's
    bytes go back when the exchange ends, the rest when the last holder lets go."""

    __slots__ = ("_holders", "_ledger", "_meter", "_raw", "nbytes", "unit")

    def __init__(self, ledger: Ledger, unit: str, nbytes: int, raw: int) -> None:
        self._ledger = ledger
        self.unit = unit
        self.nbytes = nbytes
        self._raw = raw
        self._meter: Meter | None = None
        #: The exchange, to start with.
        self._holders = 1

    def attach(self, meter: Meter, request_id: object = None) -> None:
        """Charge the session of ``meter`` too (raises RemoteProtocolError past its budget,
        having charged nothing to it)."""
        ledger = self._ledger
        if meter.held + self.nbytes > ledger.per_session:
            ledger._refuse(
                "request_memory_per_session", ledger.per_session, meter.held, self.nbytes,
                request_id,
            )
        meter.add(self.nbytes)
        self._meter = meter

    def grow(self, nbytes: int, request_id: object = None) -> None:
        """What the request holds grew by ``nbytes`` (a listen's filter): charged too
        (raises RemoteProtocolError past a budget, having charged nothing more)."""
        if self._meter is not None and self._meter.held + nbytes > self._ledger.per_session:
            self._ledger._refuse(
                "request_memory_per_session", self._ledger.per_session, self._meter.held,
                nbytes, request_id,
            )
        self._ledger._take(self.unit, nbytes, request_id)
        if self._meter is not None:
            self._meter.add(nbytes)
        self.nbytes += nbytes

    def shrink(self, nbytes: int) -> None:
        """What the request holds fell by ``nbytes`` (events a listen had queued, written):
        given back at once."""
        self._give(min(nbytes, self.nbytes))

    def hold(self) -> None:
        """One more holder: a handler started for the request."""
        self._holders += 1

    def exchange_done(self) -> None:
        """The HTTP exchange is over: its body's bytes are freed."""
        if self._raw:
            self._give(self._raw)
            self._raw = 0
        self.drop()

    def drop(self) -> None:
        """A holder lets go; at the last, the rest of the charge is given back."""
        self._holders -= 1
        if self._holders == 0 and self.nbytes:
            self._give(self.nbytes)

    def _give(self, nbytes: int) -> None:
        self.nbytes -= nbytes
        if self._meter is not None:
            self._meter.take(nbytes)
        self._ledger._release(self.unit, nbytes)
