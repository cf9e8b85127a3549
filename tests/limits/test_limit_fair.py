# The first five rows of issue 35's table, over real sockets against a server in a process of
# its own (tests/support/served.py), each with a legitimate client watched beside it: what one
# client, or a handful of addresses (127.0.0.x on loopback), did to lock others out or grow
# the server, and that it no longer does. Each checks the server's resident size against the
# bound its settings state (TM-SEC-MEMORY, TM-SEC-FAIR, the README's memory promise) while the
# attack holds, and within 10% of where it started once the attack's sessions, listeners or
# tasks have ended. Where the counts would take minutes here, they are scaled down
# with the limits they run against, keeping each attack's shape; the docstrings say how.
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Final

import h11
import pytest
import trio
from support.attack import neighbour_pinging
from support.client import (
    dumps,
    initialize_params,
    open_session,
    open_stream,
    post_headers,
    request,
    rpc_request,
)
from support.modern import call_tool, messages_of, modern_headers, modern_request
from support.served import Served, served

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

MiB: Final = 1024 * 1024
TASKS: Final = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


async def session_from(url: str, local: str) -> str:
    """Initialize a session from ``local`` (and send notifications/initialized): its id."""
    response = await request(
        url, "POST", post_headers(), dumps(rpc_request("initialize", initialize_params())),
        local=local,
    )
    assert 200 == response.status, response.body[:300]
    session_id = response.header("mcp-session-id")
    assert session_id is not None
    ack = await request(
        url, "POST", post_headers(session_id=session_id),
        dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), local=local,
    )
    assert 202 == ack.status
    return session_id


async def settle_rss(srv: Served, since: int | None = None) -> int:
    """The server's resident size once it has released what ended (TM-SESS-RELEASE):
    ``since`` is the count of its releases taken before the end (None: nothing ended, so
    no release is coming)."""
    if since is not None:
        await srv.released(since)
    await trio.sleep(0.5)
    return srv.rss_kib()


def figures(before: int, peak: int, after: int) -> str:
    """The resident sizes, as the assertions report them (and print, for -s)."""
    grown = (peak - before) // 1024
    text = f"before {before} KiB, peak {peak} KiB (+{grown} MiB), after {after} KiB"
    print(text)
    return text


@pytest.mark.spec("TM-SEC-MEMORY", "TM-SESS-RELEASE", "TM-SEC-FAIR")
async def test_row1_calls_with_4mb_arguments_hold_no_more_than_the_clients_budget(
    tmp_path: Path,
) -> None:
    """Six sessions of one address each make 16 legacy tools/call with a 4 MB argument to a
    tool that never returns, and drop every connection (the issue made 64 each: +1,480 MiB
    for 30 minutes; 16 keep the shape, and all but a few are refused either way). The calls
    past the client's 64 MiB budget get 503 naming it; the server grows by less than that
    budget and the sessions' windows; the neighbour is never refused; once the six sessions
    are deleted the server is back within 10% of its start (the release was told of the
    arguments, not just the logs)."""
    argument = "x" * (4 * 1000 * 1000)
    attacker = "127.0.0.2"
    async with served(tmp_path) as srv:
        neighbour_session = await open_session(srv.url)
        before = await settle_rss(srv)
        statuses: list[int] = []
        budgets: set[str] = set()
        with trio.fail_after(240):
            async with neighbour_pinging(neighbour_session) as neighbour:
                sessions = [await session_from(srv.url, attacker) for _ in range(6)]
                for sid in sessions:
                    for _ in range(16):
                        call = rpc_request("tools/call", {"name": "hold",
                                                          "arguments": {"data": argument}})
                        async with open_stream(
                            srv.url, "POST", post_headers(session_id=sid), dumps(call),
                            local=attacker,
                        ) as stream:
                            statuses.append(stream.status)
                            if stream.status == 503:
                                error = json.loads(await stream.read_body())["error"]
                                budgets.add(error["data"]["budget"])
                # Every connection dropped: the handlers hold their arguments, abandoned.
                await srv.until(lambda s: s["streams_open"] == 0)
                peak = srv.rss_kib()
                held = (await srv.stats())["request_memory_held"]
                releases = await srv.releases()
                for sid in sessions:
                    await request(srv.url, "DELETE", post_headers(session_id=sid), local=attacker)
            after = await settle_rss(srv, releases)

    admitted = statuses.count(200)
    assert admitted + statuses.count(503) == 96, statuses
    # Each admitted call holds its 4 MB argument (its body's bytes went with its connection).
    assert 8 <= admitted <= 16, statuses
    assert budgets <= {"request_memory_per_client", "request_memory_per_session"}, budgets
    assert held <= 64 * MiB
    assert [] == neighbour.failures
    # The bound: the client's budget, the sessions' windows (512 KiB and 28 KiB each), and
    # what reading and decoding the refused bodies made, one at a time (3 x 4 MB).
    bound_kib = (64 * MiB + 7 * (512 + 28) * 1024 + 12 * MiB) // 1024
    shown = figures(before, peak, after)
    assert peak - before <= bound_kib, shown
    assert after - before <= before // 10, shown


