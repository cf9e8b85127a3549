"""The one admission rule (TM-SEC-FAIR) and the client it counts by (TM-SEC-UNIT), as pure code:
over Hypothesis schedules of up to 64 clients arriving and leaving, a client at or below its
max-min fair share is never refused, and room is never taken from a client at or below its
share; both judged against a brute-force water level."""

from __future__ import annotations

import collections
from typing import Any

import attrs
import pytest
import trio
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from support.examples import examples

from trio_mcp.protocol import Headers
from trio_mcp.protocol._fair import FairShare, Unit, UnitPolicy, Verdict, fair_share_level
from trio_mcp.runtime._budget import Arrival, BodyPool
from trio_mcp.runtime._pools import Pool

UNITS = [f"ip:10.0.0.{i}" for i in range(64)]

#: One step: a client asks for one more slot, or gives one back; arrivals are the most, so
#: that the pools fill (Hypothesis's statistics show how often each verdict is reached).
_step = st.tuples(
    st.sampled_from(("arrive", "arrive", "arrive", "leave")), st.integers(0, 63)
)


def _demand_level(held: dict[str, int], asker: str, amount: int, capacity: int) -> float:
    """The water level of the pool if ``asker`` held ``amount`` more."""
    demands = dict(held)
    demands[asker] = demands.get(asker, 0) + amount
    return fair_share_level(demands.values(), capacity)


@pytest.mark.spec("TM-SEC-FAIR")
@settings(max_examples=examples(300), deadline=None)
@given(
    capacity=st.integers(1, 64),
    steps=st.lists(_step, min_size=20, max_size=400),
    clients=st.integers(1, 64),
)
@example(capacity=10, steps=[("arrive", 0)] * 10 + [("arrive", 1)] * 5, clients=2)
@example(capacity=40, steps=[("arrive", 1)] * 50 + [("arrive", 0)] * 20, clients=2)
def test_a_client_at_or_below_its_fair_share_is_never_refused_nor_taken_from(
    capacity: int, steps: list[tuple[str, int]], clients: int
) -> None:
    """Slots pool: every arrival that finds the pool full is served (taking one slot from
    the client holding the most) exactly when the asker is within its max-min share once
    served; the client taken from held more than that share; the pool never holds more
    than its capacity; and the top the heap reports is the true maximum."""
    share = FairShare(capacity)
    for what, index in steps:
        unit = UNITS[index % clients]
        held = share.holdings()
        if what == "leave":
            if share.held(unit):
                share.remove(unit)
            continue
        level = _demand_level(held, unit, 1, capacity)
        verdict = share.verdict(unit)
        if share.total < capacity:
            assert Verdict.ADMIT == verdict
            share.add(unit)
            continue
        within = held.get(unit, 0) + 1 <= level
        assert (Verdict.EVICT == verdict) == within, (held, unit, level)
        event(f"a full pool {verdict.value}s")
        if verdict is Verdict.EVICT:
            victim = share.victim(unit)
            assert victim is not None and victim != unit
            # Taken from a client above its share, and the one holding the most.
            assert held[victim] > level
            assert held[victim] == max(held.values())
            share.remove(victim)
            share.add(unit)
        assert share.total <= capacity
    top = share.top()
    holdings = share.holdings()
    if holdings:
        assert top is not None and top[1] == max(holdings.values())
        assert sum(holdings.values()) == share.total
    else:
        assert top is None


_byte_step = st.tuples(
    st.sampled_from(("keep", "keep", "drop")), st.integers(0, 63), st.integers(1, 40)
)


@pytest.mark.spec("TM-SEC-FAIR")
@settings(max_examples=examples(200), deadline=None)
@given(
    capacity=st.integers(40, 400),
    steps=st.lists(_byte_step, max_size=200),
    clients=st.integers(1, 64),
)
# A client whose heap entries went stale several times counts once (it was counted three
# times, and an item taken for a request then refused).
@example(capacity=40, steps=[("keep", 1, 1), ("keep", 1, 1), ("keep", 1, 20), ("keep", 0, 21)],
         clients=2)
