# Unit tests for trio_mcp.protocol._eventlog, the session's bounded log of outgoing messages:
# per-stream reads, the replay window, pinned responses, priming positions, and a stateful
# property test over arbitrary schedules of appends, reads, drops, re-attaches and evictions.

from __future__ import annotations

import gc
import sys
import tracemalloc

import attrs
import pytest
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from support.examples import examples

from trio_mcp.protocol import (
    ENTRY_OVERHEAD,
    STANDALONE_STREAM,
    Cursor,
    CursorCodec,
    Entry,
    EntryKind,
    EventLog,
    Gap,
    Retention,
    StreamClosedError,
)
from trio_mcp.protocol._eventlog import StreamState


def _data(got: list[Entry] | Gap) -> list[bytes]:
    assert not isinstance(got, Gap), got
    return [e.data for e in got]


def _fill(log: EventLog, stream: int, *payloads: bytes, now: float = 0.0) -> list[Entry]:
    return [log.append(stream, p, now=now) for p in payloads]


# -- streams and appending -----------------------------------------------------------------


def test_standalone_stream_is_zero_and_exists_from_the_start() -> None:
    """Stream 0 is the standalone (GET) stream; it exists before any request."""
    log = EventLog()

    assert 0 == STANDALONE_STREAM
    assert [STANDALONE_STREAM] == list(log.streams)
    assert log.stream(STANDALONE_STREAM) is not None


def test_request_streams_are_numbered_from_one() -> None:
    """Each POST's stream gets the next number, counting from 1."""
    log = EventLog()

    assert [1, 2, 3] == [log.open_stream([f"r{i}"]).number for i in range(3)]


def test_request_stream_needs_a_request() -> None:
    """A request stream exists to carry responses: it needs at least one request id."""
    with pytest.raises(ValueError, match="at least one request"):
        EventLog().open_stream([])


@pytest.mark.spec("T-RESUME-2")
def test_seqs_are_unique_and_increasing_across_streams() -> None:
    """Positions count up across the whole session, so an id never repeats in it."""
    log = EventLog()
    s1 = log.open_stream(["a"]).number
    s2 = log.open_stream(["b"]).number

    seqs = [
        log.append(0, b"x", now=0).seq,
        log.append(s1, b"y", now=0).seq,
        log.prime(s2, now=0).seq,
        log.append(s2, b"z", now=0).seq,
        log.append(0, b"w", now=0).seq,
    ]

    assert [0, 1, 2, 3, 4] == seqs


def test_append_records_kind_stream_data_and_time() -> None:
    """An appended entry is an unwritten MESSAGE of its stream, stamped with its time."""
    entry = EventLog().append(0, b"hello", now=12.5)

    assert (0, 0, EntryKind.MESSAGE, b"hello", 12.5, False) == (
        entry.seq,
        entry.stream,
        entry.kind,
        entry.data,
        entry.at,
        entry.written,
    )


def test_append_to_unknown_stream_raises() -> None:
    """A stream that was never opened cannot be appended to."""
    with pytest.raises(StreamClosedError):
        EventLog().append(7, b"x", now=0)