@pytest.mark.spec("TM-SEC-MEMORY", "TM-SEC-STATE", "TM-SESS-RELEASE")
async def test_row2_listen_filters_are_charged_and_given_back(tmp_path: Path) -> None:
    """48 subscriptions/listen streams of one address, each with 255 resource URIs: URIs of
    16,000 bytes (the issue's) are refused -32602 at once (max_uri_bytes, 8 KiB); URIs of
    8,000 bytes (2 MB a filter) are admitted until the client's 64 MiB budget, then 503 naming
    it. The server grows by less than that budget, the neighbour is never refused, and once
    the streams close it is back within 10% of its start (the issue measured +579 MiB, 93%
    still resident after the close)."""
    attacker = "127.0.0.3"

    def listen(size: int, n: int) -> dict[str, Any]:
        uris = [f"test://r/{n}-{i}-" + "u" * (size - 20) for i in range(255)]
        return modern_request(
            "subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}}
        )

    async with served(tmp_path) as srv:
        neighbour_session = await open_session(srv.url)
        before = await settle_rss(srv)
        with trio.fail_after(240):
            async with neighbour_pinging(neighbour_session) as neighbour:
                long = listen(16_000, 0)
                refused = await request(srv.url, "POST", modern_headers(long), dumps(long),
                                        local=attacker)
                [answer] = messages_of(refused)
                statuses = []
                async with contextlib.AsyncExitStack() as streams:
                    for n in range(48):
                        message = listen(8_000, n)
                        stream = await streams.enter_async_context(open_stream(
                            srv.url, "POST", modern_headers(message), dumps(message),
                            local=attacker,
                        ))
                        statuses.append(stream.status)
                    await srv.until(lambda s: s["listeners_open"] == statuses.count(200))
                    peak = srv.rss_kib()
                    held = (await srv.stats())["request_memory_held"]
                    releases = await srv.releases()
                await srv.until(lambda s: s["listeners_open"] == 0)
            after = await settle_rss(srv, releases)

    assert -32602 == answer["error"]["code"], answer
    assert 1 <= statuses.count(200) <= 16 and statuses.count(200) + statuses.count(503) == 48
    assert held <= 64 * MiB
    assert [] == neighbour.failures
    bound_kib = (64 * MiB + 16 * MiB) // 1024
    shown = figures(before, peak, after)
    assert peak - before <= bound_kib, shown
    assert after - before <= before // 10, shown


async def open_listens(
    srv: Served, opened: contextlib.AsyncExitStack, local: str, n: int
) -> list[int]:
    """Open ``n`` listen streams from ``local``, kept open in ``opened``: the status of each
    (0: the connection was refused or dropped)."""
    empty = modern_request("subscriptions/listen", {"notifications": {}})
    statuses: list[int] = []
    for _ in range(n):
        try:
            stream = await opened.enter_async_context(open_stream(
                srv.url, "POST", modern_headers(empty), dumps(empty), local=local
            ))
        except (OSError, trio.BrokenResourceError, h11.RemoteProtocolError):
            statuses.append(0)
            continue
        statuses.append(stream.status)
    return statuses


