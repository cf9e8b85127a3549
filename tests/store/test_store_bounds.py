# The shared store is bounded too (issue 35: "--workers 2 --store redis, 6,000 sessions from
# one address: 6,002 Redis keys, +100 MiB, kept 30 min; sessions evicted from the workers
# long ago still answer from Redis; 256 subscriptions rewrite the whole set each time"), in
# every store (a real redis-server, and the in-process store): the store counts sessions, in
# all and per unit, atomically, and holds no more than its caps; an eviction deletes the
# record at once, for every worker; a subscription is one member of a set, written once.
from __future__ import annotations

import json
import re
from typing import Any

import attrs
import pytest
import trio
from support.client import McpSession, open_session, rpc_request
from support.fixtures import LiveServer, StartServer
from support.redis import RedisServer
from support.stores import RedisBackend, StoreBackend

from trio_mcp import Server
from trio_mcp.runtime.store._store import CreateKind, SessionRecord, StoreLimits

TIMEOUT = 30
SECRET = bytes(range(32))


def _app() -> Server:
    server = Server("store-bounds")

    @server.tool()
    async def quick() -> str:
        """Answers at once."""
        return "quick"

    @server.resource("demo://items/{item}")
    async def item(item: str) -> str:
        return item

    return server


async def _two_workers(
    live_server: StartServer, store: StoreBackend, **extra: Any
) -> tuple[LiveServer, LiveServer]:
    config = store.config(secret=SECRET, workers=2, **extra)
    a = await live_server(server=_app(), config=config)
    b = await live_server(server=_app(), config=config)
    return a, b


def _info(redis: RedisServer, section: bytes, field: str) -> int:
    raw = redis.command(b"INFO", section).decode()
    found = re.search(rf"^{field}:(\d+)", raw, re.MULTILINE)
    assert found, raw
    return int(found.group(1))


def _int_reply(raw: bytes) -> int:
    assert raw.startswith(b":"), raw
    return int(raw[1:].strip())


def _keys(redis: RedisServer) -> int:
    return _int_reply(redis.command(b"DBSIZE"))


def _record(session_id: str, unit: str, *, padding: int = 0) -> SessionRecord:
    return SessionRecord(
        id=session_id, version="2025-11-25",
        client_info={"name": "flood", "version": "1", "pad": "x" * padding},
        client_capabilities={}, server_capabilities={"tools": {}},
        client_state_bytes=padding + 40, peer="127.0.0.1", principal="", unit=unit,
    )


def _at(session: McpSession, worker: LiveServer) -> McpSession:
    """The same session, its requests sent to ``worker``."""
    return attrs.evolve(session, url=worker.url)


async def _ping(session: McpSession, worker: LiveServer) -> int:
    response = await _at(session, worker).post(rpc_request("ping", id=1))
    return response.status


@pytest.mark.spec("TM-STORE-BOUND")
async def test_6000_sessions_from_one_address_leave_at_most_its_cap_in_the_store(
    shared_store: StoreBackend,
) -> None:
    """The row of issue 35, at its scale, against the store itself: 6,000 sessions created for
    one unit, each with 16 KB of client state, under the default caps (2,500 a unit, 10,000 in
    all). The store holds 2,500 of them, counted exactly, in 2,500 records and a few sorted
    sets; the rest are refused (none is idle yet); the store grows by no more than what
    2,500 such records hold, not 6,000; a second unit is not refused."""
    store = shared_store.connect()
    # Idle after 10 minutes: none may become idle while the 6,000 are made, however slow the
    # machine (with 18 s, a loaded CI took longer, and the first was evicted as idle).
    limits = StoreLimits(max_sessions=10_000, max_per_unit=2_500, idle_after=600.0)
    before = shared_store.footprint()
    outcomes: dict[CreateKind, int] = {}
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run, lambda control: None)
            for i in range(6000):
                outcome = await store.create(_record(f"s{i}", "a:10.0.0.1", padding=16_000),
                                             1800, limits)
                outcomes[outcome.kind] = outcomes.get(outcome.kind, 0) + 1
                assert () == outcome.evicted
            other = await store.create(_record("neighbour", "a:10.0.0.2"), 1800, limits)
            counts = await store.counts("a:10.0.0.1")
            nursery.cancel_scope.cancel()
    grown = shared_store.footprint() - before
    assert {CreateKind.CREATED: 2500, CreateKind.UNIT_FULL: 3500} == outcomes
    assert CreateKind.CREATED is other.kind
    assert (2501, 2500) == counts
    assert 2501 == shared_store.records()
    if isinstance(shared_store, RedisBackend):
        # 2,501 records; the store's two sorted sets (counted, and by use) and two per unit.
        assert 2501 + 2 + 4 == _keys(shared_store.redis)
    # Each record holds its 16 KB of client state and some bookkeeping: the bound is the
    # records the caps admit, with a quarter for the store's own overhead.
    assert grown <= 2501 * 16_500 * 1.25, grown


