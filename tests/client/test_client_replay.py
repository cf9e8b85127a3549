# Exactly once and explicit failure against a server that misbehaves on purpose
# (tests/support/replaying.py, trio and h11 on 127.0.0.1): a server that replays a dropped
# stream from its start, one that answers a resume with nothing, with a lost cursor, with a
# refusal, and a stream without ids. The client applies each message once and never waits
# for an answer that cannot come.
from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest
import trio
from support.fixtures import wait_until
from support.replaying import Replaying, serve_replaying

from trio_mcp import Client, ConnectionLost, ResumptionFailed
from trio_mcp.client import Tally
from trio_mcp.client._legacy import CATCH_UP_DEPTH, RESUME_ATTEMPTS


async def _serve(nursery: trio.Nursery, **settings: object) -> Replaying:
    state: Replaying = await nursery.start(serve_replaying, Replaying(**settings))  # type: ignore[arg-type]
    return state


def _append_to(seen: list[float]) -> Callable[[float, float | None, str | None], None]:
    return lambda progress, total, message: seen.append(progress)


@pytest.mark.spec("TM-CLIENT-ONCE", "TM-CLIENT-RESUME")
async def test_a_replayed_stream_fires_the_progress_callback_once_per_notification(
    nursery: trio.Nursery,
) -> None:
    """The server drops the call's stream after 17 of 40 progress notifications and, on the
    resume, replays the stream from its start: the progress callback fires exactly 40 times,
    1 to 40 in order, the 17 replayed ones are dropped, and the call returns its result."""
    state = await _serve(nursery, events=40, drops=(17,), resume="replay")
    seen: list[float] = []
    with trio.fail_after(20):
        async with Client(state.url) as client:
            result = await client.call_tool("count", on_progress=lambda p, t, m: seen.append(p))
            tally = client.tally()

    assert [float(i) for i in range(1, 41)] == seen
    assert ["e17"] == state.resumes
    assert [{"type": "text", "text": "done"}] == result["content"]
    assert 17 == tally.duplicates


@pytest.mark.spec("TM-CLIENT-RESUME")
async def test_the_resume_waits_the_retry_the_server_gave(nursery: trio.Nursery) -> None:
    """The re-attach comes no sooner than the stream's ``retry`` (300 ms here)."""
    state = await _serve(nursery, events=10, drops=(4,), resume="correct", retry_ms=300)
    with trio.fail_after(20):
        async with Client(state.url) as client:
            start = trio.current_time()
            await client.call_tool("count", on_progress=lambda p, t, m: None)
            took = trio.current_time() - start

    assert ["e4"] == state.resumes
    assert took >= 0.3


@pytest.mark.spec("TM-CLIENT-RESUME")
async def test_a_resumption_required_signal_re_attaches_without_waiting_for_the_close(
    nursery: trio.Nursery,
) -> None:
    """After 12 events the server sends `resumption-required` (a stall cut) and keeps the
    connection open: the client re-attaches from the last id at once, and all 40
    notifications and the result arrive, each once."""
    state = await _serve(nursery, events=40, drops=(), resume="correct", signal_after=12)
    seen: list[float] = []
    with trio.fail_after(10):
        async with Client(state.url) as client:
            result = await client.call_tool("count", on_progress=_append_to(seen))

    assert ["e12"] == state.resumes
    assert [float(i) for i in range(1, 41)] == seen
    assert [{"type": "text", "text": "done"}] == result["content"]


async def _count(state: Replaying) -> tuple[str, list[float], Tally]:
    """Call ``count`` on ``state``'s server: its text, the progress seen, the tally."""
    seen: list[float] = []
    with trio.fail_after(10):
        async with Client(state.url) as client:
            result = await client.call_tool("count", on_progress=_append_to(seen))
            return result["content"][0]["text"], seen, client.tally()


@pytest.mark.spec("TM-CLIENT-CATCHUP", "TM-CLIENT-ONCE")
async def test_a_resumed_stream_is_read_once_more_from_its_cursor_after_its_priming_event(
    nursery: trio.Nursery,
) -> None:
    """A resume answered with two events, a priming event and the rest without the three
    events that followed (the Python SDK's server's window between its replay and its live
    tail): the client reads the stream again from its cursor before it reads on, and the
    progress callback fires 1 to 40 in order, once each."""
    state = await _serve(nursery, events=40, drops=(17,), resume="window")
    text, seen, tally = await _count(state)

    assert "done" == text
    assert [float(i) for i in range(1, 41)] == seen
    assert ["e17", "e19"] == state.resumes
    assert 1 == tally.catch_ups


@pytest.mark.spec("TM-CLIENT-CATCHUP")
async def test_a_refused_catch_up_read_leaves_the_call_to_its_resumed_stream(
    nursery: trio.Nursery,
) -> None:
    """A server that refuses the second read (409: one connection a stream) does not fail
    the call: it returns with what its resumed stream brought, the withheld events missing."""
    state = await _serve(nursery, events=40, drops=(17,), resume="window", catch_up="refuse")
    text, seen, _tally = await _count(state)

    assert "done" == text
    assert [float(i) for i in range(1, 41) if i not in (20, 21, 22)] == seen