@pytest.mark.spec("TM-SEC-FAIR", "TM-HTTP-OWN")
@pytest.mark.parametrize("http_server", ["trio-mcp", "hypercorn"])
async def test_row3_listen_streams_of_one_address_lock_no_one_out(
    tmp_path: Path, http_server: str
) -> None:
    """One address opens listen streams until the server's connections (own server) and
    streams are all its own (the issue opened 4,096 against a global cap of 4,096; here 256
    connections and 128 streams): past its share it gets 503. A client at another address
    then opens a session, pings and opens a listen stream of its own, all served at once,
    each taking from the address holding the most. Memory stays under the streams' and
    connections' small cost, and is back within 10% once they close.

    "Before" is taken after a warm-up round of the same 256 connections, closed and
    released: the first 256 connections at once grow the C heap for good (by 4 MiB on the own
    server, 7 MiB under hypercorn), and what they leave is free heap between pages that live
    objects share, which malloc_trim cannot give back; the objects themselves are gone (the
    heap in use is 0.3 MiB over the start), and the next rounds reuse that heap instead of
    growing it. Measured from a cold start of 51 MiB, hypercorn's rounds came back at +2 to
    +4.7 MiB, too close to the 10% for a test (benchmarks/BACKPRESSURE-NOTES.md)."""
    attacker = "127.0.0.4"
    settings = {"http_max_connections": 256, "max_streams": 128}
    async with served(tmp_path, settings, http_server=http_server) as srv:
        cold = await settle_rss(srv)
        with trio.fail_after(240):
            async with contextlib.AsyncExitStack() as warm:
                await open_listens(srv, warm, attacker, 256)
                await srv.until(lambda s: s["listeners_open"] == 128)
                releases = await srv.releases()
            await srv.until(lambda s: s["listeners_open"] == 0)
            before = await settle_rss(srv, releases)
            opened = contextlib.AsyncExitStack()
            statuses = await open_listens(srv, opened, attacker, 256)
            await srv.until(lambda s: s["listeners_open"] == 128)
            peak = srv.rss_kib()
            # The legitimate client, from 127.0.0.1: a session, a ping, a listen.
            neighbour = await open_session(srv.url)
            ping = await neighbour.call("ping")
            listen = modern_request("subscriptions/listen", {"notifications": {}})
            async with open_stream(srv.url, "POST", modern_headers(listen),
                                   dumps(listen)) as own:
                own_status = own.status
                first = await own.next_event()
            stats = await srv.stats()
            releases = await srv.releases()
            await opened.aclose()
            await srv.until(lambda s: s["listeners_open"] == 0)
            after = await settle_rss(srv, releases)

    pools = {k: v for k, v in stats.items() if k.startswith(("streams_", "connections_"))}
    assert 128 == statuses.count(200), statuses
    assert statuses.count(503) >= 1
    assert "result" in ping
    assert 200 == own_status and first is not None
    # Room was made at the attacker's expense: a stream of its, or (own server) a
    # connection of its, which may have been one of its streams.
    assert stats["streams_refused"] >= 1, json.dumps(pools)
    assert stats["streams_evicted"] + stats.get("connections_evicted", 0) >= 1, pools
    shown = f"cold start {cold} KiB; " + figures(before, peak, after)
    assert peak - before <= 48 * 1024, shown
    assert after - before <= before // 10, shown


@pytest.mark.spec("TM-SEC-FAIR", "TM-TASK-BOUND")
async def test_row4_sixteen_addresses_of_tasks_lock_out_no_seventeenth(tmp_path: Path) -> None:
    """Sixteen addresses fill every running task slot (the issue's 16 x 256 against 4,096;
    here 16 x 16 against max_tasks=256, tasks of 3 s so that they are all running at once): a
    seventeenth address gets its task at once, the newest task of one of the sixteen failing
    for it; once the tasks have ended, every address gets new ones at once (the issue: 503
    for the whole task_ttl, 15 minutes); the ended tasks' results stay readable. Memory stays
    under the tasks' budget and is back within 10% once their TTL has passed."""
    settings = {"max_tasks": 256, "task_ttl": 8.0}
    addresses = [f"127.0.1.{i}" for i in range(1, 17)]

    async def create(srv: Served, local: str, seconds: float) -> dict[str, Any]:
        message = call_tool("job", {"seconds": seconds}, capabilities=TASKS)
        response = await request(srv.url, "POST", modern_headers(message), dumps(message),
                                 local=local)
        [answer] = messages_of(response)
        return answer

    async with served(tmp_path, settings) as srv:
        before = await settle_rss(srv)
        with trio.fail_after(240):
            created: list[dict[str, Any]] = []

            async def fill(local: str) -> None:
                for _ in range(16):
                    created.append(await create(srv, local, 3.0))

            async with trio.open_nursery() as nursery:
                for local in addresses:
                    nursery.start_soon(fill, local)
            running = (await srv.stats())["tasks_running"]
            newcomer = await create(srv, "127.0.1.17", 3.0)
            stats = await srv.stats()
            peak = srv.rss_kib()
            # What the tasks hold is freed when their records expire, after this.
            releases = await srv.releases()
            await srv.until(lambda s: s["tasks_running"] == 0)
            again = [await create(srv, local, 0.0) for local in [*addresses, "127.0.1.17"]]
            finished = created[0]["result"]["taskId"]
            get = modern_request("tasks/get", {"taskId": finished}, capabilities=TASKS)
            read = messages_of(await request(srv.url, "POST", modern_headers(get), dumps(get),
                                             local=addresses[0]))
            await srv.until(lambda s: s["tasks_alive"] == 0)
            after = await settle_rss(srv, releases)

    assert all("task" == a["result"]["resultType"] for a in created), created
    assert 256 == running
    assert "task" == newcomer["result"]["resultType"], newcomer
    assert (1, 0) == (stats["tasks_preempted"], stats["tasks_refused"]), stats
    assert all("result" in a for a in again), again
    assert read[0]["result"]["status"] in ("completed", "failed")
    shown = figures(before, peak, after)
    assert peak - before <= (64 * MiB + 32 * MiB) // 1024, shown
    assert after - before <= before // 10, shown


