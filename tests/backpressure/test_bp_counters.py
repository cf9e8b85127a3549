# The counters of the legacy sessions (Runtime.statistics()'s sessions, endpoint, cluster and
# bodies), each driven through what it counts, in memory under trio's MockClock
# (spec/backpressure.md, TM-BP-COUNTERS, says what each one means); and every figure of every
# statistics record declares whether it is a gauge or a counter.
from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import attrs
import pytest
import trio
from support.client import rpc_request
from support.fixtures import wait_until
from support.slow import MemoryServer, PacedResponder, make_server

import trio_mcp.runtime
from trio_mcp import ServerConfig
from trio_mcp.runtime._budget import BodyStatistics
from trio_mcp.runtime._stats import KIND, Kind, declared
from trio_mcp.runtime.legacy._endpoint import EndpointStatistics
from trio_mcp.runtime.legacy._table import TableStatistics
from trio_mcp.runtime.store._peers import ClusterStatistics

COUNTERS = {
    "sessions_created", "sessions_deleted", "sessions_expired", "sessions_evicted",
    "sessions_abandoned", "memory_releases",
    "sessions_open", "streams_opened", "streams_open", "streams_stalled", "streams_cut",
    "requests_inflight", "events_appended", "events_evicted", "events_retained",
    "bytes_retained", "client_notifications_dropped", "sessions_refused", "client_state_refused",
    "subscriptions_refused", "bodies_refused", "bodies_timed_out", "bytes_of_bodies_arriving",
    # The bodies' pool (TM-SEC-BODIES): driven over sockets in tests/limits/test_limit_bodies.py
    # and as a pool in tests/protocol/test_proto_fair.py.
    "bodies_evicted", "body_clients_arriving",
    # With a shared store only (tests/store/): they stay at zero here.
    "sessions_adopted", "sessions_released", "store_failures", "controls_received",
    "resumes_relayed", "resumes_from_store", "stream_copies_lost",
}


#: The figures of the legacy sessions.
LEGACY = {
    name
    for record in (TableStatistics, EndpointStatistics, ClusterStatistics, BodyStatistics)
    for name, _ in declared(record)
}