@pytest.mark.spec("TM-STORE-BOUND")
async def test_at_its_cap_a_unit_makes_room_by_deleting_its_own_idle_sessions_only(
    shared_store: StoreBackend,
) -> None:
    """A unit at its cap gets a new session by the deletion of its own session renewed least
    recently, once that one has been idle for `idle_after`; a session that was renewed
    meanwhile (a request named it) is passed over, and another unit's never touched. What
    is deleted goes whole: record, subscriptions and counts."""
    store = shared_store.connect()
    limits = StoreLimits(max_sessions=100, max_per_unit=3, idle_after=0.3)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run, lambda control: None)
            for sid in ("n1", "n2"):
                assert CreateKind.CREATED is (
                    await store.create(_record(sid, "a:neighbour"), 60, limits)).kind
            for sid in ("a1", "a2", "a3"):
                assert CreateKind.CREATED is (await store.create(_record(sid, "a:x"), 60,
                                                                 limits)).kind
            await store.subscribe("a1", "demo://items/1", max_subscriptions=8, ttl=60)
            refused = await store.create(_record("a4", "a:x"), 60, limits)
            assert CreateKind.UNIT_FULL is refused.kind
            await trio.sleep(0.4)
            # a1 is renewed by a request: a2 is then the one idle longest.
            assert await store.fetch("a1", idle_ttl=60, uninitialized_ttl=60) is not None
            made = await store.create(_record("a4", "a:x"), 60, limits)
            assert CreateKind.CREATED is made.kind and ("a2",) == made.evicted
            assert await store.fetch("a2", idle_ttl=60, uninitialized_ttl=60) is None
            assert (5, 3) == await store.counts("a:x")
            await trio.sleep(0.4)
            made = await store.create(_record("a5", "a:x"), 60, limits)
            assert ("a3",) == made.evicted
            await store.delete("a1", "deleted")
            assert (4, 2) == await store.counts("a:x")
            assert (4, 2) == await store.counts("a:neighbour")
            assert 0 == shared_store.subscription_count("a1")
            assert not shared_store.holds_session("a2")
            nursery.cancel_scope.cancel()


@pytest.mark.spec("TM-STORE-BOUND")
async def test_expired_sessions_leave_the_counts_when_they_expire(
    shared_store: StoreBackend,
) -> None:
    """A record that expires leaves both counts with it: a unit at its cap whose sessions
    expired gets new ones, none of them refused."""
    store = shared_store.connect()
    limits = StoreLimits(max_sessions=4, max_per_unit=2, idle_after=60)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run, lambda control: None)
            for sid in ("e1", "e2"):
                await store.create(_record(sid, "a:x"), 0.2, limits)
            assert CreateKind.UNIT_FULL is (
                await store.create(_record("e3", "a:x"), 0.2, limits)).kind
            await trio.sleep(0.3)
            assert (0, 0) == await store.counts("a:x")
            for sid in ("e4", "e5"):
                assert CreateKind.CREATED is (
                    await store.create(_record(sid, "a:x"), 60, limits)).kind
            assert 2 == shared_store.records()
            nursery.cancel_scope.cancel()


@pytest.mark.spec("TM-STORE-BOUND", "TM-SESS-CAP")
async def test_a_worker_evicting_its_replica_deletes_the_session_only_if_idle_everywhere(
    shared_store: StoreBackend,
) -> None:
    """A worker that evicts a session idle in its own table deletes it from the store, counts
    and all, when no worker has renewed it for `idle_after`; one renewed meanwhile (in use
    at another worker) stays, and only the evicting worker's replica went."""
    store = shared_store.connect()
    limits = StoreLimits(max_sessions=100, max_per_unit=10, idle_after=0.3)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run, lambda control: None)
            for sid in ("busy", "idle"):
                await store.create(_record(sid, "a:x"), 60, limits)
            await trio.sleep(0.4)
            assert set() == await store.keep_alive(["busy"], 60)  # a handler runs elsewhere
            assert not await store.evict("busy", 0.3)
            assert await store.evict("idle", 0.3)
            assert await store.fetch("busy", idle_ttl=60, uninitialized_ttl=60) is not None
            assert await store.fetch("idle", idle_ttl=60, uninitialized_ttl=60) is None
            assert (1, 1) == await store.counts("a:x")
            nursery.cancel_scope.cancel()


