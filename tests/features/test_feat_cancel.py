"""Cancellation (notifications/cancelled), driven in memory under trio's MockClock, so that
"at once" and "after the grace" are measured exactly in trio time."""

from __future__ import annotations

import logging

import pytest
import trio
from feat_support import request

from trio_mcp import Context, Server, ServerConfig


def slow_server() -> tuple[Server, trio.Event, list[float]]:
    server = Server("cancel-tests")
    started = trio.Event()
    ended_at: list[float] = []

    @server.tool()
    async def slow() -> str:
        """Sleeps for an hour."""
        started.set()
        try:
            await trio.sleep(3600)
        finally:
            ended_at.append(trio.current_time())
        return "finished"

    return server, started, ended_at


@pytest.mark.spec("U-CANCEL-4", "U-CANCEL-8")
async def test_cancel_stops_the_handler_and_sends_no_response(autojump_clock, mem, caplog):
    """A notifications/cancelled for a running tools/call stops its handler at once (within
    100 ms of trio time), no response is ever sent for it, its stream ends, and the session
    keeps working. The cancellation's reason is logged."""
    caplog.set_level(logging.INFO, logger="trio_mcp.session")
    server, started, ended_at = slow_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(30):
        call, stream = await s.start("tools/call", {"name": "slow"})
        await started.wait()
        t0 = trio.current_time()
        ack = await s.notify("notifications/cancelled", {"requestId": call["id"], "reason": "t"})
        assert ack.status == 202
        assert await stream.messages() == []  # the stream ended without a response
        assert ended_at, "the handler is still running"
        assert ended_at[0] - t0 <= 0.1
        assert await s.result("ping") == {}
        session = ms.table.sessions[s.id]
        assert call["id"] not in session.inflight
        assert session.statistics().handlers_cut == 0
        assert "cancelled by the client: 't'" in caplog.text


@pytest.mark.spec("U-CANCEL-5", "U-CANCEL-9")
@pytest.mark.parametrize(
    "params",
    [
        {"requestId": 999_999},  # unknown id
        {"requestId": "no-such-request", "reason": "x"},
        {"requestId": None},  # malformed
        {"requestId": [1]},
        {},
        None,
    ],
)
async def test_invalid_cancellations_are_ignored(autojump_clock, mem, params):
    """A cancellation of an unknown request, or a malformed one, is accepted (202) and
    ignored: a running request goes on to its response."""
    server = Server("cancel-tests")

    @server.tool()
    async def short() -> str:
        """Sleeps a second."""
        await trio.sleep(1)
        return "done"

    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(30):
        call, stream = await s.start("tools/call", {"name": "short"})
        ack = await s.notify("notifications/cancelled", params)
        assert ack.status == 202
        [answer] = await stream.messages()
        assert answer["id"] == call["id"]
        assert answer["result"]["content"][0]["text"] == "done"


@pytest.mark.spec("U-CANCEL-5", "U-CANCEL-7")
async def test_cancelling_a_finished_request_is_ignored(autojump_clock, mem):
    """Cancelling a request whose response was already sent changes nothing (the race of
    U-CANCEL-7); the session answers the next request normally."""
    server = Server("cancel-tests")
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(30):
        answer, _ = await s.call("ping")
        ack = await s.notify("notifications/cancelled", {"requestId": answer["id"]})
        assert ack.status == 202
        assert await s.result("ping") == {}


@pytest.mark.spec("U-CANCEL-2")
async def test_cancelling_initialize_is_ignored(autojump_clock, mem):
    """initialize cannot be cancelled: a cancellation naming its id is ignored."""
    ms = await mem(Server("cancel-tests"))
    ex = await ms.post(
        request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
            id="init",
        ),
        version=None,
    )
    session_id = ex.headers["mcp-session-id"]
    ack = await ms.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "init"}},
        session_id=session_id,
    )
    assert ack.status == 202
    answer = await ex.next_message()
    assert answer is not None and answer["id"] == "init" and "result" in answer


