# What a client's notifications may cost the server (TM-SEC-NOTIFY, TM-SEC-LOG): one task
# and a bounded queue per session, merged duplicates, and log lines that are few, escaped and
# short. In memory under trio's MockClock; the attack over real sockets is in tests/limits/.
from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
from feat_support import MemoryServer, request
from support.attack import tasks_named

from trio_mcp import Server, ServerConfig, SessionContext

StartMemory = Any


def hooked_server(method: str) -> tuple[Server, list[Any], trio.Event]:
    """A server whose hook for ``method`` records its params and waits for ``release``."""
    server = Server("notification-limits")
    seen: list[Any] = []
    release = trio.Event()

    @server.on_notification(method)
    async def hook(session: SessionContext, params: Any) -> None:
        seen.append(dict(params))
        await release.wait()

    return server, seen, release


@pytest.mark.spec("TM-SEC-NOTIFY")
async def test_notifications_arriving_while_their_hook_runs_are_merged(
    autojump_clock: trio.abc.Clock, mem: StartMemory
) -> None:
    """Fifty list_changed notifications while the first one's hook still runs cost one
    task: the hook runs once for the first and once more for all the others."""
    server, seen, release = hooked_server("notifications/roots/list_changed")
    ms: MemoryServer = await mem(server)
    s = await ms.open_session({"roots": {"listChanged": True}})
    with trio.fail_after(10):
        for _ in range(50):
            assert 202 == (await s.notify("notifications/roots/list_changed")).status
        await trio.sleep(0.1)
        assert 1 == len(seen)
        assert 1 == len(tasks_named("mcp:notification-hooks"))
        release.set()
        await trio.sleep(0.1)
    assert 2 == len(seen)
    session = ms.table.sessions[s.id]
    assert 48 == session.statistics().client_notifications_merged
    assert [] == tasks_named("mcp:notification-hooks")


@pytest.mark.spec("TM-SEC-NOTIFY")
async def test_distinct_notifications_past_the_queue_are_dropped_and_counted(
    autojump_clock: trio.abc.Clock, mem: StartMemory, caplog: pytest.LogCaptureFixture
) -> None:
    """With a hook busy, at most ``max_pending_notifications`` distinct notifications wait;
    the ones past it are dropped, counted, and logged once; the rest run in order."""
    server, seen, release = hooked_server("notifications/custom")
    ms: MemoryServer = await mem(server, ServerConfig(max_pending_notifications=4))
    s = await ms.open_session()
    with caplog.at_level(logging.WARNING, logger="trio_mcp"), trio.fail_after(10):
        for i in range(20):
            assert 202 == (await s.notify("notifications/custom", {"n": i})).status
        release.set()
        await trio.sleep(0.1)
    # The first ran at once; four waited; fifteen were dropped.
    assert [{"n": i} for i in range(5)] == seen
    assert 15 == ms.stats()["client_notifications_dropped"]
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert 1 == len(dropped)


@pytest.mark.spec("TM-SEC-LOG")
async def test_a_hook_that_keeps_failing_logs_one_traceback_per_interval(
    autojump_clock: trio.abc.Clock, mem: StartMemory, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook the client can make fail on every notification logs its traceback once per
    interval, not once per notification; the session goes on."""
    server = Server("failing-hook")

    @server.on_notification("notifications/custom")
    async def broken(session: SessionContext, params: Any) -> None:
        raise RuntimeError("boom")

    ms: MemoryServer = await mem(server)
    s = await ms.open_session()
    with caplog.at_level(logging.WARNING, logger="trio_mcp"), trio.fail_after(10):
        for i in range(30):
            await s.notify("notifications/custom", {"n": i})
            await trio.sleep(0.01)
        assert {} == await s.result("ping")
    failures = [r for r in caplog.records if "hook" in r.getMessage() and r.exc_info]
    assert 1 == len(failures)


@pytest.mark.spec("TM-SEC-LOG")
async def test_a_cancellation_reason_is_logged_escaped_and_cut(
    autojump_clock: trio.abc.Clock, mem: StartMemory, caplog: pytest.LogCaptureFixture
) -> None:
    """The reason a client gives for a cancellation reaches the log on one line, escaped
    and cut short: it cannot forge a record or fill the disk."""
    server = Server("cancel-reason")
    started = trio.Event()

    @server.tool()
    async def wait() -> str:
        """Waits forever."""
        started.set()
        await trio.sleep_forever()
        return "never"

    ms: MemoryServer = await mem(server)
    s = await ms.open_session()
    forged = "done\nCRITICAL trio_mcp: forged record " * 2000
    with caplog.at_level(logging.INFO, logger="trio_mcp"), trio.fail_after(10):
        message = request("tools/call", {"name": "wait"})
        await s.post(message)
        await started.wait()
        await s.notify(
            "notifications/cancelled", {"requestId": message["id"], "reason": forged}
        )
        await trio.sleep(0.1)
    [line] = [r.getMessage() for r in caplog.records if "cancelled by the client" in r.getMessage()]
    assert "\n" not in line
    assert len(line) < 400