@pytest.mark.spec("TM-STORE-BOUND", "TM-SESS-CAP")
async def test_sessions_evicted_at_one_worker_are_gone_from_the_store_and_both_workers(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """Two workers, one address, a cap of 6 sessions an address: 40 sessions made in turn at
    both workers. The store never holds more than 6 of them; every session evicted answers
    404 at both workers at once (never again from the store); a session still in use is
    never evicted, and the flood is refused 503 while the address's sessions are all in
    use."""
    a, b = await _two_workers(
        live_server, shared_store, store_max_sessions_per_client=6, session_idle_ttl=30.0,
        uninitialized_ttl=2.0,
    )
    made: list[McpSession] = []
    refused = 0
    most = 0
    with trio.fail_after(TIMEOUT * 2):
        keeper = await open_session(a.url)
        for i in range(40):
            worker = (a, b)[i % 2]
            try:
                made.append(await open_session(worker.url))
            except AssertionError as exc:
                assert "503" in str(exc), exc
                refused += 1
                await trio.sleep(0.25)
            # The keeper is in use throughout, at the other worker.
            assert 200 == await _ping(keeper, (b, a)[i % 2])
            most = max(most, shared_store.unit_records("a:127.0.0.1"))
        statuses = [(await _ping(s, a), await _ping(s, b)) for s in made]
    alive = [s for s, st in zip(made, statuses, strict=True) if st == (200, 200)]
    gone = [s for s, st in zip(made, statuses, strict=True) if st == (404, 404)]
    assert len(alive) + len(gone) == len(made), statuses
    assert most <= 6
    assert len(alive) <= 5 and gone
    assert refused > 0
    assert shared_store.unit_records("a:127.0.0.1") <= 6
    for session in gone:
        assert not shared_store.holds_session(session.id)
    evicted = a.stats()["sessions_evicted"] + b.stats()["sessions_evicted"]
    assert evicted >= len(gone)


@pytest.mark.spec("TM-STORE-SUBS", "TM-STORE-NOTIFY")
async def test_256_subscriptions_are_one_set_member_each_written_once(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """256 subscriptions of 8,000-byte URIs, sent to either worker in turn: each URI reaches
    the store twice, stored once and published once for the other worker (what Redis
    receives grows with the URIs, not with their square), is kept as one member of the
    session's set, and both workers know all 256 from their next request on; an unsubscribe
    removes one member, and the other worker knows it."""
    a, b = await _two_workers(live_server, shared_store)
    redis = shared_store.redis if isinstance(shared_store, RedisBackend) else None
    uris = [f"demo://items/{i:04d}{'x' * 7980}" for i in range(256)]
    with trio.fail_after(TIMEOUT * 2):
        session = await open_session(a.url)
        at = {w.url: _at(session, w) for w in (a, b)}
        received = 0 if redis is None else _info(redis, b"stats", "total_net_input_bytes")
        used = shared_store.footprint()
        for i, uri in enumerate(uris):
            await at[(a, b)[i % 2].url].result("resources/subscribe", {"uri": uri})
        if redis is not None:
            received = _info(redis, b"stats", "total_net_input_bytes") - received
        used = shared_store.footprint() - used
        await at[a.url].result("resources/unsubscribe", {"uri": uris[0]})
        await at[b.url].result("tools/list")
        await at[a.url].result("tools/list")
    total = sum(len(u) for u in uris)
    # Each URI twice, plus a few hundred bytes of command per subscription (the old record
    # rewrote every URI at each one: 256 x 257 / 2 x 8 KB, 263 MB).
    assert received <= 2 * total + 256 * 1024, (received, total)
    assert used <= 2 * total, (used, total)
    assert 255 == shared_store.subscription_count(session.id)
    for worker in (a, b):
        assert set(uris[1:]) == worker.table.sessions[session.id].subscriptions
    if redis is not None:
        assert json.dumps(sorted(uris[1:])).encode() not in redis.command(
            b"HGETALL", f"trio-mcp:session:{session.id}".encode()
        )


@pytest.mark.spec("TM-STORE-SUBS", "TM-SEC-STATE")
async def test_the_subscription_cap_holds_across_workers(
    live_server: StartServer, shared_store: StoreBackend
) -> None:
    """max_subscriptions counts the session's subscriptions in the store, whichever worker
    took each: with a cap of 4, the fifth is refused at either worker."""
    a, b = await _two_workers(live_server, shared_store, max_subscriptions=4)
    with trio.fail_after(TIMEOUT):
        session = await open_session(a.url)
        at = [_at(session, w) for w in (a, b)]
        for i in range(4):
            await at[i % 2].result("resources/subscribe", {"uri": f"demo://items/{i}"})
        for worker in at:
            answer = await worker.call("resources/subscribe", {"uri": "demo://items/9"})
            assert -32602 == answer["error"]["code"], answer
        await at[1].result("resources/unsubscribe", {"uri": "demo://items/0"})
        await at[0].result("resources/subscribe", {"uri": "demo://items/9"})
