# The ledger's exactly-once (trio_mcp/client/_ledger.py) under Hypothesis: whatever order of
# drops and replays a server deals (replay from the start, from any earlier point, the same
# event twice in a row, responses repeated), each progress notification and the response are
# applied once, and in order.
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from trio_mcp.client._ledger import EVENT_IDS_KEPT, Ledger


def _progress(token: Any, n: int) -> dict[str, Any]:
    return {"progressToken": token, "progress": n, "total": 100}


@st.composite
def deliveries(draw: st.DrawFn) -> list[int]:
    """The order a replaying server sends events 1..n in: connections that each restart at
    an earlier point (0 is the start) and stop at a later one, until the end is reached."""
    n = draw(st.integers(1, 60))
    sent: list[int] = []
    reached = 0
    while reached < n:
        start = draw(st.integers(0, reached))
        stop = draw(st.integers(reached + 1, n))
        sent.extend(range(start + 1, stop + 1))
        if draw(st.booleans()):
            sent.append(stop)  # the same event twice in a row
        reached = stop
    return sent


@pytest.mark.spec("TM-CLIENT-ONCE")
@settings(max_examples=examples(200))
@given(order=deliveries())
async def test_each_event_and_the_response_are_applied_once_in_order(order: list[int]) -> None:
    """Events with ids e1..en, delivered as a replaying server deals them, then the response
    twice: the callback sees 1..n once each, in order, and the call one answer."""
    ledger = Ledger()
    seen: list[float] = []
    call = ledger.open("tools/call", lambda p, t, m: seen.append(p))
    n = max(order)
    for number in order:
        if ledger.first_time(call.id, f"e{number}"):
            await ledger.progress(_progress(call.token, number))
    answer = {"jsonrpc": "2.0", "id": call.id, "result": {"content": []}}
    applied = [ledger.answer(answer), ledger.answer(answer)]

    assert [float(i) for i in range(1, n + 1)] == seen
    assert [True, False] == applied
    assert {"content": []} == call.outcome()
    assert len(order) - n + 1 == ledger.tally().duplicates


async def test_an_event_without_an_id_of_its_own_is_never_a_replay() -> None:
    """Events without ids are applied each time (they cannot be told apart); a progress
    notification that does not advance is still dropped (it is a replay)."""
    ledger = Ledger()
    seen: list[float] = []
    call = ledger.open("tools/call", lambda p, t, m: seen.append(p))
    for number in (1, 2, 2, 3):
        assert ledger.first_time(call.id, None)
        await ledger.progress(_progress(call.token, number))

    assert [1.0, 2.0, 3.0] == seen


def test_the_ids_kept_per_stream_are_bounded() -> None:
    """A server that sends ever new ids makes the ledger keep EVENT_IDS_KEPT of them per
    stream, no more; a call's are dropped when it ends."""
    ledger = Ledger()
    call = ledger.open("tools/call")
    for i in range(EVENT_IDS_KEPT * 3):
        ledger.first_time(call.id, f"e{i}")
    kept = ledger.remembered(call.id)
    ledger.close(call)

    assert EVENT_IDS_KEPT == kept
    assert 0 == ledger.remembered(call.id)
