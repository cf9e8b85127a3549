# A 2026-07-28 answer ready at once (TM-MOD-ATONCE): a handler that returns without yielding is
# answered in one response, its notifications (if any) with it as one SSE body, and nothing
# watches for its client's leaving; a handler that yields is watched from that first yield, and
# what it notified before goes out as a stream while it waits.
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import trio
from support.fixtures import StartServer, wait_until
from support.modern import call_tool, open_modern, open_raw, post, raw_events, read_until
from support.slow import tasks_named

from trio_mcp import Context, Server
from trio_mcp.runtime.backpressure._responder import Departure, run_watching_disconnect

TIMEOUT = 10

#: The task that watches for a client's leaving, on each HTTP server.
WATCHERS = {
    "trio-mcp": "trio_mcp.edges._http._Connection._read",
    "hypercorn": "trio_mcp.edges._asgi._watch_disconnect",
}


def notifying_server(gate: trio.Event) -> Server:
    """``burst`` reports progress n times without waiting, then returns; ``then_wait``
    reports once, then waits for ``gate``, reports again and returns."""
    server = Server("at-once-tests")

    @server.tool()
    async def burst(ctx: Context, n: int, size: int = 10) -> str:
        """Report progress n times, then return.

        Args:
            n: how many reports.
            size: characters of each report's message.
        """
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"{i}:" + "x" * size)
        return f"sent {n}"

    @server.tool()
    async def then_wait(ctx: Context) -> str:
        """Report, wait for the gate, report again, return."""
        await ctx.report_progress(1, 2, "before")
        await gate.wait()
        await ctx.report_progress(2, 2, "after")
        return "through"

    @server.tool()
    async def echo(text: str) -> str:
        """Echo.

        Args:
            text: what comes back.
        """
        return text

    return server


def events_of(body: bytes) -> list[dict[str, Any]]:
    out = []
    for lines in raw_events(body):
        assert 1 == len(lines) and lines[0].startswith("data: "), lines
        out.append(json.loads(lines[0][len("data: "):]))
    return out


@pytest.mark.spec("TM-MOD-ATONCE", "TM-MOD-JSON", "MT-POST-7")
async def test_an_answer_ready_at_once_starts_no_watch_for_its_client(
    live_server: StartServer, http_server: str
) -> None:
    """A call whose handler returns without yielding is answered before anything watches for
    its client's leaving: no reader task (own server), no http.disconnect task (hypercorn)."""
    live = await live_server(notifying_server(trio.Event()))
    watcher = WATCHERS[http_server]
    with trio.fail_after(TIMEOUT):
        for i in range(3):
            async with open_modern(live.url, call_tool("echo", {"text": f"now {i}"})) as answer:
                assert (200, "application/json") == (answer.status, answer.content_type)
                assert f"now {i}".encode() in await answer.read_body()
                assert [] == tasks_named(watcher)
    assert 0 == live.app.runtime.modern.stats.requests_streamed


@pytest.mark.spec("TM-MOD-ATONCE", "TM-MOD-JSON", "MT-SSE-4", "MT-SSE-6", "MU-PROG-1")
async def test_notifications_of_a_handler_that_does_not_wait_go_out_whole_with_the_answer(
    live_server: StartServer, http_server: str
) -> None:
    """Progress reported without waiting, then the result: one text/event-stream body with its
    Content-Length, the reports in order and the response last, and no watch started."""
    live = await live_server(notifying_server(trio.Event()))
    message = call_tool("burst", {"n": 3}, id="b-1", progress_token="t")
    with trio.fail_after(TIMEOUT):
        async with open_modern(live.url, message) as answer:
            body = await answer.read_body()
            assert [] == tasks_named(WATCHERS[http_server])
            length = answer.header("content-length")
            assert (200, "text/event-stream") == (answer.status, answer.content_type)
    assert length == str(len(body))
    *progress, result = events_of(body)
    assert [1, 2, 3] == [m["params"]["progress"] for m in progress]
    assert {"t"} == {m["params"]["progressToken"] for m in progress}
    assert "b-1" == result["id"] and "sent 3" == result["result"]["content"][0]["text"]
    assert 1 == live.app.runtime.modern.stats.requests_streamed


@pytest.mark.spec("TM-MOD-ATONCE", "MT-SSE-4", "TM-BP-BOUNDED")
@pytest.mark.parametrize("n, size", [(40, 10), (3, 10_000)], ids=["many", "large"])
async def test_more_than_an_answer_sent_whole_holds_is_streamed(
    live_server: StartServer, n: int, size: int
) -> None:
    """Past 16 notifications or 16 KiB, what a handler notifies without waiting is streamed
    (chunked, no Content-Length), every report in order and the result last."""
    live = await live_server(notifying_server(trio.Event()))
    message = call_tool("burst", {"n": n, "size": size}, id="m-1", progress_token=7)
    with trio.fail_after(TIMEOUT):
        response = await post(live.url, message)
    assert "text/event-stream" == response.content_type
    assert response.header("content-length") is None
    *progress, result = events_of(response.body)
    assert list(range(1, n + 1)) == [m["params"]["progress"] for m in progress]
    assert "m-1" == result["id"] and f"sent {n}" == result["result"]["content"][0]["text"]


