# How a connection's writer sizes its writes (trio_mcp/runtime/backpressure/_writer.py), in memory
# under
# trio's MockClock: chunks joined up to MAX_CHUNK, what the socket takes at once in one write,
# and only what would wait for the reader in slices the judge can see (TM-BP-BOUNDED).
from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio

from trio_mcp.protocol import Reply
from trio_mcp.runtime.backpressure._judge import WriteProgressJudge
from trio_mcp.runtime.backpressure._responder import SendRoom
from trio_mcp.runtime.backpressure._writer import MAX_CHUNK, ConnectionWriter, write_grain

#: The write grain at the defaults (2 KiB/s over a 10 s budget).
GRAIN = write_grain(2048.0, 10.0)


class RecordingResponder:
    """A Responder whose every write goes through at once, recorded by size; with
    ``room`` set it also offers SendRoom and says the socket takes that much now."""

    def __init__(self) -> None:
        self.disconnected = trio.Event()
        self.started = True
        self.finished = False
        self.writes: list[int] = []

    async def reply(self, reply: Reply) -> None:
        raise AssertionError("a stream's writer never replies")

    async def start_stream(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        raise AssertionError("a stream's writer never starts the stream")

    async def write(self, data: bytes) -> None:
        await trio.lowlevel.checkpoint()
        self.writes.append(len(data))

    async def end(self) -> None:
        self.finished = True


class RoomyResponder(RecordingResponder):
    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room
        self.asked = 0

    def send_room(self) -> int:
        self.asked += 1
        return self.room


class PacingJudge(WriteProgressJudge):
    """A judge whose pacer has not stopped: every write is its to size."""

    @property
    def may_pace(self) -> bool:
        return True


async def written(writer: ConnectionWriter, *chunks: bytes) -> None:
    """Submit ``chunks`` together and wait until the writer has written them all."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        for chunk in chunks:
            writer.submit(chunk)
        while not writer.idle:
            await writer.wait_progress()
        writer.close()


@pytest.mark.spec("TM-BP-BOUNDED")
async def test_a_chunk_the_socket_takes_at_once_goes_in_one_write(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A chunk larger than the write grain goes out in a single write when the socket has
    room for all of it: no slices, whose only use is to show a waiting write's progress."""
    responder = RoomyResponder(room=64 * 1024)
    assert isinstance(responder, SendRoom)
    writer = ConnectionWriter(responder, window=10.0, max_write=GRAIN)

    await written(writer, b"x" * MAX_CHUNK)

    assert [MAX_CHUNK] == responder.writes


@pytest.mark.spec("TM-BP-BOUNDED", "TM-BP-STALL")
async def test_what_would_wait_for_the_reader_goes_in_slices_of_the_write_grain(
    autojump_clock: trio.abc.Clock,
) -> None:
    """What the socket has no room for now goes in writes of at most the grain: with room
    for 5,000 bytes, a 16 KiB chunk is one write of 5,000 and the rest in grain-sized
    slices; with none, all of it in slices."""
    some = RoomyResponder(room=5000)
    writer = ConnectionWriter(some, window=10.0, max_write=GRAIN)
    await written(writer, b"x" * MAX_CHUNK)

    assert 5000 == some.writes[0]
    assert all(w <= 5000 for w in some.writes)
    assert MAX_CHUNK == sum(some.writes)

    full = RoomyResponder(room=0)
    writer = ConnectionWriter(full, window=10.0, max_write=GRAIN)
    await written(writer, b"x" * MAX_CHUNK)

    assert [GRAIN] * (MAX_CHUNK // GRAIN) + [MAX_CHUNK % GRAIN] == full.writes


@pytest.mark.spec("TM-BP-BOUNDED", "TM-BP-PACE")
async def test_a_writer_that_may_be_paced_or_cannot_see_the_socket_writes_in_slices(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The socket's room is not asked while a pacer may still size the writes (it holds a
    stream to what the reader's window allows), nor of a responder that cannot tell it."""
    paced = RoomyResponder(room=64 * 1024)
    writer = ConnectionWriter(
        paced, window=10.0, max_write=GRAIN, judge=PacingJudge(window=10.0)
    )
    await written(writer, b"x" * (3 * GRAIN))

    assert [GRAIN] * 3 == paced.writes
    assert 0 == paced.asked

    blind = RecordingResponder()
    assert not isinstance(blind, SendRoom)
    writer = ConnectionWriter(blind, window=10.0, max_write=GRAIN)
    await written(writer, b"x" * (3 * GRAIN))

    assert [GRAIN] * 3 == blind.writes


@pytest.mark.spec("TM-BP-BOUNDED")
async def test_queued_chunks_are_joined_up_to_the_chunk_limit_and_no_further(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Chunks queued behind one another go in one write while together they fit in
    MAX_CHUNK; the writer never joins beyond it."""
    responder = RoomyResponder(room=1 << 20)
    writer = ConnectionWriter(responder, window=10.0, max_write=GRAIN)
    third = MAX_CHUNK // 3
    assert writer.max_chunk == MAX_CHUNK

    # Queued before the writer first runs: all three fit in one write together.
    await written(writer, b"a" * third, b"b" * third, b"c" * third)

    assert [3 * third] == responder.writes

    responder = RoomyResponder(room=1 << 20)
    writer = ConnectionWriter(responder, window=10.0, max_write=GRAIN)
    half = MAX_CHUNK // 2 + 1
    await written(writer, b"a", b"b" * half, b"c" * half)

    assert [1 + half, half] == responder.writes


@pytest.mark.spec("TM-RES-PIN", "TM-BP-BOUNDED")
async def test_a_chunk_written_in_slices_tells_its_owner_how_much_went_after_each(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A chunk that goes out in several writes reports, after each, how many of its bytes
    the connection took, so its messages count as taken one by one as their last bytes go;
    joined chunks each hear of their own bytes."""
    responder = RoomyResponder(room=0)
    writer = ConnectionWriter(responder, window=10.0, max_write=GRAIN)
    first: list[int] = []
    second: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        writer.submit(b"a" * (2 * GRAIN + 10), first.append)
        writer.submit(b"b" * 100, second.append)
        while not writer.idle:
            await writer.wait_progress()
        writer.close()

    assert [GRAIN, 2 * GRAIN, 2 * GRAIN + 10] == first[:3]
    assert all(n == 2 * GRAIN + 10 for n in first[3:])
    assert [100] == second[-1:]
    assert all(0 <= n <= 100 for n in second)


@pytest.mark.spec("TM-RES-PIN", "TM-BP-STALL")
async def test_a_write_that_may_wait_ends_where_a_message_ends_when_one_fits(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Slices end at the last message end within the grain, so a write that completes
    completes messages and one cut short leaves none half counted; a message larger than
    the grain is sliced on its own."""
    responder = RoomyResponder(room=0)
    writer = ConnectionWriter(responder, window=10.0, max_write=GRAIN)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        writer.submit(b"x" * 3100, None, [100, 3000, 3100])
        writer.submit(b"y" * 50)
        while not writer.idle:
            await writer.wait_progress()
        writer.close()

    # 100 (the first message), 2,560 of the second, then its rest, the third and the
    # joined chunk's 50 bytes.
    assert [100, GRAIN, 3150 - 100 - GRAIN] == responder.writes


@pytest.mark.spec("TM-BP-SIGNAL", "TM-RES-PIN")
async def test_dropping_the_queue_ends_the_chunk_in_progress_at_its_current_message(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Once its stream is cut, the writer finishes the message its current write is in
    (half a message cannot be taken back) and writes nothing more of that chunk: what
    follows stays in the log, counted as not taken, for the client's resume."""
    responder = RoomyResponder(room=0)
    writer = ConnectionWriter(responder, window=10.0, max_write=GRAIN)
    took: list[int] = []
    message = 2 * GRAIN + 100
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.run)
        writer.submit(b"m" * (3 * message), took.append, [message, 2 * message, 3 * message])
        while not responder.writes:
            await trio.lowlevel.checkpoint()
        writer.drop_queued()
        writer.submit(b"signal")
        while not writer.idle:
            await writer.wait_progress()
        writer.close()

    assert [GRAIN, GRAIN, 100, len(b"signal")] == responder.writes
    assert message == took[-1]