@pytest.mark.spec("U-CANCEL-4")
async def test_a_cancelled_handler_sends_nothing_more(autojump_clock, mem):
    """Once cancelled, a handler that goes on (cleanup in a shielded scope) cannot send
    progress or log messages on the request's stream any more."""
    server = Server("cancel-tests")
    started = trio.Event()
    sent_after_cancel: list[bool] = []

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Reports progress, then cleans up after cancellation."""
        await ctx.report_progress(1)
        started.set()
        try:
            await trio.sleep(3600)
        finally:
            with trio.CancelScope(shield=True):
                sent_after_cancel.append(await ctx.report_progress(2))
                sent_after_cancel.append(await ctx.log("error", "cleaning up"))
        return "finished"

    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(30):
        call, stream = await s.start(
            "tools/call", {"name": "chatty", "_meta": {"progressToken": "p"}}
        )
        await started.wait()
        await s.notify("notifications/cancelled", {"requestId": call["id"]})
        messages = await stream.messages()
        assert [m["method"] for m in messages] == ["notifications/progress"]
        assert sent_after_cancel == [False, False]


@pytest.mark.spec("TM-CANCEL-GRACE", "TM-SESS-INFLIGHT", "U-CANCEL-4")
async def test_a_shielded_handler_is_let_go_after_the_grace(autojump_clock, mem):
    """TM-CANCEL-GRACE: a handler that shields itself from cancellation cannot hold the
    session. Until cancel_grace it keeps its in-flight slot (max_inflight_requests=1 makes
    a new request 503); after it the slot is free, the request's stream ends with no
    response, and DELETE still ends the session (and its GET stream) at once, while the
    stubborn task runs on until it leaves its shield."""
    server = Server("cancel-tests")
    started = trio.Event()
    release = trio.Event()
    finished: list[str] = []

    @server.tool()
    async def stubborn() -> str:
        """Ignores cancellation until released."""
        started.set()
        with trio.CancelScope(shield=True):
            await release.wait()
        finished.append("yes")
        return "late"

    ms = await mem(server, ServerConfig(cancel_grace=2.0, max_inflight_requests=1))
    s = await ms.open_session()
    session = ms.table.sessions[s.id]
    with trio.fail_after(30):
        get = await s.get()
        call, stream = await s.start("tools/call", {"name": "stubborn"})
        await started.wait()
        t0 = trio.current_time()
        await s.notify("notifications/cancelled", {"requestId": call["id"]})
        busy = await s.post(request("ping"))
        assert busy.status == 503  # the slot is still held during the grace
        assert await stream.messages() == []
        assert trio.current_time() - t0 == pytest.approx(2.0, abs=0.01)
        assert not finished
        assert session.statistics().handlers_cut == 1
        assert await s.result("ping") == {}  # the slot is free again
        deleted = await s.delete()
        assert deleted.status == 204
        assert await get.messages() == []  # the GET stream ended with the session
        gone = await s.post(request("ping"))
        assert gone.status == 404
        assert s.id not in ms.table.sessions
        release.set()
        await trio.sleep(0.1)
        assert finished == ["yes"]


@pytest.mark.spec("TM-CANCEL-GRACE", "TM-SESS-IDLE")
async def test_a_session_with_a_stubborn_handler_still_expires(autojump_clock, mem):
    """After the grace, a stubborn handler no longer keeps its session busy: with nothing
    else in flight and no stream open, the session expires after its idle time, although
    the task itself is still inside its shield."""
    server = Server("cancel-tests")
    started = trio.Event()
    release = trio.Event()

    @server.tool()
    async def stubborn() -> str:
        """Ignores cancellation until released."""
        started.set()
        with trio.CancelScope(shield=True):
            await release.wait()
        return "late"

    ms = await mem(server, ServerConfig(cancel_grace=1.0, session_idle_ttl=10.0))
    s = await ms.open_session()
    with trio.fail_after(60):
        call, stream = await s.start("tools/call", {"name": "stubborn"})
        await started.wait()
        await s.notify("notifications/cancelled", {"requestId": call["id"]})
        assert await stream.messages() == []
        await trio.sleep(9)
        assert s.id in ms.table.sessions  # not idle for 10 s yet
        await trio.sleep(3)
        assert s.id not in ms.table.sessions
        assert ms.stats()["sessions_expired"] == 1
        assert (await s.post(request("ping"))).status == 404
        release.set()
