# Session lifecycle limits: idle expiry, the pre-initialize deadline, the session cap. Most
# run in memory under trio's MockClock, so the defaults themselves (30 minutes, 60 seconds)
# are checked to the expiry loop's period; one runs over real hypercorn to see the 404.
from __future__ import annotations

import gc
import math
import weakref

import pytest
import trio
from support.client import open_session, rpc_request
from support.fixtures import StartServer, wait_until
from support.slow import MemoryServer, PacedResponder, make_server

from trio_mcp import ServerConfig


def expiry_period(config: ServerConfig) -> float:
    """How often the manager looks for expired sessions (SessionTable._expire_loop)."""
    ttls = [config.session_idle_ttl, config.uninitialized_ttl]
    if config.abandoned_ttl is not None:
        ttls.append(config.abandoned_ttl)
    return float(max(0.05, min(ttls) / 10))


async def status_of(mem: MemoryServer, session_id: str) -> int | None:
    responder, _ = await mem.complete(session_id, rpc_request("ping"))
    return responder.status


@pytest.mark.spec("TM-SESS-IDLE", "T-SESS-7")
async def test_idle_session_expires_after_the_ttl_then_gets_404(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A session with nothing in flight and no open stream ends session_idle_ttl (30
    minutes by default) after its last activity, within one period of the expiry loop;
    its id then gets 404, and sessions_expired counts it."""
    server, _record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(2 * config.session_idle_ttl):
            sid = await mem.initialize()
            last = trio.current_time()
            await trio.sleep(config.session_idle_ttl - 1)
            assert sid in mem.table.sessions
            await wait_until(lambda: sid not in mem.table.sessions, poll=0.01)
            ended = trio.current_time() - last

            assert 404 == await status_of(mem, sid)

        assert (
            config.session_idle_ttl
            <= ended
            <= config.session_idle_ttl + expiry_period(config) + 0.01
        )
        assert 1 == mem.stats()["sessions_expired"]


@pytest.mark.spec("TM-SESS-IDLE")
async def test_never_initialized_session_expires_sooner(autojump_clock: trio.abc.Clock) -> None:
    """A session whose client never sent notifications/initialized ends after
    uninitialized_ttl (60 s by default); an initialized one beside it lives on."""
    server, _record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(600):
            half = await mem.initialize(initialized=False)
            start = trio.current_time()
            full = await mem.initialize()
            await wait_until(lambda: half not in mem.table.sessions, poll=0.01)
            ended = trio.current_time() - start

            assert 404 == await status_of(mem, half)

        assert config.uninitialized_ttl <= ended
        assert ended <= config.uninitialized_ttl + expiry_period(config) + 0.01
        assert full in mem.table.sessions


@pytest.mark.spec("TM-SESS-IDLE")
async def test_session_with_an_open_stream_or_a_running_request_does_not_expire(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An open GET stream, or a request still being handled, keeps a session alive past
    any number of TTLs; idle time counts from when the last of them ended."""
    server, record = make_server()
    config = ServerConfig(session_idle_ttl=60.0, uninitialized_ttl=60.0)
    ttl = config.session_idle_ttl
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(3600):
            streaming = await mem.initialize()
            working = await mem.initialize()
            get = mem.get(streaming, responder=PacedResponder(None))
            mem.call(working, "wait", {"seconds": 5 * ttl, "tag": "w"})
            await trio.sleep(4 * ttl)

            assert {streaming, working} <= mem.table.sessions.keys()

            get.client_leaves()
            left = trio.current_time()
            await wait_until(lambda: "w" in record.finished, poll=0.01)
            done = record.finished["w"]
            await wait_until(lambda: streaming not in mem.table.sessions, poll=0.01)
            stream_ended = trio.current_time() - left
            await wait_until(lambda: working not in mem.table.sessions, poll=0.01)
            work_ended = trio.current_time() - done

        # Polled every 0.01 s of trio time: the bounds allow one poll.
        assert ttl - 0.01 <= stream_ended <= ttl + expiry_period(config) + 0.01
        assert ttl - 0.01 <= work_ended <= ttl + expiry_period(config) + 0.01


@pytest.mark.spec("TM-SESS-IDLE", "TM-RES-WINDOW")
async def test_expiry_cancels_the_session_tasks_and_frees_its_log(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Ending an expired session cancels every task it still runs (here a notification
    hook that waits forever) and drops its log: the retained bytes go to zero and the
    Session object is garbage."""
    server, record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(2 * config.session_idle_ttl):
            sid = await mem.initialize()
            left, _ = mem.call(sid, "stream", {"n": 300, "size": 2000, "tag": "s"})
            await wait_until(lambda: "s" in record.finished, poll=0.01)
            left.client_leaves()
            retained = mem.stats()["bytes_retained"]
            session_ref = weakref.ref(mem.session(sid))
            await wait_until(lambda: sid not in mem.table.sessions, poll=0.5)
            expired_at = trio.current_time()
            await trio.sleep(0.01)
            gc.collect()

        assert retained >= config.retention.max_bytes // 2
        assert 0 == mem.stats()["bytes_retained"]
        assert [expired_at] == [pytest.approx(t, abs=0.5) for t in record.hook_cancelled]
        assert session_ref() is None


@pytest.mark.spec("T-SESS-7")
async def test_deleting_a_session_cancels_its_running_handler(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A handler that waits forever keeps its session from expiring, and is cancelled
    when the session ends (here by DELETE); the id then gets 404."""
    server, record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(3 * config.session_idle_ttl):
            sid = await mem.initialize()
            mem.call(sid, "wait", {"tag": "forever"})
            await trio.sleep(2 * config.session_idle_ttl)
            assert sid in mem.table.sessions
            deleted, _ = await mem.complete_delete(sid)
            await wait_until(lambda: "forever" in record.cancelled, poll=0.01)

            assert 404 == await status_of(mem, sid)

        assert 204 == deleted.status


@pytest.mark.spec("TM-SESS-CAP", "T-SESS-7")
async def test_cap_evicts_the_least_recently_used_idle_session(
    autojump_clock: trio.abc.Clock,
) -> None:
    """At max_sessions, a new initialize ends the idle session that was used least
    recently (not the oldest one: it was used since), whose id then gets 404."""
    server, _record = make_server()
    config = ServerConfig(max_sessions=3)
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(60):
            first = await mem.initialize()
            await trio.sleep(1)
            second = await mem.initialize()
            await trio.sleep(1)
            third = await mem.initialize()
            await trio.sleep(1)
            assert 200 == await status_of(mem, first)
            await trio.sleep(1)
            fourth = await mem.initialize()

            assert 404 == await status_of(mem, second)

        assert {first, third, fourth} == set(mem.table.sessions)
        assert 1 == mem.stats()["sessions_evicted"]


@pytest.mark.spec("TM-SESS-CAP")
async def test_cap_answers_503_with_retry_after_when_every_session_is_busy(
    autojump_clock: trio.abc.Clock,
) -> None:
    """When every session is busy (a running request, an open stream) a new initialize
    gets 503 with Retry-After, and no session is ended to make room."""
    server, record = make_server()
    config = ServerConfig(max_sessions=2)
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(60):
            working = await mem.initialize()
            streaming = await mem.initialize()
            mem.call(working, "wait", {"tag": "w"})
            mem.get(streaming, responder=PacedResponder(None))
            await trio.sleep(1)
            refused = mem.post(
                None,
                rpc_request(
                    "initialize",
                    {
                        "protocolVersion": mem.protocol_version,
                        "capabilities": {},
                        "clientInfo": {"name": "late", "version": "0"},
                    },
                ),
            )
            await refused.connection_closed.wait()

        assert 503 == refused.status
        retry_after = dict(refused.headers).get("retry-after")
        assert retry_after is not None and int(retry_after) > 0
        assert {working, streaming} == set(mem.table.sessions)
        assert 0 == mem.stats()["sessions_evicted"]
        assert "w" not in record.cancelled


@pytest.mark.spec("TM-SESS-CAP", "TM-SESS-ABANDONED")
async def test_abandoned_sessions_cannot_lock_new_clients_out(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A table full of sessions each left with a never-ending call and no connection
    refuses a new initialize only until their clients have been silent for
    evict_abandoned_after: then the least recently used one is evicted, its handler
    cancelled, and the new session served (not after abandoned_ttl, 30 minutes)."""
    server, record = make_server()
    config = ServerConfig(max_sessions=20, evict_abandoned_after=60.0)
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(600):
            abandoned = []
            for i in range(20):
                sid = await mem.initialize()
                responder, _ = mem.call(sid, "wait", {"tag": f"w{i}"})
                await wait_until(lambda tag=f"w{i}": tag in record.started)
                responder.client_leaves()
                abandoned.append(sid)
            await trio.sleep(1)
            with pytest.raises(AssertionError, match="503"):
                await mem.initialize()
            await trio.sleep(60)
            newcomer = await mem.initialize()

        assert newcomer in mem.table.sessions
        assert abandoned[0] not in mem.table.sessions
        assert "w0" in record.cancelled
        assert 1 == mem.stats()["sessions_evicted"]


@pytest.mark.spec("TM-SESS-CAP", "TM-SEC-FAIR")
async def test_one_address_flooding_initialize_evicts_only_its_own_sessions(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A client address that goes on initializing fills the table, then ends its own least
    recently used idle sessions for new ones, never another address's: another address
    still gets a session, taken from the flooding address, which holds the most."""
    server, _record = make_server()
    config = ServerConfig(max_sessions=30)
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(600):
            legit = await mem.initialize(peer_host="192.0.2.1")
            flood = [await mem.initialize(peer_host="198.51.100.7") for _ in range(200)]
            late = await mem.initialize(peer_host="192.0.2.2")

        assert legit in mem.table.sessions and late in mem.table.sessions
        assert set(flood[-28:]) <= set(mem.table.sessions)
        assert 30 == len(mem.table.sessions)
        # 171 of its own given up for its next, one taken for the late address.
        assert 172 == mem.stats()["sessions_evicted"]


@pytest.mark.spec("TM-SESS-SHUTDOWN")
async def test_shutdown_keeps_back_from_the_grace_what_cancelling_its_handlers_costs(
    autojump_clock: trio.abc.Clock,
) -> None:
    """With many handlers running, shutdown cancels them before the grace has passed, by
    CANCEL_COST for each (at most half the grace), so that the cancelling itself, which
    takes CPU time per handler, still ends within the grace."""
    from trio_mcp.runtime.legacy._table import CANCEL_COST

    server, record = make_server()
    async with MemoryServer.open(server, ServerConfig(max_inflight_requests=100)) as mem:
        with trio.fail_after(600):
            for s in range(10):
                sid = await mem.initialize()
                for i in range(100):
                    mem.call(sid, "wait", {"tag": f"{s}.{i}"})
            await wait_until(lambda: len(record.started) == 1000)
            began = trio.current_time()
            await mem.table.shutdown(10.0)
            await wait_until(lambda: len(record.cancelled) == 1000)

    expected = 10.0 - 1000 * CANCEL_COST
    assert all(abs(at - began - expected) < 0.01 for at in record.cancelled.values())


@pytest.mark.spec("TM-SESS-CAP")
async def test_an_eviction_looks_at_a_bounded_number_of_sessions(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a full table of busy sessions, each refused initialize looks at no more than
    EVICTION_SCAN of them, and a run of refusals looks at each busy one about once: the
    cost of admission does not grow with the table."""
    from trio_mcp.runtime.legacy import _session, _table

    server, _record = make_server()
    config = ServerConfig(max_sessions=300)
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(600):
            for i in range(300):
                sid = await mem.initialize()
                mem.call(sid, "wait", {"tag": f"w{i}"})
            await trio.sleep(1)
            looked = 0
            evictable = _session.Session.evictable

            def counted(session: _session.Session, now: float) -> bool:
                nonlocal looked
                looked += 1
                return evictable(session, now)

            monkeypatch.setattr(_session.Session, "evictable", counted)
            for _ in range(10):
                with pytest.raises(AssertionError, match="503"):
                    await mem.initialize()

    assert looked <= 10 * _table.EVICTION_SCAN


@pytest.mark.spec("TM-SESS-IDLE", "T-SESS-7")
async def test_expired_session_gets_404_over_http(live_server: StartServer) -> None:
    """Over real HTTP, with a half-second TTL: a session left alone is gone within the
    TTL plus one expiry period, and its id gets 404 from then on."""
    server, _record = make_server()
    config = ServerConfig(session_idle_ttl=0.5, uninitialized_ttl=0.5)
    live = await live_server(server, config)
    with trio.fail_after(10):
        session = await open_session(live.url)
        assert "result" in await session.call("ping")
        await wait_until(lambda: session.id not in live.table.sessions)
        response = await session.post(rpc_request("ping"))

    assert 404 == response.status


@pytest.mark.slow
@pytest.mark.spec("TM-SESS-ABANDONED", "T-SESS-7")
async def test_session_whose_client_left_a_never_ending_request_expires_as_abandoned(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A handler that never returns does not keep a session alive for ever: once its
    client has left (no connection open) and sent nothing for abandoned_ttl (30 minutes
    by default), the session ends, the handler is cancelled, the id gets 404, and both
    sessions_expired and sessions_abandoned count it."""
    server, record = make_server()
    config = ServerConfig()
    assert config.abandoned_ttl == 30 * 60
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(3 * config.abandoned_ttl):
            sid = await mem.initialize()
            left, _ = mem.call(sid, "wait", {"tag": "forever"})
            await wait_until(lambda: "forever" in record.started, poll=0.01)
            left.client_leaves()
            gone = trio.current_time()
            await wait_until(lambda: sid not in mem.table.sessions, poll=0.01)
            ended = trio.current_time() - gone

            assert 404 == await status_of(mem, sid)

        assert config.abandoned_ttl - 0.01 <= ended
        assert ended <= config.abandoned_ttl + expiry_period(config) + 0.01
        assert [pytest.approx(gone + ended, abs=0.02)] == [record.cancelled["forever"]]
        stats = mem.stats()
        assert (1, 1) == (stats["sessions_abandoned"], stats["sessions_expired"])


@pytest.mark.spec("TM-SESS-ABANDONED")
async def test_client_that_stays_attached_or_keeps_talking_keeps_its_long_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A long request is not abandoned while its client holds the response stream open,
    nor while a client without a stream keeps sending requests: each one restarts the
    abandoned_ttl clock. Once it falls silent the clock runs out from its last request."""
    server, record = make_server()
    config = ServerConfig(abandoned_ttl=600.0, session_idle_ttl=600.0)
    ttl = 600.0
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(20 * ttl):
            attached = await mem.initialize()
            talking = await mem.initialize()
            mem.call(attached, "wait", {"tag": "held"})
            left, _ = mem.call(talking, "wait", {"tag": "polled"})
            await wait_until(lambda: "polled" in record.started, poll=0.01)
            left.client_leaves()
            for _ in range(8):
                await trio.sleep(0.75 * ttl)
                assert 200 == await status_of(mem, talking)
            last_ping = trio.current_time()

            assert {attached, talking} <= mem.table.sessions.keys()

            await wait_until(lambda: talking not in mem.table.sessions, poll=0.01)
            silent_for = trio.current_time() - last_ping

        assert ttl - 0.01 <= silent_for <= ttl + expiry_period(config) + 0.01
        assert attached in mem.table.sessions
        assert "held" not in record.cancelled
        assert 0 == mem.stats()["sessions_evicted"]


@pytest.mark.spec("TM-SESS-ABANDONED")
async def test_abandoned_expiry_can_be_turned_off(autojump_clock: trio.abc.Clock) -> None:
    """With abandoned_ttl=None a running request keeps its session however long its
    client has been gone: the old rule, for servers whose work must never be cut."""
    server, record = make_server()
    config = ServerConfig(abandoned_ttl=None, session_idle_ttl=60.0)
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(7200):
            sid = await mem.initialize()
            left, _ = mem.call(sid, "wait", {"tag": "forever"})
            await wait_until(lambda: "forever" in record.started, poll=0.01)
            left.client_leaves()
            await trio.sleep(3600)

            assert sid in mem.table.sessions

        assert "forever" not in record.cancelled


@pytest.mark.spec("TM-SESS-RELEASE")
async def test_ended_sessions_free_their_log_at_once_and_trigger_one_release(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An expired session's log is emptied when it ends, even while something still refers
    to the Session object; once the ended sessions have freed release_memory_after bytes,
    the expiry loop collects garbage and trims the heap once, a loop period later, and
    counts it in memory_releases. Sessions that freed less than a sixteenth of it do not
    trigger one."""
    server, record = make_server()
    window = ServerConfig().retention
    config = ServerConfig(session_idle_ttl=60.0, release_memory_after=window.max_bytes)
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(600):
            small = await mem.initialize()
            await wait_until(lambda: small not in mem.table.sessions, poll=0.5)
            # Half a period off the expiry loop's ticks, so that the three sessions below,
            # used within a fraction of a second, end at the same tick.
            await trio.sleep(3.5 * expiry_period(config))
            assert 0 == mem.stats()["memory_releases"]

            sids = [await mem.initialize() for _ in range(3)]
            for k, sid in enumerate(sids):
                left, _ = mem.call(sid, "stream", {"n": 300, "size": 2000, "tag": f"s{k}"})
                await wait_until(lambda k=k: f"s{k}" in record.finished, poll=0.01)
                left.client_leaves()
            held = mem.session(sids[0])
            assert held.log.retained_bytes >= window.max_bytes // 2
            await wait_until(lambda: not mem.table.sessions, poll=0.01)
            ended = trio.current_time()
            await wait_until(lambda: mem.stats()["memory_releases"] == 1, poll=0.01)
            released_after = trio.current_time() - ended
            await trio.sleep(3 * expiry_period(config))

        assert (0, 0) == (held.log.retained_events, held.log.retained_bytes)
        assert held.log.appended >= 300
        assert released_after <= expiry_period(config) + 0.02
        assert 1 == mem.stats()["memory_releases"]
        assert 0 == mem.runtime.releaser.pending


def test_release_collects_cycles_and_trims_where_glibc_is() -> None:
    """MemoryReleaser.release runs the cycle collector (an object kept only by a cycle is
    gone after it) and, on Linux with glibc, calls malloc_trim; due() follows the
    threshold, and None never releases."""
    import platform

    from trio_mcp.runtime._memory import MemoryReleaser

    class Node:
        other: object

    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    releaser = MemoryReleaser(1600)
    releaser.freed(1599)
    assert not releaser.due()
    releaser.freed(1)
    assert releaser.maybe_release()
    assert ref() is None
    assert (0, 1) == (releaser.pending, releaser.releases)
    # Below the threshold: released once a call finds that nothing ended since the last,
    # if at least a sixteenth of the threshold is pending.
    releaser.freed(99)
    assert not releaser.maybe_release()
    assert not releaser.maybe_release()
    releaser.freed(1)
    assert not releaser.maybe_release()
    assert releaser.maybe_release()
    assert (0, 2) == (releaser.pending, releaser.releases)
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert glibc == (releaser._trim is not None)
    never = MemoryReleaser(None)
    never.freed(10**12)
    assert not never.maybe_release()


@pytest.mark.spec("TM-SESS-CAP", "TM-SESS-IDLE", "TM-BP-COUNTERS")
async def test_a_session_expiring_as_an_initialize_arrives_frees_its_place_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An initialize that arrives at the cap in the same instant the expiry loop ends a
    session takes that session's place: no other idle session is evicted for it, and the
    expired one is counted once, as expired. (Which of the two tasks runs first is trio's
    choice, so the instant is tried many times.)"""
    server, _record = make_server()
    config = ServerConfig(max_sessions=2, session_idle_ttl=10, uninitialized_ttl=10)
    period = expiry_period(config)
    for _attempt in range(16):
        async with MemoryServer.open(server, config) as mem:
            with trio.fail_after(60):
                start = trio.current_time()
                await trio.sleep(0.5)
                old = await mem.initialize()
                await trio.sleep(5)
                young = await mem.initialize()
                # The first tick of the expiry loop at least the TTL after ``old``'s last
                # activity, when ``young`` has 5 s to go.
                ticks = math.ceil((0.5 + config.session_idle_ttl) / period)
                await trio.sleep_until(start + ticks * period)
                await mem.initialize()

                assert old not in mem.table.sessions
                assert young in mem.table.sessions
                stats = mem.stats()
                assert (stats["sessions_expired"], stats["sessions_evicted"]) == (1, 0)
                assert stats["sessions_open"] == 2 and stats["sessions_created"] == 3