def test_a_pool_of_bytes_takes_room_only_from_clients_above_their_share(
    capacity: int, steps: list[tuple[str, int, int]], clients: int
) -> None:
    """Bytes pool (items of any size, as ended tasks are kept): a client asking for bytes
    it is within its share for is served; every item taken went from a client that held
    more than its share at that moment; a refusal takes nothing from anyone."""
    taken: list[tuple[str, float, int]] = []
    pool: Pool[Any] = Pool("bytes", capacity, evict=lambda item: None)
    original_end = pool._end

    def end(item: Any) -> None:
        # Judge each eviction at its moment: the victim's holding against the level.
        unit, _ = pool._held[item]
        taken.append((unit, pending_level, pool.held(unit)))
        original_end(item)

    pool._end = end  # type: ignore[method-assign]
    counter = 0
    items: dict[str, collections.deque[int]] = collections.defaultdict(collections.deque)
    for what, index, size in steps:
        unit = UNITS[index % clients]
        if what == "drop":
            while items[unit] and items[unit][0] not in pool:
                items[unit].popleft()
            if items[unit]:
                pool.discard(items[unit].popleft())
            continue
        held = pool.share.holdings()
        pending_level = _demand_level(held, unit, size, capacity)
        within = held.get(unit, 0) + size <= pending_level
        before = dict(held)
        taken.clear()
        admitted = pool.admit(unit, size)
        if size <= capacity - pool.total or within:
            assert admitted, (before, unit, size, pending_level)
        if not admitted:
            assert pool.share.holdings() == before, "a refusal took something"
        event("bytes: " + ("refused" if not admitted else "taken from others" if taken
                           else "room"))
        for victim, level, victim_held in taken:
            assert victim != unit and victim_held > level, (victim, victim_held, level)
        if admitted:
            counter += 1
            pool.add(unit, counter, size)
            items[unit].append(counter)
        assert pool.total <= capacity


@pytest.mark.spec("TM-SEC-FAIR")
def test_a_full_pool_serves_a_newcomer_from_the_client_holding_the_most() -> None:
    """Sixteen clients hold a full pool of 64 in shares of four; a seventeenth is served,
    taking the newest slot of one holding four, and again while someone holds two more than
    it; a client holding four is refused one more, and so is the one left with three (no one
    holds two more than it)."""
    pool: Pool[tuple[str, int]] = Pool(
        "tasks", 64, evict=lambda item: None, pick=lambda items: next(reversed(items))
    )
    for n in range(16):
        for k in range(4):
            assert pool.admit(UNITS[n])
            pool.add(UNITS[n], (UNITS[n], k))
    assert pool.admit(UNITS[16])
    pool.add(UNITS[16], (UNITS[16], 0))
    [three] = [u for u in UNITS[:16] if pool.held(u) == 3]
    assert (three, 3) not in pool  # its newest went
    four = UNITS[0] if UNITS[0] != three else UNITS[1]
    assert not pool.admit(four)
    assert not pool.admit(three)
    assert pool.admit(UNITS[16])
    pool.add(UNITS[16], (UNITS[16], 1))
    assert (2, 2, 64) == (pool.stats.refused, pool.stats.evicted, pool.total)


@pytest.mark.spec("TM-SEC-UNIT")
def test_a_client_is_its_principal_else_its_network() -> None:
    """An authenticated request's client is its principal; else its address, an IPv6 /64
    as one, an IPv4-mapped address as its IPv4 address; the key is a plain string."""
    policy = UnitPolicy.of()
    none = Headers([])

    assert "principal:https://as#alice" == policy.of_request("https://as#alice", "192.0.2.1",
                                                             none).key
    assert Unit("ip:192.0.2.1") == policy.of_request(None, "192.0.2.1", none)
    assert Unit("ip:192.0.2.1") == policy.of_address("::ffff:192.0.2.1")
    a = policy.of_address("2001:db8:1:2:aaaa::1")
    b = policy.of_address("2001:db8:1:2:bbbb::9")
    assert a == b and "ip:2001:db8:1:2::/64" == a.key
    assert a != policy.of_address("2001:db8:1:3::1")
    assert "ip:unknown" == policy.of_address(None).key
    wide = UnitPolicy.of(ipv4_prefix=24)
    assert wide.of_address("192.0.2.7") == wide.of_address("192.0.2.200")
    assert isinstance(a.key, str) and str(a) == a.key