@pytest.mark.spec("T-PSSE-10")
def test_request_stream_ends_with_its_response() -> None:
    """Once every request on a stream has its response, the stream has ended."""
    log = EventLog()
    state = log.open_stream(["r"])
    log.append(state.number, b"progress", now=0)

    assert not state.ended
    log.append(state.number, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    assert state.ended
    with pytest.raises(StreamClosedError):
        log.append(state.number, b"late", now=0)


def test_batch_stream_ends_after_its_last_response() -> None:
    """A stream carrying several requests ends only when all are answered."""
    log = EventLog()
    state = log.open_stream([1, 2])
    log.append(state.number, b"r1", now=0, kind=EntryKind.RESPONSE, answers=1)

    assert not state.ended
    assert (1, 2) == state.request_ids
    log.append(state.number, b"r2", now=0, kind=EntryKind.RESPONSE, answers=2)
    assert state.ended


@pytest.mark.parametrize("answers", [None, "other"])
def test_response_must_answer_an_open_request_of_the_stream(answers: str | None) -> None:
    """A RESPONSE names one of the stream's unanswered requests."""
    log = EventLog()
    state = log.open_stream(["r", "s"])

    with pytest.raises(StreamClosedError):
        log.append(state.number, b"x", now=0, kind=EntryKind.RESPONSE, answers=answers)


def test_request_cannot_be_answered_twice() -> None:
    """A second response to the same request is refused."""
    log = EventLog()
    state = log.open_stream(["r", "s"])
    log.append(state.number, b"x", now=0, kind=EntryKind.RESPONSE, answers="r")

    with pytest.raises(StreamClosedError):
        log.append(state.number, b"y", now=0, kind=EntryKind.RESPONSE, answers="r")


@pytest.mark.spec("T-GET-6")
@pytest.mark.parametrize("answers", [None, 0, "r"])
def test_standalone_stream_never_holds_a_response(answers: int | str | None) -> None:
    """The GET stream has no requests of its own, so no response can be appended to it."""
    log = EventLog()
    log.open_stream(["r"])

    with pytest.raises(StreamClosedError):
        log.append(0, b"x", now=0, kind=EntryKind.RESPONSE, answers=answers)


def test_standalone_stream_never_ends() -> None:
    """The GET stream carries no responses and never ends."""
    log = EventLog()
    _fill(log, 0, b"a", b"b")

    state = log.stream(0)
    assert state is not None
    assert not state.ended


# -- reading -------------------------------------------------------------------------------


@pytest.mark.spec("T-RESUME-5")
def test_read_after_returns_the_streams_entries_after_the_cursor_in_order() -> None:
    """read_after(stream, seq) gives that stream's messages after seq, oldest first."""
    log = EventLog()
    entries = _fill(log, 0, b"a", b"b", b"c", b"d")

    assert [b"a", b"b", b"c", b"d"] == _data(log.read_after(0, -1))
    assert [b"c", b"d"] == _data(log.read_after(0, entries[1].seq))
    assert [] == _data(log.read_after(0, entries[3].seq))


def test_read_after_a_future_position_is_empty() -> None:
    """A cursor past the end reads nothing (and is not an error)."""
    log = EventLog()
    _fill(log, 0, b"a")

    assert [] == _data(log.read_after(0, 99))


@pytest.mark.spec("T-RESUME-6", "T-MULTI-2")
def test_read_never_returns_another_streams_entries() -> None:
    """Interleaved appends to several streams: each read returns only its own stream."""
    log = EventLog()
    s1 = log.open_stream(["a"]).number
    s2 = log.open_stream(["b"]).number
    for i in range(3):
        for s in (0, s1, s2):
            log.append(s, f"{s}-{i}".encode(), now=0)

    for s in (0, s1, s2):
        got = log.read_after(s, -1)
        assert [f"{s}-{i}".encode() for i in range(3)] == _data(got)
        assert {s} == {e.stream for e in got}  # type: ignore[union-attr]


@pytest.mark.spec("T-RESUME-6")
def test_cursor_of_another_streams_seq_reads_only_own_stream() -> None:
    """Even a position taken from another stream reads only this stream's later entries."""
    log = EventLog()
    s1 = log.open_stream(["a"]).number
    a = log.append(0, b"g0", now=0)
    log.append(s1, b"p0", now=0)
    log.append(0, b"g1", now=0)

    assert [b"g1"] == _data(log.read_after(0, a.seq))
    assert [b"p0"] == _data(log.read_after(s1, a.seq))


def test_read_of_unknown_stream_is_gap_with_nothing_known() -> None:
    """A stream this log never had is an explicit failure with lost_through -1."""
    assert Gap(stream=5, after=3, lost_through=-1) == EventLog().read_after(5, 3)


# -- the window: count, bytes, age ---------------------------------------------------------


def test_retention_defaults() -> None:
    """The default window: 256 events, 512 KiB, five minutes."""
    assert (256, 512 * 1024, 300.0) == (
        Retention().max_events,
        Retention().max_bytes,
        Retention().max_age,
    )


@pytest.mark.parametrize(
    "kwargs", [{"max_events": 0}, {"max_bytes": 0}, {"max_age": 0.0}, {"max_age": -1.0}]
)
def test_retention_limits_must_be_positive(kwargs: dict[str, float]) -> None:
    """A window of zero events, bytes or seconds is a configuration error."""
    with pytest.raises(ValueError, match="positive"):
        Retention(**kwargs)  # type: ignore[arg-type]


@pytest.mark.spec("TM-RES-WINDOW", "T-RESUME-5")
def test_count_eviction_drops_oldest_and_reports_a_gap() -> None:
    """Beyond max_events the oldest entries go; a cursor before them gets a Gap."""
    log = EventLog(Retention(max_events=3))
    entries = _fill(log, 0, b"0", b"1", b"2", b"3", b"4")

    assert 3 == log.retained_events
    assert Gap(stream=0, after=-1, lost_through=entries[1].seq) == log.read_after(0, -1)
    assert Gap(stream=0, after=0, lost_through=entries[1].seq) == log.read_after(0, 0)
    assert [b"2", b"3", b"4"] == _data(log.read_after(0, entries[1].seq))


@pytest.mark.spec("TM-RES-WINDOW")
def test_byte_eviction_drops_oldest_and_reports_a_gap() -> None:
    """Beyond max_bytes the oldest entries go, however few they are. Each entry costs its
    message's bytes plus ENTRY_OVERHEAD, so max_bytes bounds what the log takes."""
    log = EventLog(Retention(max_bytes=10 + 2 * ENTRY_OVERHEAD))
    entries = _fill(log, 0, b"aaaa", b"bbbb", b"cccc")

    assert 8 + 2 * ENTRY_OVERHEAD == log.retained_bytes
    assert Gap(stream=0, after=-1, lost_through=entries[0].seq) == log.read_after(0, -1)
    assert [b"bbbb", b"cccc"] == _data(log.read_after(0, entries[0].seq))


def _full_log(messages: list[bytes], streams: int) -> EventLog:
    log = EventLog(Retention(max_events=10**9, max_bytes=10**12, max_age=10**9))
    numbers = [log.open_stream([f"r{i}"]).number for i in range(streams)]
    for i, message in enumerate(messages):
        log.append(numbers[i % streams], message, now=float(i))
    return log


@pytest.mark.spec("TM-RES-WINDOW")
def test_entry_overhead_covers_what_a_kept_message_costs_beyond_its_bytes() -> None:
    """A log of 20,000 messages of 2 KB in 20 streams takes, by tracemalloc, no more than
    the messages' bytes plus ENTRY_OVERHEAD each (the bytes objects included), so the
    window's byte count bounds the memory the log really takes."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        messages = [bytes([65 + i % 26]) * 2048 + str(i).encode() for i in range(20_000)]
        log = _full_log(messages, streams=20)
        # The list of messages is the test's, not the log's.
        taken = tracemalloc.get_traced_memory()[0] - before - sys.getsizeof(messages)
    finally:
        tracemalloc.stop()
    payload = sum(len(m) for m in messages)

    assert 20_000 == log.retained_events
    assert payload + 20_000 * ENTRY_OVERHEAD == log.retained_bytes
    assert taken <= log.retained_bytes
    assert taken - payload >= 20_000 * 50  # the measure sees the messages' own cost


@pytest.mark.spec("TM-SESS-RELEASE")
def test_log_keeps_no_python_object_per_message_but_its_bytes() -> None:
    """The log keeps its messages in columns: appending 10,000 messages adds the 10,000
    bytes objects and a bounded number of others to what the cycle collector tracks (none),
    and what CPython's small-object allocator holds grows by far less than an object per
    message. Small objects left behind pin its arenas after the session ends."""
    messages = [b"x" * 600 + str(i).encode() for i in range(10_000)]
    gc.collect()
    tracked = len(gc.get_objects())
    blocks = sys.getallocatedblocks()
    log = _full_log(messages, streams=10)
    grown_tracked = len(gc.get_objects()) - tracked
    grown_blocks = sys.getallocatedblocks() - blocks

    assert 10_000 == log.retained_events
    assert grown_tracked < 100
    # Blocks: the 10,000 bytes objects, plus a few per stream; an object per message (and
    # its seq and timestamp) would be 30,000 more.
    assert grown_blocks < 10_000 + 1_000


@pytest.mark.spec("TM-RES-WINDOW")
def test_age_eviction_drops_entries_older_than_max_age() -> None:
    """evict(now) drops entries older than max_age; one exactly at the horizon stays."""
    log = EventLog(Retention(max_age=10.0))
    old = log.append(0, b"old", now=0.0)
    log.append(0, b"edge", now=5.0)
    log.append(0, b"new", now=9.0)

    assert 1 == log.evict(15.0)
    assert Gap(stream=0, after=-1, lost_through=old.seq) == log.read_after(0, -1)
    assert [b"edge", b"new"] == _data(log.read_after(0, old.seq))


def test_evict_within_the_window_drops_nothing() -> None:
    """Nothing is evicted while the window holds everything."""
    log = EventLog(Retention(max_events=5, max_age=100.0))
    _fill(log, 0, b"a", b"b")

    assert 0 == log.evict(50.0)
    assert 2 == log.retained_events


def test_oversized_message_leaves_the_window_at_once() -> None:
    """A message bigger than max_bytes cannot be kept: readers get a Gap, not silence."""
    log = EventLog(Retention(max_bytes=4))
    big = log.append(0, b"0123456789", now=0)

    assert 0 == log.retained_events
    assert Gap(stream=0, after=-1, lost_through=big.seq) == log.read_after(0, -1)


@pytest.mark.spec("TM-RES-WINDOW")
def test_eviction_is_per_session_window_across_streams() -> None:
    """The window counts every stream's messages; a chatty stream pushes out older ones."""
    log = EventLog(Retention(max_events=2))
    s1 = log.open_stream(["r"]).number
    first = log.append(s1, b"note", now=0)
    _fill(log, 0, b"g1", b"g2")

    assert Gap(stream=s1, after=-1, lost_through=first.seq) == log.read_after(s1, -1)
    assert [b"g1", b"g2"] == _data(log.read_after(0, -1))


def test_counters_and_totals_track_appends_and_evictions() -> None:
    """appended, evicted, retained_events and retained_bytes add up."""
    log = EventLog(Retention(max_events=2))
    _fill(log, 0, b"aa", b"bbb", b"c")

    assert (3, 1, 2, 4 + 2 * ENTRY_OVERHEAD) == (
        log.appended, log.evicted, log.retained_events, log.retained_bytes
    )


@pytest.mark.spec("TM-RES-WINDOW")
def test_gap_is_reported_only_for_cursors_before_the_loss() -> None:
    """A cursor at or after the newest lost entry reads normally."""
    log = EventLog(Retention(max_events=1))
    a, b, c = _fill(log, 0, b"a", b"b", b"c")

    assert isinstance(log.read_after(0, a.seq), Gap)
    assert [b"c"] == _data(log.read_after(0, b.seq))
    assert [] == _data(log.read_after(0, c.seq))


# -- pinned responses ----------------------------------------------------------------------


@pytest.mark.spec("TM-RES-PIN", "T-PSSE-6")
def test_unwritten_response_survives_eviction() -> None:
    """A response no connection has taken stays, whatever the window says."""
    log = EventLog(Retention(max_events=2, max_bytes=100))
    s1 = log.open_stream(["r"]).number
    resp = log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    _fill(log, 0, *(f"g{i}".encode() for i in range(10)))

    assert resp.pinned
    assert [b"result"] == _data(log.read_after(s1, -1))
    assert log.evict(10_000.0) >= 0
    assert [b"result"] == _data(log.read_after(s1, -1))


@pytest.mark.spec("TM-RES-PIN")
def test_pinned_responses_may_exceed_the_window() -> None:
    """When everything left is pinned, the window yields: no response is dropped."""
    log = EventLog(Retention(max_events=1))
    streams = [log.open_stream([i]).number for i in range(3)]
    for i, s in enumerate(streams):
        log.append(s, b"r", now=0, kind=EntryKind.RESPONSE, answers=i)

    assert 3 == log.retained_events


@pytest.mark.spec("TM-RES-PIN")
def test_written_response_unpins_and_can_then_be_evicted() -> None:
    """mark_written unpins a response; the next eviction may drop it."""
    log = EventLog(Retention(max_events=1))
    s1 = log.open_stream(["r"]).number
    resp = log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    log.mark_written(resp)

    assert not resp.pinned
    log.append(0, b"g", now=0)
    assert 1 == log.retained_events
    assert [b"g"] == _data(log.read_after(0, -1))


@pytest.mark.spec("TM-RES-PIN", "TM-RES-WINDOW")
def test_pinned_response_at_the_head_leaves_appends_a_bounded_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A response a stalled reader has not taken, pinned at the head of a full window,
    does not make each later append look again at every entry evicted behind it: the
    lookups per append stay a small constant, not a multiple of the window."""
    log = EventLog(Retention(max_events=100))
    s1 = log.open_stream(["r"]).number
    log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    _fill(log, 0, *(b"g" for _ in range(100)))
    lookups = 0
    index = StreamState.index

    def counted(state: StreamState, seq: int) -> int | None:
        nonlocal lookups
        lookups += 1
        return index(state, seq)

    monkeypatch.setattr(StreamState, "index", counted)
    _fill(log, 0, *(b"g" for _ in range(5_000)))

    assert 100 == log.retained_events
    assert lookups <= 4 * 5_000, lookups


@pytest.mark.spec("TM-RES-PIN")
def test_response_taken_after_appends_passed_it_is_evicted_next() -> None:
    """A pinned response that eviction has stepped over many times may still go as soon
    as a connection takes it."""
    log = EventLog(Retention(max_events=3))
    s1 = log.open_stream(["r"]).number
    resp = log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    _fill(log, 0, *(f"g{i}".encode() for i in range(50)))
    assert [b"result"] == _data(log.read_after(s1, -1))

    log.mark_written(resp)
    log.append(0, b"last", now=0)

    assert 3 == log.retained_events
    assert isinstance(log.read_after(s1, -1), Gap)


def test_messages_are_never_pinned() -> None:
    """Only responses are pinned: an unwritten notification on a request stream can go."""
    log = EventLog(Retention(max_events=1))
    s1 = log.open_stream(["r"]).number
    note = log.append(s1, b"progress", now=0)
    log.append(0, b"g", now=0)

    assert not note.pinned
    assert Gap(stream=s1, after=-1, lost_through=note.seq) == log.read_after(s1, -1)


@pytest.mark.spec("TM-RES-PIN")
def test_batch_stream_keeps_pinned_response_behind_evicted_messages() -> None:
    """In a batch stream, a later message may go while an earlier response is pinned; the
    loss is still reported to a cursor before it."""
    log = EventLog(Retention(max_events=2))
    s1 = log.open_stream([1, 2]).number
    resp = log.append(s1, b"r1", now=0, kind=EntryKind.RESPONSE, answers=1)
    note = log.append(s1, b"progress", now=0)
    _fill(log, 0, b"g1", b"g2")

    assert Gap(stream=s1, after=-1, lost_through=note.seq) == log.read_after(s1, -1)
    assert Gap(stream=s1, after=resp.seq, lost_through=note.seq) == log.read_after(s1, resp.seq)
    assert [] == _data(log.read_after(s1, note.seq))
    assert resp.pinned


def test_mark_written_advances_written_through() -> None:
    """written_through is the newest position a connection has taken from the stream."""
    log = EventLog()
    a, b = _fill(log, 0, b"a", b"b")
    log.mark_written(b)
    log.mark_written(a)

    state = log.stream(0)
    assert state is not None
    assert b.seq == state.written_through


# -- ended streams -------------------------------------------------------------------------


@pytest.mark.spec("TM-RES-STALE")
def test_ended_stream_is_forgotten_once_empty_and_reads_as_total_gap() -> None:
    """When an ended stream's last entry leaves the window the stream is forgotten; a
    resume of it is then an explicit failure with lost_through -1, not an empty replay."""
    log = EventLog(Retention(max_events=1))
    s1 = log.open_stream(["r"]).number
    resp = log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    log.mark_written(resp)
    log.append(0, b"g", now=0)

    assert log.stream(s1) is None
    assert Gap(stream=s1, after=resp.seq, lost_through=-1) == log.read_after(s1, resp.seq)


def test_ended_stream_with_entries_left_is_kept() -> None:
    """An ended stream stays readable while any of its entries is in the window."""
    log = EventLog(Retention(max_events=2))
    s1 = log.open_stream(["r"]).number
    log.append(s1, b"progress", now=0)
    resp = log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    log.mark_written(resp)
    log.append(0, b"g", now=0)

    assert log.stream(s1) is not None
    assert [b"result"] == _data(log.read_after(s1, resp.seq - 1))


def test_open_request_stream_is_kept_when_emptied() -> None:
    """A stream still waiting for a response is not forgotten when its messages go."""
    log = EventLog(Retention(max_events=1))
    s1 = log.open_stream(["r"]).number
    note = log.append(s1, b"progress", now=0)
    log.append(0, b"g", now=0)

    assert log.stream(s1) is not None
    assert Gap(stream=s1, after=-1, lost_through=note.seq) == log.read_after(s1, -1)
    assert [] == _data(log.read_after(s1, note.seq))


def test_standalone_stream_is_kept_when_emptied() -> None:
    """The GET stream is never forgotten; losing its entries is a Gap with a position."""
    log = EventLog(Retention(max_events=1))
    _, b = _fill(log, 0, b"a", b"b")
    log.evict(1e9)

    assert 0 == log.retained_events
    assert log.stream(0) is not None
    assert Gap(stream=0, after=-1, lost_through=b.seq) == log.read_after(0, -1)
    assert [] == _data(log.read_after(0, b.seq))


def test_forget_stream_drops_its_entries() -> None:
    """forget_stream (cancelled or abandoned request) frees its entries; a resume fails."""
    log = EventLog()
    s1 = log.open_stream(["r"]).number
    log.append(s1, b"progress", now=0)
    log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")
    log.append(0, b"g", now=0)

    log.forget_stream(s1)

    assert (1, 1 + ENTRY_OVERHEAD, 2) == (log.retained_events, log.retained_bytes, log.evicted)
    assert Gap(stream=s1, after=-1, lost_through=-1) == log.read_after(s1, -1)
    with pytest.raises(StreamClosedError):
        log.append(s1, b"late", now=0)


def test_forget_stream_spares_the_standalone_stream_and_unknown_streams() -> None:
    """Forgetting stream 0 or a stream that does not exist changes nothing."""
    log = EventLog()
    _fill(log, 0, b"a")

    log.forget_stream(STANDALONE_STREAM)
    log.forget_stream(42)

    assert [b"a"] == _data(log.read_after(0, -1))


# -- priming -------------------------------------------------------------------------------


@pytest.mark.spec("T-PSSE-1", "TM-RES-PRIME")
def test_prime_gives_a_fresh_written_position() -> None:
    """A priming entry is a new position with empty data, already 'written'."""
    log = EventLog()
    s1 = log.open_stream(["r"]).number
    priming = log.prime(s1, now=3.0)

    assert (0, s1, EntryKind.PRIMING, b"", True, False) == (
        priming.seq,
        priming.stream,
        priming.kind,
        priming.data,
        priming.written,
        priming.pinned,
    )


@pytest.mark.spec("T-PSSE-1")
def test_priming_position_is_a_cursor_and_never_replayed() -> None:
    """Reading after the priming position gives what followed; the priming itself is not
    an entry any read returns."""
    log = EventLog()
    s1 = log.open_stream(["r"]).number
    priming = log.prime(s1, now=0)
    log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")

    assert [b"result"] == _data(log.read_after(s1, priming.seq))
    assert [b"result"] == _data(log.read_after(s1, -1))


@pytest.mark.spec("TM-RES-PRIME", "TM-RES-WINDOW")
def test_priming_entries_take_no_window_room() -> None:
    """Primings are positions, not messages: they are not counted and never evicted."""
    log = EventLog(Retention(max_events=2, max_bytes=4 + 2 * ENTRY_OVERHEAD))
    for _ in range(10):
        log.prime(0, now=0)
    _fill(log, 0, b"ab", b"cd")

    assert (2, 4 + 2 * ENTRY_OVERHEAD, 0) == (
        log.retained_events, log.retained_bytes, log.evicted
    )
    assert [b"ab", b"cd"] == _data(log.read_after(0, -1))


def test_prime_of_unknown_stream_raises() -> None:
    """A stream that does not exist has no position to prime."""
    with pytest.raises(StreamClosedError):
        EventLog().prime(3, now=0)


def test_prime_without_carry_leaves_unsent_entries_before_it() -> None:
    """Plain priming (a POST stream) does not move anything."""
    log = EventLog()
    _fill(log, 0, b"a")
    priming = log.prime(0, now=0)

    assert [] == _data(log.read_after(0, priming.seq))
    assert [b"a"] == _data(log.read_after(0, -1))


@pytest.mark.spec("TM-GET-FRESH")
def test_prime_with_carry_moves_unsent_entries_after_the_priming() -> None:
    """A fresh GET gets what no connection has taken yet: the unsent standalone entries are
    renumbered after the priming position, in order; taken ones stay behind it."""
    log = EventLog()
    a, _, c = _fill(log, 0, b"a", b"b", b"c", now=1.0)
    log.mark_written(a)

    priming = log.prime(0, now=2.0, carry_unsent=True)
    got = log.read_after(0, priming.seq)

    assert [b"b", b"c"] == _data(got)
    assert isinstance(got, list)
    assert [priming.seq + 1, priming.seq + 2] == [e.seq for e in got]
    assert priming.seq > c.seq
    assert [1.0, 1.0] == [e.at for e in got]
    assert [b"a", b"b", b"c"] == _data(log.read_after(0, -1))
    assert (3, 3 + 3 * ENTRY_OVERHEAD) == (log.retained_events, log.retained_bytes)


@pytest.mark.spec("TM-GET-FRESH")
def test_prime_with_carry_and_nothing_unsent_moves_nothing() -> None:
    """When every entry was taken, a fresh GET replays nothing."""
    log = EventLog()
    entries = _fill(log, 0, b"a", b"b")
    for e in entries:
        log.mark_written(e)

    priming = log.prime(0, now=0, carry_unsent=True)

    assert [] == _data(log.read_after(0, priming.seq))
    assert [b"a", b"b"] == _data(log.read_after(0, -1))


@pytest.mark.spec("TM-GET-FRESH")
def test_carried_entries_are_still_evictable_and_report_gaps() -> None:
    """Carried entries are ordinary unsent messages: if they leave the window, a reader at
    the priming position gets a Gap."""
    log = EventLog(Retention(max_events=2))
    _fill(log, 0, b"a", b"b")
    priming = log.prime(0, now=0, carry_unsent=True)
    s1 = log.open_stream(["r"]).number
    _fill(log, s1, b"p1", b"p2")

    got = log.read_after(0, priming.seq)
    assert isinstance(got, Gap)
    assert got.lost_through > priming.seq


@pytest.mark.spec("TM-GET-FRESH")
def test_carry_keeps_earlier_loss_behind_the_priming() -> None:
    """Messages lost before a fresh GET do not make the fresh stream fail."""
    log = EventLog(Retention(max_events=1))
    _fill(log, 0, b"a", b"b")
    priming = log.prime(0, now=0, carry_unsent=True)

    assert [b"b"] == _data(log.read_after(0, priming.seq))
    assert isinstance(log.read_after(0, -1), Gap)


# -- any schedule: exactly-once, in-order delivery within the window, explicit failure else -


SESSION = "sess-model"
CODEC = CursorCodec(b"\x01" * 32)
FOREIGN_CODEC = CursorCodec(b"\x02" * 32)


@attrs.define
class _Client:
    """One stream as its client sees it, and the model of what it should receive."""

    stream: int
    request_ids: tuple[int, ...] = ()
    unanswered: list[int] = attrs.field(factory=list)
    appended: list[bytes] = attrs.field(factory=list)
    """Every message appended to the stream, in order."""
    written: set[bytes] = attrs.field(factory=set)
    """Messages a connection has taken (mark_written)."""
    responses: set[bytes] = attrs.field(factory=set)
    """The RESPONSE entries among them."""
    received: list[bytes] = attrs.field(factory=list)
    """Messages the client actually got, in the order it got them."""
    abandoned: set[bytes] = attrs.field(factory=set)
    """Messages a fresh GET gave up on (taken but never received, or lost unsent)."""
    last_event_id: str | None = None
    """The client's Last-Event-ID (None: it has none yet)."""
    failed: bool = False
    """The client was told, explicitly, that the stream cannot be resumed."""

    def pending(self) -> list[bytes]:
        got = set(self.received)
        return [p for p in self.appended if p not in got and p not in self.abandoned]

    @property
    def done(self) -> bool:
        return self.stream != STANDALONE_STREAM and not self.unanswered and not self.pending()


class EventLogSchedules(RuleBasedStateMachine):
    """Several streams, one simulated client each; connections read from the client's
    cursor and may lose any suffix of what they read before the client acknowledges."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.counter = 0
        self.next_request = 0
        self.log = EventLog()
        self.clients: dict[int, _Client] = {}
        self.issued: list[str] = []

    @initialize(
        max_events=st.integers(1, 6),
        max_bytes=st.integers(8, 120),
        max_age=st.sampled_from([2.0, 10.0, 1e9]),
    )
    def setup(self, max_events: int, max_bytes: int, max_age: float) -> None:
        retention = Retention(
            max_events=max_events, max_bytes=max_bytes + ENTRY_OVERHEAD * 4, max_age=max_age
        )
        self.log = EventLog(retention)
        self.clients = {STANDALONE_STREAM: _Client(stream=STANDALONE_STREAM)}

    # -- helpers ---------------------------------------------------------------------------

    def _event_id(self, stream: int, seq: int) -> str:
        event_id = CODEC.encode(SESSION, Cursor(stream, seq))
        self.issued.append(event_id)
        return event_id

    def _payload(self, stream: int, size: int) -> bytes:
        self.counter += 1
        return f"{stream}:{self.counter}:".encode() + b"x" * size

    def _retained(self, stream: int) -> set[bytes]:
        state = self.log.stream(stream)
        return set() if state is None else {e.data for e in state.entries}

    def _check_window(self) -> None:
        """Right after an eviction: beyond a limit, everything left is a pinned response."""
        r = self.log.retention
        entries = [e for s in self.log.streams.values() for e in s.entries]
        if self.log.retained_events > r.max_events or self.log.retained_bytes > r.max_bytes:
            assert all(e.pinned for e in entries)

    def _writable(self) -> list[int]:
        return sorted(
            s for s, c in self.clients.items()
            if not c.failed and (s == STANDALONE_STREAM or c.unanswered)
        )

    # -- the server ------------------------------------------------------------------------

    @precondition(lambda self: len(self.clients) < 6)
    @rule(requests=st.integers(1, 2), primed=st.booleans())
    def open_request_stream(self, requests: int, primed: bool) -> None:
        ids = tuple(range(self.next_request, self.next_request + requests))
        self.next_request += requests
        state = self.log.open_stream(ids)
        client = _Client(stream=state.number, request_ids=ids, unanswered=list(ids))
        if primed:
            priming = self.log.prime(state.number, now=self.now)
            client.last_event_id = self._event_id(state.number, priming.seq)
        self.clients[state.number] = client

    @rule(data=st.data(), size=st.integers(0, 40))
    def append_message(self, data: st.DataObject, size: int) -> None:
        stream = data.draw(st.sampled_from(self._writable()))
        payload = self._payload(stream, size)
        self.log.append(stream, payload, now=self.now)
        self.clients[stream].appended.append(payload)
        self._check_window()

    @rule(data=st.data(), size=st.integers(0, 40))
    def append_response(self, data: st.DataObject, size: int) -> None:
        streams = [s for s in self._writable() if s != STANDALONE_STREAM]
        assume(streams)
        client = self.clients[data.draw(st.sampled_from(streams))]
        rid = client.unanswered.pop(data.draw(st.integers(0, len(client.unanswered) - 1)))
        payload = self._payload(client.stream, size)
        self.log.append(
            client.stream, payload, now=self.now, kind=EntryKind.RESPONSE, answers=rid
        )
        client.appended.append(payload)
        client.responses.add(payload)
        self._check_window()

    @rule(data=st.data())
    def append_to_a_closed_stream_fails(self, data: st.DataObject) -> None:
        closed = [
            s for s, c in self.clients.items()
            if s != STANDALONE_STREAM and (c.failed or not c.unanswered)
        ]
        assume(closed)
        client = self.clients[data.draw(st.sampled_from(closed))]
        with pytest.raises(StreamClosedError):
            self.log.append(client.stream, b"late", now=self.now)
        if client.unanswered:
            with pytest.raises(StreamClosedError):
                self.log.append(
                    client.stream, b"late", now=self.now,
                    kind=EntryKind.RESPONSE, answers=client.unanswered[0],
                )

    @rule(dt=st.floats(0.0, 5.0))
    def time_passes(self, dt: float) -> None:
        self.now += dt
        self.log.evict(self.now)
        self._check_window()

    # -- the clients -----------------------------------------------------------------------

    @rule(data=st.data())
    def connection_reads(self, data: st.DataObject) -> None:
        """A connection (the first one, or a re-attach with Last-Event-ID) reads from the
        client's cursor; it takes a prefix of what it read, and the client gets a prefix of
        that before the connection drops."""
        candidates = [
            s for s, c in self.clients.items()
            if not c.failed and not c.done
            and not (s == STANDALONE_STREAM and c.last_event_id is None)
        ]
        assume(candidates)
        client = self.clients[data.draw(st.sampled_from(candidates))]
        s = client.stream
        if client.last_event_id is None:
            after = -1  # still the POST's own connection of an unprimed stream
        else:
            cursor = CODEC.decode(SESSION, client.last_event_id)
            assert cursor is not None
            assert s == cursor.stream
            after = cursor.seq
        pending = client.pending()

        got = self.log.read_after(s, after)

        if isinstance(got, Gap):
            # Explicit failure: it must be justified by a real loss after the cursor.
            assert (s, after) == (got.stream, got.after)
            retained = self._retained(s)
            assert any(p not in retained for p in pending), "Gap while all pending is kept"
            if got.lost_through == -1:
                assert self.log.stream(s) is None
            else:
                assert got.lost_through > after
            if s == STANDALONE_STREAM:
                client.last_event_id = None  # the client starts over with a fresh GET
            else:
                self.log.forget_stream(s)  # what the runtime does (TM-RES-STALE)
                client.failed = True
            return

        # Within the window: exactly the pending messages, in order, nothing else.
        assert pending == [e.data for e in got]
        assert all(e.stream == s and e.kind is not EntryKind.PRIMING for e in got)
        assert [e.seq for e in got] == sorted({e.seq for e in got})
        assert all(e.seq > after for e in got)
        taken = data.draw(st.integers(0, len(got)))
        kept = data.draw(st.integers(0, taken))
        for entry in got[:taken]:
            self.log.mark_written(entry)
            client.written.add(entry.data)
        for entry in got[:kept]:
            client.received.append(entry.data)
            client.last_event_id = self._event_id(s, entry.seq)

    @rule()
    def fresh_get(self) -> None:
        """A GET without Last-Event-ID: a new standalone connection, primed; it delivers
        what no connection has taken yet and replays nothing (TM-GET-FRESH)."""
        client = self.clients[STANDALONE_STREAM]
        before = self._retained(STANDALONE_STREAM)
        for p in client.pending():
            if p in client.written or p not in before:
                client.abandoned.add(p)
        priming = self.log.prime(STANDALONE_STREAM, now=self.now, carry_unsent=True)
        assert (EntryKind.PRIMING, b"", True) == (priming.kind, priming.data, priming.written)
        state = self.log.stream(STANDALONE_STREAM)
        assert state is not None
        assert before == {e.data for e in state.entries}
        for entry in state.entries:
            if entry.data in client.pending():
                assert entry.seq > priming.seq
        client.last_event_id = self._event_id(STANDALONE_STREAM, priming.seq)

    @rule(data=st.data(), how=st.sampled_from(["session", "key", "stream", "seq", "mac", "junk"]))
    def foreign_or_malformed_cursor_is_rejected(self, data: st.DataObject, how: str) -> None:
        """A Last-Event-ID from another session, from before a restart, edited, or not an id
        at all decodes to nothing: an explicit rejection, and no client state changes."""
        stream = data.draw(st.sampled_from(sorted(self.clients)))
        seq = data.draw(st.integers(0, self.log._next_seq + 2))
        good = CODEC.encode(SESSION, Cursor(stream, seq))
        sid, rest = good.split(".", 1)
        if how == "session":
            bad = CODEC.encode("sess-other", Cursor(stream, seq))
        elif how == "key":
            bad = FOREIGN_CODEC.encode(SESSION, Cursor(stream, seq))
        elif how == "stream":
            bad = f"{stream + 1}.{rest}"
        elif how == "seq":
            bad = f"{sid}.{seq + 1}.{rest.split('.', 1)[1]}"
        elif how == "mac":
            mac = rest.split(".", 1)[1]
            bad = f"{sid}.{seq}.{'A' if mac[0] != 'A' else 'B'}{mac[1:]}"
        else:
            bad = data.draw(st.text(max_size=40))
        assert CODEC.decode(SESSION, bad) is None

    @precondition(lambda self: bool(self.issued))
    @rule(data=st.data())
    def stale_cursor_probe(self, data: st.DataObject) -> None:
        """Any id this session ever issued, however old, either reads its own stream's
        retained messages after it, in order, or fails explicitly with a real loss."""
        cursor = CODEC.decode(SESSION, data.draw(st.sampled_from(self.issued)))
        assert cursor is not None
        got = self.log.read_after(cursor.stream, cursor.seq)
        state = self.log.stream(cursor.stream)
        if isinstance(got, Gap):
            if got.lost_through == -1:
                assert state is None
            else:
                assert got.lost_through > cursor.seq
            return
        assert state is not None
        assert [e for e in state.entries if e.seq > cursor.seq] == got
        appended = self.clients[cursor.stream].appended
        positions = [appended.index(e.data) for e in got]
        assert sorted(positions) == positions

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def clients_receive_each_message_once_in_order(self) -> None:
        for client in self.clients.values():
            positions = [client.appended.index(p) for p in client.received]
            assert sorted(set(positions)) == positions

    @invariant()
    def accounting_adds_up(self) -> None:
        entries = [e for s in self.log.streams.values() for e in s.entries]
        assert len(entries) == self.log.retained_events
        cost = sum(len(e.data) + ENTRY_OVERHEAD for e in entries)
        assert cost == self.log.retained_bytes
        for number, state in self.log.streams.items():
            if number == STANDALONE_STREAM:  # T-GET-6
                assert all(e.kind is EntryKind.MESSAGE for e in state.entries)
            seqs = [e.seq for e in state.entries]
            assert sorted(set(seqs)) == seqs
            assert {number} >= {e.stream for e in state.entries}
            # The lag a producer is paced by (TM-BP-PRODUCER), against a count by hand, from
            # every cursor the stream's seqs give.
            for after in {-1, *seqs, *(q - 1 for q in seqs)}:
                later = [e for e in state.entries if e.seq > after]
                size = sum(len(e.data) for e in later)
                assert (len(later), size) == state.lag(after)
                n = len(later)
                for count, limit in ((0, 0), (1, 10), (n, size), (n - 1, size - 1)):
                    count, limit = max(count, 0), max(limit, 0)
                    expected = len(later) > count or size > limit
                    assert expected == state.lags_beyond(after, count, limit)

    @invariant()
    def unsent_responses_are_kept(self) -> None:
        """TM-RES-PIN: a response no connection took stays in the window until its stream
        is given up."""
        for client in self.clients.values():
            if not client.failed:
                unsent = client.responses - client.written
                assert unsent <= self._retained(client.stream)


@pytest.mark.spec("T-RESUME-5", "T-RESUME-6", "T-MULTI-2", "TM-RES-WINDOW", "TM-RES-PIN")
@pytest.mark.slow
def test_any_schedule_gives_exactly_once_in_order_delivery_or_explicit_failure() -> None:
    """Under any schedule of appends, reads, lost suffixes, re-attaches (valid, stale,
    foreign and malformed cursors), fresh GETs and evictions, each stream's client receives
    exactly the messages appended to it, in order, each once, as long as they are in the
    window; when they are not, the re-attach fails explicitly (a Gap), and only when a
    message after the cursor really left the window."""
    run_state_machine_as_test(
        EventLogSchedules,
        settings=settings(
            max_examples=examples(120),
            stateful_step_count=60,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


@pytest.mark.spec("TM-RES-WINDOW")
def test_reserved_bytes_come_out_of_the_byte_window() -> None:
    """A log built with reserved=R keeps at most max_bytes - R of entries (each costing its
    message plus ENTRY_OVERHEAD): the window bounds the whole session, whose own
    bookkeeping the runtime reserves."""
    cost = 100 + ENTRY_OVERHEAD
    log = EventLog(Retention(max_bytes=3 * cost + 50), reserved=cost)
    entries = _fill(log, 0, *[bytes([65 + k]) * 100 for k in range(4)])

    assert (2, 2 * cost) == (log.retained_events, log.retained_bytes)
    assert [entries[2].data, entries[3].data] == _data(log.read_after(0, entries[1].seq))
    assert isinstance(log.read_after(0, entries[0].seq), Gap)


def test_release_drops_every_entry_and_keeps_the_counters() -> None:
    """release() (a session that ended) empties the log at once; appended and evicted stay
    what they were, for the totals."""
    log = EventLog()
    s1 = log.open_stream(["r"]).number
    _fill(log, 0, b"a", b"b")
    log.append(s1, b"result", now=0, kind=EntryKind.RESPONSE, answers="r")

    log.release()

    assert (0, 0, 0) == (log.retained_events, log.retained_bytes, log.pinned_responses)
    assert (3, 0) == (log.appended, log.evicted)
    assert all(not state.entries for state in log.streams.values())