def moved(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


@pytest.mark.spec("TM-BP-COUNTERS")
async def test_every_counter_moves_as_documented(autojump_clock: trio.abc.Clock) -> None:
    """Each counter of statistics() moves with what it counts, and nothing else does:
    sessions created, deleted, expired, evicted and open; streams opened, open, stalled
    and cut; requests in flight; events appended, evicted and retained, and their bytes."""
    server, record = make_server()
    config = ServerConfig(max_sessions=2)
    async with MemoryServer.open(server, config) as mem:
        def stats() -> dict[str, Any]:
            return {k: v for k, v in mem.stats().items() if k in LEGACY}

        zero = stats()
        assert COUNTERS == set(zero)
        assert all(0 == v for v in zero.values())
        with trio.fail_after(4 * config.session_idle_ttl):
            # initialize: a session, and (in SSE mode) a stream carrying one response.
            a = await mem.initialize()
            s1 = stats()
            change = moved(zero, s1)
            assert 0 < change.pop("bytes_retained") == mem.session(a).log.retained_bytes
            assert {
                "sessions_created": 1, "sessions_open": 1, "streams_opened": 1,
                "events_appended": 1, "events_retained": 1,
            } == change

            # A running request and an open GET stream are live gauges.
            mem.call(a, "wait", {"tag": "w"})
            get = mem.get(a, responder=PacedResponder(None))
            await wait_until(lambda: stats()["streams_open"] == 2, poll=0.01)
            s2 = stats()
            assert {"requests_inflight": 1, "streams_opened": 2, "streams_open": 2} == moved(
                s1, s2
            )
            get.client_leaves()
            await wait_until(lambda: stats()["streams_open"] == 1, poll=0.01)

            # A stalled reader: one stall, one cut; its messages are appended, the window
            # evicts past 256, and what is retained is counted in events and bytes.
            slow, _ = mem.call(a, "stream", {"n": 300, "size": 2000, "tag": "s"}, PacedResponder(0))
            await wait_until(lambda: stats()["streams_cut"] == 1, poll=0.01)
            await wait_until(lambda: "s" in record.finished, poll=0.01)
            await slow.connection_closed.wait()
            s3 = stats()
            change = moved(s2, s3)
            assert 1 == change["streams_stalled"] == change["streams_cut"]
            assert 301 == change["events_appended"]
            assert s3["events_evicted"] >= 301 + 1 - config.retention.max_events
            session = mem.session(a)
            assert session.log.retained_events == s3["events_retained"]
            assert session.log.retained_bytes == s3["bytes_retained"]
            assert s3["events_retained"] + s3["events_evicted"] == s3["events_appended"]

            # DELETE: the session ends (its running handler with it) and its log goes.
            deleted, _ = await mem.complete_delete(a)
            assert 204 == deleted.status
            s4 = stats()
            assert 1 == s4["sessions_deleted"]
            assert 0 == s4["sessions_open"] == s4["requests_inflight"] == s4["streams_open"]
            assert 0 == s4["events_retained"] == s4["bytes_retained"]
            assert s3["events_appended"] == s4["events_appended"]

            # Expiry, then the cap: two idle sessions, one expires; at the cap of two, a
            # third initialize evicts the least recently used.
            b = await mem.initialize()
            await trio.sleep(config.session_idle_ttl / 2)
            c = await mem.initialize()
            await wait_until(lambda: b not in mem.table.sessions, poll=1.0)
            assert 1 == stats()["sessions_expired"]
            d = await mem.initialize()
            e = await mem.initialize()
            s5 = stats()

        assert 1 == s5["sessions_evicted"]
        assert {d, e} == set(mem.table.sessions)
        assert c not in mem.table.sessions
        assert 5 == s5["sessions_created"]
        assert 2 == s5["sessions_open"]
        assert "w" in record.cancelled


@pytest.mark.spec("TM-BP-COUNTERS")
async def test_counters_survive_the_sessions_they_count(autojump_clock: trio.abc.Clock) -> None:
    """Totals are totals: the events a session appended and the window evicted still
    count after the session has ended."""
    server, _record = make_server()
    config = ServerConfig()
    async with MemoryServer.open(server, config) as mem:
        with trio.fail_after(60):
            sid = await mem.initialize()
            _, messages = await mem.complete(
                sid, rpc_request("tools/call", {"name": "stream", "arguments": {"n": 400}})
            )
            before = mem.stats()
            await mem.complete_delete(sid)
            after = mem.stats()

        assert 401 == len(messages)
        assert before["events_appended"] == after["events_appended"] == 402
        assert before["events_evicted"] == after["events_evicted"] >= 402 - 256


def _statistics_records() -> list[type]:
    """Every statistics record of the runtime: the attrs classes of trio_mcp.runtime named
    ``...Statistics``."""
    found = []
    for info in pkgutil.walk_packages(trio_mcp.runtime.__path__, "trio_mcp.runtime."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                name.endswith("Statistics") and isinstance(value, type) and attrs.has(value)
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return found


@pytest.mark.spec("TM-BP-COUNTERS")
def test_every_field_of_every_statistics_record_declares_gauge_or_counter() -> None:
    """Each figure of each statistics record says whether it is a level now (a gauge) or a
    count since the start (a counter), as /metrics exports it; a field that is a record of
    its own says so (a part), and its figures say theirs. A figure added without a kind
    cannot reach /metrics as the wrong one."""
    records = _statistics_records()
    assert len(records) >= 10, records
    for record in records:
        for field in attrs.fields(record):
            assert field.metadata.get(KIND) in set(Kind), (record.__name__, field.name)
        assert all(kind in (Kind.GAUGE, Kind.COUNTER) for _, kind in declared(record)), record