@pytest.mark.spec("TM-CLIENT-CATCHUP")
async def test_a_server_that_primes_every_read_gets_a_bounded_number_of_them(
    nursery: trio.Nursery,
) -> None:
    """A server whose every answer to a second read starts with a priming event of its own
    would have each catch-up read start another: the client nests CATCH_UP_DEPTH of them at
    most, and the call returns, each notification applied once."""
    state = await _serve(nursery, events=40, drops=(17,), resume="window", catch_up="prime")
    text, seen, tally = await _count(state)

    assert "done" == text
    assert [float(i) for i in range(1, 41)] == seen
    assert CATCH_UP_DEPTH == tally.catch_ups == len(state.resumes) - 1


@pytest.mark.spec("TM-CLIENT-GAP")
@pytest.mark.parametrize(("resume", "code"), [("gap", -31001), ("empty", None),
                                              ("refuse", -32600)])
async def test_a_resume_the_server_cannot_serve_fails_the_call(
    nursery: trio.Nursery, resume: str, code: int | None
) -> None:
    """A resume answered with -31001 (and a resumption-failed event) or refused (404) fails
    the call with ResumptionFailed at once; one answered with an empty stream does after
    RESUME_ATTEMPTS such answers in a row (a server may answer so while a connection it has
    not yet seen go still holds the stream)."""
    state = await _serve(nursery, events=40, drops=(17,), resume=resume)
    seen: list[float] = []
    with trio.fail_after(10):
        async with Client(state.url) as client:
            with pytest.raises(ResumptionFailed) as caught:
                await client.call_tool("count", on_progress=lambda p, t, m: seen.append(p))

    assert (RESUME_ATTEMPTS if resume == "empty" else 1) == len(state.resumes)
    assert code == caught.value.code
    assert [float(i) for i in range(1, 18)] == seen


@pytest.mark.spec("TM-CLIENT-GAP")
async def test_a_stream_without_ids_that_drops_fails_the_call(nursery: trio.Nursery) -> None:
    """A stream whose events carry no id cannot be resumed: its drop fails the call with
    ConnectionLost, and no resume is tried."""
    state = await _serve(nursery, events=40, drops=(17,), with_ids=False)
    with trio.fail_after(10):
        async with Client(state.url) as client:
            with pytest.raises(ConnectionLost):
                await client.call_tool("count", on_progress=lambda p, t, m: None)

    assert [] == state.resumes


@pytest.mark.spec("TM-CLIENT-GAP")
async def test_a_dropped_2026_07_28_stream_fails_the_call(nursery: trio.Nursery) -> None:
    """A 2026-07-28 call's stream (no ids: nothing to resume) that drops after 17 of 40
    progress notifications fails the call with ConnectionLost at once; no resume is tried."""
    state = await _serve(nursery, events=40, drops=(17,), modern=True)
    seen: list[float] = []
    with trio.fail_after(10):
        async with Client(state.url) as client:
            with pytest.raises(ConnectionLost):
                await client.call_tool("count", on_progress=_append_to(seen))
            era = client.era

    assert "modern" == era.value
    assert [float(i) for i in range(1, 18)] == seen
    assert [] == state.resumes


@pytest.mark.slow
@pytest.mark.spec("TM-CLIENT-ONCE", "TM-CLIENT-RESUME")
@pytest.mark.parametrize("resume", ["replay", "correct"])
async def test_a_thousand_random_drops_apply_every_message_once(
    nursery: trio.Nursery, resume: str
) -> None:
    """1,000 random drop points (50 streams of 200 events, 20 drops each), against a server
    that replays from the start or one that resumes after the cursor: every progress
    notification reaches the callback once, in order, none is lost, and every call returns."""
    rng = random.Random(39)
    applied_twice = lost = drops = 0
    with trio.fail_after(240):
        for _ in range(50):
            points = sorted(rng.sample(range(1, 201), 20))
            if resume == "correct":
                cuts = [points[0]] + [b - a for a, b in itertools.pairwise(points)]
            else:
                cuts = points
            state = await _serve(nursery, events=200, drops=tuple(cuts), resume=resume)
            seen: list[float] = []
            async with Client(state.url) as client:
                result = await client.call_tool("count", on_progress=_append_to(seen))
            drops += len(state.resumes)
            applied_twice += len(seen) - len(set(seen))
            lost += len(set(range(1, 201)) - {int(p) for p in seen})
            assert [{"type": "text", "text": "done"}] == result["content"]

    assert (1000, 0, 0) == (drops, applied_twice, lost)


async def test_a_flood_of_server_requests_is_answered_with_bounded_tasks(
    nursery: trio.Nursery,
) -> None:
    """2,000 server requests on one call's stream are all answered, at most 16 at a time in
    tasks of their own (past them the stream waits), and the call returns."""
    state = await _serve(nursery, events=5, drops=(), asks=2000)
    with trio.fail_after(60):
        async with Client(state.url) as client:
            result = await client.call_tool("count")
            # The last answers may still be on their way: the server has no event for them.
            await wait_until(lambda: state.answered >= 2000)

    assert [{"type": "text", "text": "done"}] == result["content"]
    assert 2000 == state.answered


@pytest.mark.spec("TM-CLIENT-GAP")
async def test_an_event_past_the_size_bound_fails_the_call(nursery: trio.Nursery) -> None:
    """An event larger than the client reads (64 MiB) ends the stream; its resume brings
    the same event, so nothing: the call fails with ResumptionFailed, promptly."""
    state = await _serve(nursery, events=5, drops=(), resume="correct", huge=65 * 2**20)
    with trio.fail_after(60):
        async with Client(state.url) as client:
            with pytest.raises(ResumptionFailed):
                await client.call_tool("count")
