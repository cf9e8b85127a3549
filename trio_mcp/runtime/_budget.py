# TM-SEC-BODIES: the bytes of request bodies a server holds while it reads them, counted
# across every connection and both HTTP edges, so that many clients each sending a large body
# slowly cannot hold the server's memory between them; and shared among clients by max-min
# fairness (TM-SEC-FAIR), so that one client keeping the room full cannot refuse everyone
# else's bodies: a full pool takes the largest body of the client holding the most, for a
# client below its share.
from __future__ import annotations

import attrs
import trio

from ..protocol import ErrorCode, RemoteProtocolError
from ._pools import Pool
from ._stats import counter, gauge

__all__ = ["Arrival", "BodyPool", "BodyStatistics", "bodies_busy"]


@attrs.frozen
class BodyStatistics:
    """The bodies of requests still arriving (TM-SEC-BODIES)."""

    bodies_refused: int = counter()
    """Pieces refused: the pool was full and their client held its fair share."""
    bodies_evicted: int = counter()
    """Bodies given up by the client holding the most, for a client below its share."""
    bodies_timed_out: int = counter()
    """Requests whose body did not arrive within the body deadline."""
    bytes_of_bodies_arriving: int = gauge()
    body_clients_arriving: int = gauge()


class Arrival:
    """One request body still arriving: its client's unit (``Unit.key``), the pieces read so
    far, and the cancel scope its reader waits in (the body's deadline, under hypercorn).
    When the pool takes it for another client's body (``BodyPool``), its pieces are dropped
    at once and the scope is cancelled, with ``evicted`` set: its reader refuses the request
    and the connection is closed."""

    __slots__ = ("chunks", "evicted", "scope", "size", "unit")

    def __init__(self, unit: str, scope: trio.CancelScope) -> None:
        self.unit = unit
        self.chunks: list[bytes] = []
        self.size = 0
        self.scope = scope
        self.evicted = False

    def body(self) -> bytes:
        chunks = self.chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _largest(arrivals: dict[Arrival, None]) -> Arrival:
    """Of the bodies of the client holding the most, the one to give up: the largest. It
    makes the most room for one connection closed (an eviction for a 64 KiB piece usually
    makes room for the asker's whole body), and what the client loses is bytes it sent, not
    work the server accepted. O(k), k the client's bodies arriving."""
    return max(arrivals, key=_size)


def _size(arrival: Arrival) -> int:
    return arrival.size


class BodyPool:
    """The bytes of bodies still arriving, against ``limit``, held by clients' units: a pool
    of bytes under the fair rule (``_pools.Pool``, TM-SEC-FAIR).

    ``arrival`` starts a body; ``take`` adds a piece (False, and nothing added, when the
    pool is full and the client holds its fair share or more: the request gets 503);
    ``done`` takes the body out, complete or not. A client below its share is given room
    taken from the client holding the most: its largest body arriving is evicted (its
    request gets 503 and its connection is closed, ``Arrival.evicted``)."""

    __slots__ = ("pool", "timed_out")

    def __init__(self, limit: int) -> None:
        self.pool: Pool[Arrival] = Pool("bodies", limit, evict=_evict, pick=_largest)
        #: Requests whose body did not arrive within the body deadline.
        self.timed_out = 0

    @property
    def limit(self) -> int:
        return self.pool.capacity

    @property
    def held(self) -> int:
        """Bytes of bodies arriving, all clients together."""
        return self.pool.total

    @property
    def refused(self) -> int:
        """Pieces refused: the pool was full and their client held its fair share."""
        return self.pool.stats.refused

    @property
    def evicted(self) -> int:
        """Bodies given up by the client holding the most, for a client below its share."""
        return self.pool.stats.evicted

    def clients(self) -> int:
        """How many clients have bodies arriving."""
        return len(self.pool.share)

    def count_timeout(self) -> None:
        self.timed_out += 1

    def arrival(self, unit: str, scope: trio.CancelScope) -> Arrival:
        """A body of the client ``unit`` starts arriving; its reader waits in ``scope``."""
        return Arrival(unit, scope)

    def take(self, arrival: Arrival, chunk: bytes) -> bool:
        """Add ``chunk`` to ``arrival``; False when the pool cannot make room for it (the
        client is over its fair share of a full pool)."""
        size = len(chunk)
        if arrival.evicted:
            return False
        if not size:
            return True
        pool = self.pool
        if not pool.admit(arrival.unit, size):
            return False
        if arrival.size:
            pool.grow(arrival, size)
        else:
            pool.add(arrival.unit, arrival, size)
        arrival.size += size
        arrival.chunks.append(chunk)
        return True

    def done(self, arrival: Arrival) -> None:
        """The body is complete (it is the request's now), refused, or abandoned: its pieces
        leave the pool, and the arrival lets go of them (a refused body's reader lingers for
        seconds, TM-HTTP-LINGER, and must not hold what the pool no longer counts)."""
        if arrival.size:
            self.pool.discard(arrival)
        arrival.chunks = []

    def statistics(self) -> BodyStatistics:
        return BodyStatistics(
            bodies_refused=self.refused, bodies_evicted=self.evicted,
            bodies_timed_out=self.timed_out, bytes_of_bodies_arriving=self.held,
            body_clients_arriving=self.clients(),
        )


def _evict(arrival: Arrival) -> None:
    """Give ``arrival``'s room to another client's body (it has left the pool): its pieces
    go now, so that the memory comes back with the room, and its reader is woken."""
    arrival.evicted = True
    arrival.chunks.clear()
    arrival.size = 0
    arrival.scope.cancel()


def bodies_busy(*, evicted: bool = False) -> RemoteProtocolError:
    """The answer to a body the pool cannot hold (its client holds its fair share of a full
    pool), or one it gave up for another client's (``evicted``): 503, retry in a second."""
    if evicted:
        message = (
            "Service Unavailable: the server's room for request bodies still arriving is "
            "full, and this client held the most of it; this body made room for another "
            "client's. Retry later."
        )
    else:
        message = (
            "Service Unavailable: the server is reading too many request bodies, and this "
            "client holds its fair share of them or more; retry later."
        )
    return RemoteProtocolError(
        message,
        code=ErrorCode.SERVER_BUSY,
        http_status=503,
        headers=(("retry-after", "1"),),
        data={"pool": "request bodies still arriving"},
    )