@pytest.mark.spec("TM-MOD-ATONCE", "MT-SSE-4", "MU-CANCEL-1")
async def test_a_notification_before_a_wait_reaches_the_client_while_the_handler_waits(
    live_server: StartServer, http_server: str
) -> None:
    """A report held until the handler waits goes out as the head of a stream while it
    waits; the rest follows, and the handler is watched for its client's leaving."""
    gate = trio.Event()
    live = await live_server(notifying_server(gate))
    message = call_tool("then_wait", id="w-1", progress_token="p")
    with trio.fail_after(TIMEOUT):
        async with open_modern(live.url, message) as answer:
            assert (200, "text/event-stream") == (answer.status, answer.content_type)
            first = await answer.next_event()
            assert first is not None and "before" in first.data
            assert 1 == len(tasks_named(WATCHERS[http_server]))
            gate.set()
            rest = [json.loads(e.data) for e in [await answer.next_event() for _ in range(2)]
                    if e is not None]
    assert ["after", None] == [m.get("params", {}).get("message") for m in rest]
    assert "w-1" == rest[-1]["id"]


@pytest.mark.spec("TM-MOD-ATONCE", "MU-CANCEL-1", "MT-CANCEL-2")
async def test_a_client_leaving_while_its_held_reports_wait_cancels_the_handler(
    live_server: StartServer,
) -> None:
    """A client that leaves once its handler reported and started waiting cancels it; the
    exchange ends, and the held report is not sent after."""
    gate = trio.Event()
    live = await live_server(notifying_server(gate))
    runtime = live.app.runtime
    with trio.fail_after(TIMEOUT):
        async with open_raw(live.url, call_tool("then_wait", progress_token="p")) as sock:
            got = bytearray()
            await read_until(sock, got, b"before")
            await sock.aclose()
        await wait_until(lambda: not runtime.modern.running)
    assert 1 == runtime.modern.stats.requests_cancelled
    assert not gate.is_set()


# -- run_watching_disconnect ---------------------------------------------------------------------


class Watched:
    """A responder's ``on_disconnect`` side, recording when it is asked to watch."""

    def __init__(self) -> None:
        self.departure = Departure()
        self.disconnected = self.departure.event
        self.watches = 0

    def on_disconnect(self, callback: Callable[[], None]) -> None:
        self.watches += 1
        self.departure.on(callback)


@pytest.mark.spec("TM-MOD-ATONCE", "MU-CANCEL-1")
async def test_a_coroutine_that_never_yields_is_never_watched() -> None:
    """It returns its value, or raises its error, and nothing was asked to watch."""
    responder = Watched()
    then: list[str] = []

    async def at_once(value: int) -> int:
        if value < 0:
            raise ValueError(value)
        return value * 2

    assert 42 == await run_watching_disconnect(
        responder, lambda: None, at_once(21), then=lambda: then.append("x")  # type: ignore[arg-type]
    )
    with pytest.raises(ValueError):
        await run_watching_disconnect(responder, lambda: None, at_once(-1))  # type: ignore[arg-type]
    assert (0, []) == (responder.watches, then)


@pytest.mark.spec("TM-MOD-ATONCE", "MU-CANCEL-1")
async def test_a_coroutine_is_watched_from_just_before_its_first_yield() -> None:
    """The watch starts once, before the first yield reaches the scheduler; what the
    scheduler sends back passes through, as with await, and the value comes back."""
    responder = Watched()
    order: list[str] = []

    async def waits() -> str:
        order.append(f"start, watched {responder.watches}")
        await trio.lowlevel.checkpoint()
        order.append(f"after a checkpoint, watched {responder.watches}")
        await trio.sleep(0.001)
        return "done"

    result = await run_watching_disconnect(
        responder, lambda: None, waits(), then=lambda: order.append("then")  # type: ignore[arg-type]
    )
    assert "done" == result
    assert ["start, watched 0", "then", "after a checkpoint, watched 1"] == order
    assert 1 == responder.watches


@pytest.mark.spec("TM-MOD-ATONCE", "MU-CANCEL-1", "MT-CANCEL-1")
async def test_the_clients_leaving_cancels_a_coroutine_that_waits() -> None:
    """A coroutine waiting under the caller's scope is cancelled when the client leaves, and
    a cancellation from outside reaches it the same way."""
    for how in ("client leaves", "scope cancelled"):
        responder = Watched()
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_end, how, responder, scope)
                await run_watching_disconnect(
                    responder, scope.cancel, _sleep_forever()  # type: ignore[arg-type]
                )
        assert scope.cancelled_caught, how
        assert 1 == responder.watches


async def _end(how: str, responder: Watched, scope: trio.CancelScope) -> None:
    await trio.sleep(0.01)
    if how == "client leaves":
        responder.departure.happened()
    else:
        scope.cancel()


async def _sleep_forever() -> None:
    await trio.sleep_forever()