@pytest.mark.spec("TM-SEC-UNIT")
@pytest.mark.parametrize(
    ("header", "value", "peer", "client"),
    [
        # Not a trusted proxy: the header is the client's own text, never read.
        ("x-forwarded-for", "203.0.113.9", "198.51.100.1", "198.51.100.1"),
        # One proxy: the address it saw.
        ("x-forwarded-for", "203.0.113.9", "10.0.0.2", "203.0.113.9"),
        # A forged entry left of the one the proxy wrote is never reached.
        ("x-forwarded-for", "1.2.3.4, 203.0.113.9", "10.0.0.2", "203.0.113.9"),
        # Two trusted proxies: past both.
        ("x-forwarded-for", "1.2.3.4, 203.0.113.9, 10.0.0.5", "10.0.0.2", "203.0.113.9"),
        # Every entry trusted: the leftmost.
        ("x-forwarded-for", "10.0.0.9, 10.0.0.5", "10.0.0.2", "10.0.0.9"),
        # Not an address: the proxy that wrote it is as far as is known.
        ("x-forwarded-for", "unknown", "10.0.0.2", "10.0.0.2"),
        # RFC 7239, with a port and an IPv6 address in brackets.
        ("forwarded", 'for=1.2.3.4, for="[2001:db8::7]:4711";proto=https', "10.0.0.2",
         "2001:db8::7"),
        ("x-real-ip", "203.0.113.9", "10.0.0.2", "203.0.113.9"),
    ],
)
def test_the_client_address_is_read_from_a_header_only_behind_a_trusted_proxy(
    header: str, value: str, peer: str, client: str
) -> None:
    """TM-SEC-UNIT: a forwarding header counts only on a trusted proxy's connection, read
    from the right past every trusted proxy."""
    policy = UnitPolicy.of(trusted_proxies=["10.0.0.0/8"], header=header)
    headers = Headers([(header.encode(), value.encode())])

    assert client == policy.client_address(peer, headers)


def test_unit_policy_refuses_impossible_settings() -> None:
    with pytest.raises(ValueError):
        UnitPolicy.of(ipv4_prefix=33)
    with pytest.raises(ValueError):
        UnitPolicy.of(header="x-client")