@pytest.mark.spec("TM-SEC-FAIR", "TM-SESS-CAP")
async def test_row5_five_addresses_initializing_never_evict_a_client_at_its_share(
    tmp_path: Path,
) -> None:
    """Five addresses send 220 initializes each at a table of 1,000 (the issue: 2,200 each at
    10,000), while a legitimate session at a sixth address, pinged before and throughout, is
    never evicted: every session past the table's size took the place of an attacker's. The
    attackers then delete what is left of theirs and the server is back within 10% of its
    start (taken after a first such wave, deleted); while they lived it held less than their
    windows.

    The idle TTL (10 minutes) outlasts the test, so that the table fills however long the
    flood takes: with 6 s, a machine slow enough that the flood took longer let the first
    sessions expire before the table was full, and nothing was evicted (366 expired, 0
    evicted, in CI under load). The end by DELETE frees the sessions by the same path as an
    expiry (TM-SESS-RELEASE); test_bp_abandoned_rss.py covers the expiry itself."""
    settings = {"max_sessions": 1000, "session_idle_ttl": 600.0}
    attackers = [f"127.0.2.{i}" for i in range(1, 6)]
    initialize = dumps(rpc_request("initialize", initialize_params()))
    async with served(tmp_path, settings) as srv:
        legit = await open_session(srv.url)
        assert "result" in await legit.call("ping")
        codes: list[int] = []
        taken: dict[str, list[str]] = {local: [] for local in attackers}
        gone: list[int] = []
        with trio.fail_after(240):
            # Pinged from the start, once a second: a client that comes now and then, whose
            # requests are not what is measured.
            async with trio.open_nursery() as pinger:
                failures: list[dict[str, Any]] = []

                async def now_and_then() -> None:
                    while True:
                        answer = await legit.call("ping")
                        if "result" not in answer:
                            failures.append(answer)
                        await trio.sleep(1.0)

                pinger.start_soon(now_and_then)

                async def flood(local: str) -> None:
                    for _ in range(220):
                        response = await request(srv.url, "POST", post_headers(), initialize,
                                                 local=local)
                        codes.append(response.status)
                        if (sid := response.header("mcp-session-id")) is not None:
                            taken[local].append(sid)

                async def delete_theirs(local: str) -> None:
                    for sid in taken[local]:
                        response = await request(srv.url, "DELETE",
                                                 post_headers(session_id=sid), local=local)
                        gone.append(response.status)

                async def wave() -> None:
                    async with trio.open_nursery() as nursery:
                        for local in attackers:
                            nursery.start_soon(flood, local)

                async def delete_all() -> None:
                    async with trio.open_nursery() as nursery:
                        for local in attackers:
                            nursery.start_soon(delete_theirs, local)
                    await srv.until(lambda s: s["sessions_open"] == 1)

                # A first wave, deleted, before "before": the first 1,000 sessions grow the
                # C heap for good (free pages between pages that live objects share, which
                # no trim gives back; row 3 and benchmarks/BACKPRESSURE-NOTES.md), and the
                # later waves reuse it. Measured from a cold start, the after-figure was 5.6
                # MiB over a 55 MiB start once in CI; the promise is that nothing stays.
                await wave()
                releases = await srv.releases()
                await delete_all()
                before = await settle_rss(srv, releases)
                warm = await srv.stats()
                codes.clear()
                gone.clear()
                for sids in taken.values():
                    sids.clear()
                await wave()
                stats = await srv.stats()
                peak = srv.rss_kib()
                last = await legit.call("ping")
                await delete_all()
                # Counted once all are gone: the deletes take seconds, and what the first
                # of them freed may have been released while the rest still held theirs.
                releases = await srv.releases()
                after = await settle_rss(srv, releases)
                pinger.cancel_scope.cancel()

    assert [] == failures
    assert "result" in last
    assert 1100 == codes.count(200) + codes.count(503)
    # Nothing expired: the table filled, and each session past it evicted an attacker's.
    created, evicted = (stats[k] - warm[k] for k in ("sessions_created", "sessions_evicted"))
    assert stats["sessions_open"] == 1000 and stats["sessions_expired"] == 0, stats
    assert evicted == created - 999 >= 50, (stats, warm)
    # The evicted are gone (404); the rest are deleted by their own client.
    assert gone.count(200) + gone.count(202) + gone.count(204) == 999, sorted(set(gone))
    bound_kib = 1000 * (512 + 28)
    shown = figures(before, peak, after)
    assert peak - before <= bound_kib, shown
    assert after - before <= before // 10, shown
