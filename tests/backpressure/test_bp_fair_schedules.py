# The session table under TM-SEC-FAIR, driven in memory under trio's MockClock over Hypothesis
# schedules: up to five addresses initialize (some leaving a never-ending call behind), time
# passes (so that abandoned sessions become evictable), and a legitimate client with one
# session pings now and then. Judged against a brute-force water level: an initialize from an
# address at or below its max-min fair share is never refused, a session is never taken from
# an address at or below its share, and the legitimate session is never evicted.
from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support.client import rpc_request
from support.examples import examples
from support.slow import MemoryServer, make_server

from trio_mcp import ServerConfig
from trio_mcp.protocol._fair import fair_share_level

CAPACITY = 12
LEGIT = "192.0.2.1"
ADDRESSES = [f"198.51.100.{i}" for i in range(1, 6)]

_step = st.one_of(
    st.tuples(st.just("initialize"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("initialize"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("ping"), st.just(0), st.just(False)),
    st.tuples(st.just("sleep"), st.sampled_from((1, 30, 61)), st.just(False)),
)


def _holdings(mem: MemoryServer) -> dict[str, int]:
    held: dict[str, int] = {}
    for session in mem.table.sessions.values():
        held[session.creator.peer] = held.get(session.creator.peer, 0) + 1
    return held


async def _schedule(steps: list[tuple[str, int, bool]]) -> None:
    server, _record = make_server()
    # Nothing expires within a schedule: every session that goes was taken.
    config = ServerConfig(
        max_sessions=CAPACITY, evict_abandoned_after=60.0, uninitialized_ttl=3600.0,
        session_idle_ttl=3600.0,
    )
    async with MemoryServer.open(server, config) as mem:
        legit = await mem.initialize(peer_host=LEGIT)
        for what, index, busy in steps:
            if what == "sleep":
                await trio.sleep(index)
                continue
            if what == "ping":
                _, answers = await mem.complete(legit, rpc_request("ping"))
                assert "result" in answers[-1], answers
                continue
            address = ADDRESSES[index]
            before = _holdings(mem)
            demands = dict(before)
            demands[address] = demands.get(address, 0) + 1
            level = fair_share_level(demands.values(), CAPACITY)
            full = sum(before.values()) >= CAPACITY
            params = {"protocolVersion": mem.protocol_version, "capabilities": {},
                      "clientInfo": {"name": "x", "version": "0"}}
            responder, _ = await mem.complete(
                None, rpc_request("initialize", params), peer_host=address
            )
            after = _holdings(mem)
            taken = sum(max(0, n - after.get(o, 0)) for o, n in before.items() if o != address)
            event("full table" if full else "room")
            if full:
                event("refused" if responder.status != 200 else "taken from another"
                      if taken else "gave up its own")
            if not full or demands[address] <= level:
                # At or below its share (or room): never refused.
                assert 200 == responder.status, (before, address, level)
            for other, held in before.items():
                if other != address and after.get(other, 0) < held:
                    # Taken from another address: only one above its share.
                    assert held > level, (before, after, address, level)
            assert legit in mem.table.sessions, (before, after)
            sid = dict(responder.headers).get("mcp-session-id")
            if responder.status == 200 and sid is not None and busy:
                # A call that never ends, its connection dropped: abandoned.
                call, _ = mem.call(sid, "wait", {"tag": sid})
                await trio.testing.wait_all_tasks_blocked()
                call.client_leaves()
        assert legit in mem.table.sessions


@pytest.mark.spec("TM-SEC-FAIR", "TM-SESS-CAP")
@settings(max_examples=examples(100), deadline=None)
@given(steps=st.lists(_step, min_size=10, max_size=60))
def test_any_schedule_of_initializes_keeps_every_address_its_share(
    steps: list[tuple[str, int, bool]],
) -> None:
    """Over any schedule, under the mock clock: no address at or below its fair share of the
    table is refused or taken from, and the legitimate session is never evicted."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    trio.run(_schedule, steps, clock=clock)