@pytest.mark.spec("TM-SEC-BODIES", "TM-SEC-FAIR")
def test_the_pool_of_bodies_arriving_takes_the_largest_body_of_the_client_holding_most() -> None:
    """Bodies arriving (a pool of 1,000 bytes): one client fills it with three bodies; a
    second client's piece takes the first one's largest body (its pieces dropped at once,
    its reader's scope cancelled), and the next pieces fit in the room that made; the first
    client, now over its share of a full pool, is refused a piece, nothing taken; the
    counters say so, and everything given back leaves nothing held."""
    bodies = BodyPool(1000)
    a, b = UNITS[0], UNITS[1]
    small, large, medium = (bodies.arrival(a, trio.CancelScope()) for _ in range(3))
    assert bodies.take(small, b"s" * 100)
    assert bodies.take(large, b"l" * 300)
    assert bodies.take(large, b"l" * 300)
    assert bodies.take(medium, b"m" * 300)
    assert (1000, 1) == (bodies.held, bodies.clients())
    neighbour = bodies.arrival(b, trio.CancelScope())
    assert bodies.take(neighbour, b"n" * 200)
    assert large.evicted and large.scope.cancel_called and [] == large.chunks
    assert not small.evicted and not medium.evicted
    assert (600, 2) == (bodies.held, bodies.clients())
    assert bodies.take(neighbour, b"n" * 300)  # room left by the eviction: nothing taken
    assert bodies.take(small, b"s" * 100)  # room: a client over its share gets room too
    # Full (1,000: 500 each) and a holds its share: refused, nothing taken from b.
    assert not bodies.take(medium, b"m" * 1)
    assert not bodies.take(bodies.arrival(a, trio.CancelScope()), b"x")
    assert (1000, 500) == (bodies.held, bodies.pool.held(b))
    # b below... at its share too: refused as well (a holds no more than b + 1).
    assert not bodies.take(neighbour, b"n")
    assert not bodies.take(large, b"l")  # an evicted body takes nothing more
    assert {
        "bodies_refused": 3,
        "bodies_evicted": 1,
        "bodies_timed_out": 0,
        "bytes_of_bodies_arriving": 1000,
        "body_clients_arriving": 2,
    } == attrs.asdict(bodies.statistics())
    assert b"n" * 500 == neighbour.body()
    for arrival in (small, large, medium, neighbour):
        bodies.done(arrival)
    assert (0, 0) == (bodies.held, bodies.clients())
    # Done, complete or refused, an arrival keeps none of its pieces: a refused body's
    # reader lingers for seconds (TM-HTTP-LINGER) with its arrival in hand.
    assert [[], [], [], []] == [a.chunks for a in (small, large, medium, neighbour)]


@pytest.mark.spec("TM-SEC-BODIES", "TM-SEC-FAIR")
@settings(max_examples=examples(200), deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(("piece", "piece", "piece", "start", "done")),
                  st.integers(0, 7), st.integers(1, 300)),
        min_size=10, max_size=300,
    ),
)
def test_bodies_arriving_never_pass_the_limit_nor_refuse_a_client_within_its_share(
    steps: list[tuple[str, int, int]],
) -> None:
    """Any schedule of eight clients starting bodies, adding pieces and finishing them, in a
    pool of 2,000 bytes: the bytes held (and the pieces kept) never pass the limit; a piece
    of a client within its max-min share is never refused; each body taken was the largest
    of a client holding more than the asker would once served, and was another client's."""
    bodies = BodyPool(2000)
    open_: dict[str, list[Arrival]] = collections.defaultdict(list)
    for what, index, size in steps:
        unit = UNITS[index]
        mine = open_[unit]
        if what == "start" or not mine:
            mine.append(bodies.arrival(unit, trio.CancelScope()))
        arrival = mine[-1]
        if what == "done":
            bodies.done(arrival)
            mine.remove(arrival)
            continue
        held = bodies.pool.share.holdings()
        level = _demand_level(held, unit, size, 2000)
        within = held.get(unit, 0) + size <= level
        largest = {
            u: max((x.size for x in xs if not x.evicted), default=0) for u, xs in open_.items()
        }
        before = {id(x): (u, x.size) for u, xs in open_.items() for x in xs if not x.evicted}
        took = bodies.take(arrival, b"p" * size)
        if within or bodies.held + size <= 2000:
            assert took or arrival.evicted, (held, unit, size, level)
        gone = [
            (u, s) for u, xs in open_.items() for x in xs
            if x.evicted and id(x) in before for u, s in [before[id(x)]]
        ]
        event("bodies: " + ("refused" if not took else "taken from others" if gone else "room"))
        for victim, victim_size in gone:
            assert victim != unit and victim_size == largest[victim]
            assert held[victim] > held.get(unit, 0) + size
        for xs in open_.values():
            xs[:] = [x for x in xs if not x.evicted]
        kept = sum(x.size for xs in open_.values() for x in xs)
        assert bodies.held == kept == sum(
            len(c) for xs in open_.values() for x in xs for c in x.chunks
        )
        assert bodies.held <= 2000
