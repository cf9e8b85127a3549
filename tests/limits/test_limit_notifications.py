# The notification flood of issue 20, over a real socket: one POST holding a batch of tens of
# thousands of notifications/roots/list_changed (a 2025-03-26 session, which may batch), while
# a neighbour session keeps pinging. Bounded: 3 POSTs of 20,000 notifications, on loopback.
from __future__ import annotations

import logging
import resource

import pytest
import trio
from support.attack import NEIGHBOUR_P99, neighbour_pinging, server_log_size, tasks_named
from support.client import notification, open_session
from support.fixtures import StartServer

pytestmark = pytest.mark.usefixtures("no_server_errors")

FLOOD = 20_000


@pytest.mark.slow
@pytest.mark.spec("TM-SEC-NOTIFY", "TM-SEC-LOG")
async def test_a_flood_of_notifications_costs_one_task_and_leaves_the_neighbour_served(
    live_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Three batches of 20,000 list_changed notifications to a session whose roots hook
    asks a client that never answers: each is acknowledged with 202, the session runs one
    hook task, the process grows by under 64 MiB, the log by a few lines, and a neighbour
    session's pings keep a p99 within 250 ms (NEIGHBOUR_P99) throughout."""
    live = await live_server()
    attacker = await open_session(
        live.url, protocol_version="2025-03-26", capabilities={"roots": {"listChanged": True}}
    )
    neighbour_session = await open_session(live.url)
    batch = [notification("notifications/roots/list_changed") for _ in range(FLOOD)]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with caplog.at_level(logging.INFO, logger="trio_mcp"), trio.fail_after(60):
        async with neighbour_pinging(neighbour_session) as neighbour:
            await trio.sleep(0.2)
            for _ in range(3):
                assert 202 == (await attacker.post(batch)).status
            await trio.sleep(0.5)
            hook_tasks = tasks_named("mcp:notification-hooks")
            per_notification = tasks_named("mcp:notifications/")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before

    assert 1 == len(hook_tasks)
    assert [] == per_notification
    assert [] == neighbour.failures
    assert neighbour.p99() < NEIGHBOUR_P99, str(neighbour)
    assert grown_kib < 64 * 1024, grown_kib
    logged = server_log_size(caplog)
    assert logged.records < 20 and logged.chars < 20_000, logged
