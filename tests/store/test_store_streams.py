# Request streams copied into a shared store (TM-STORE-STREAMS; a real Redis, and the in-process
# store), the mirror driven directly: what the copy holds when not every change could be
# copied. A copy may end early, never skip: a change that was not copied is written as the
# stream's loss, and a cursor before it reads a gap. (With live servers:
# tests/store/test_store_sessions.py.)
from __future__ import annotations

import attrs
import pytest
import trio
from support.fixtures import wait_until
from support.stores import StoreBackend

from trio_mcp.protocol import EventLog
from trio_mcp.runtime.store._mirror import StreamMirror
from trio_mcp.runtime.store._store import ClaimKind, SessionRecord, StoreLimits

TIMEOUT = 15


@attrs.define
class _Source:
    """A session as the mirror reads it: its id and a real log."""

    id: str
    log: EventLog = attrs.field(factory=EventLog)
    closed: bool = False


def _record(session_id: str) -> SessionRecord:
    return SessionRecord(
        id=session_id, version="2025-11-25", client_info={}, client_capabilities={},
        server_capabilities={}, client_state_bytes=0, peer="127.0.0.1", principal="",
        unit="a:127.0.0.1",
    )


@pytest.mark.spec("TM-STORE-STREAMS", "TM-BP-BOUNDED")
async def test_changes_beyond_the_copy_queue_are_lost_explicitly_never_skipped(
    shared_store: StoreBackend,
) -> None:
    """With room for two changes, the rest of a burst is not queued: counted lost, and
    written as the copy's loss, so that a cursor before it reads a gap and one after it
    reads the request's failure, never the messages on either side of the hole."""
    store = shared_store.connect()
    source = _Source("s1")
    stream = source.log.open_stream([1]).number
    mirror = StreamMirror(store, ttl=60, max_changes=2)
    entries = [source.log.append(stream, b'{"n":%d}' % i, now=0.0) for i in range(6)]
    mirror.add(source, stream, None)
    for entry in entries:
        mirror.add(source, stream, entry)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run, lambda control: None)
            # Copies are a live session's (TM-STORE-BOUND): its record comes first.
            await store.create(_record("s1"), 60, StoreLimits(None, None, 60))
            nursery.start_soon(mirror.run)
            await wait_until(lambda: mirror.pending == 0, poll=0.01)
            before = await store.claim("s1", store.origin, stream, entries[0].seq, ttl=60)
            after = await store.claim("s1", store.origin, stream, entries[-1].seq, ttl=60)
            nursery.cancel_scope.cancel()
    assert 5 == mirror.lost
    assert ClaimKind.GAP == before.kind and entries[-1].seq == before.lost
    assert ClaimKind.EVENTS == after.kind
    # The claim ends the stream: its request, with no response in the copy, is answered
    # with an error by whoever reads it.
    assert [(entries[-1].seq + 1, 1)] == [(e.seq, e.unanswered) for e in after.events]
