# What a re-attached connection carries (spec/reattachment.md): the cursor's own stream,
# strictly after the cursor, then live; one connection per stream; the standalone stream's
# fresh-GET and take-over rules. Real hypercorn on loopback, the raw h11 client.
from __future__ import annotations

import pytest
import trio
from support.client import McpSession, open_session, rpc_request
from support.fixtures import LiveServer, StartServer
from support.resume import Gate, Wire, numbered, open_call, read_until, resume

from trio_mcp import Context, Server
from trio_mcp.protocol import STANDALONE_STREAM, Notification

TIMEOUT = 10

server = Server("resume-semantics")
GATES: dict[str, Gate] = {}


@server.tool()
async def stepped(key: str, n: int, ctx: Context, tag: str = "") -> str:
    """Send up to n numbered notifications as the test allows, return when released.

    Args:
        key: names the gate the test holds.
        n: how many notifications at most.
        tag: carried in every notification, to tell streams apart.
    """
    gate = GATES[key]
    for i in range(n):
        if not await gate.turn(i):
            break
        await ctx.log("info", {"i": i, "tag": tag})
        gate.sent = i + 1
        gate.poke()
    await gate.wait_for(lambda: gate.finish)
    return f"stepped {tag}"


def new_gate() -> tuple[str, Gate]:
    key = f"g{len(GATES)}"
    GATES[key] = Gate()
    return key, GATES[key]


def call(key: str, n: int, tag: str = "") -> dict[str, object]:
    arguments = {"key": key, "n": n, "tag": tag}
    return rpc_request("tools/call", {"name": "stepped", "arguments": arguments})


def standalone_note(live: LiveServer, session: McpSession, i: int) -> None:
    """A server notification on the session's standalone stream (relates to no request)."""
    sent = live.table.sessions[session.id].send(
        Notification(
            method="notifications/message",
            params={"level": "info", "data": {"i": i, "tag": "standalone"}},
        )
    )
    assert sent


def stream_of(event_id: str) -> int:
    """The stream an event id names (T-RESUME-3); opaque to clients, known to tests."""
    return int(event_id.rpartition("~")[2].split(".")[0])


def tags(wire: Wire) -> set[str]:
    return {m["params"]["data"]["tag"] for m in wire.messages if numbered(m) is not None}


@pytest.mark.spec("T-RESUME-5", "T-PSSE-10", "TM-RES-ATTACHED", "T-PSSE-12")
async def test_resumed_stream_replays_strictly_after_the_cursor_then_goes_live_then_ends(
    live_server: StartServer,
) -> None:
    """GET with Last-Event-ID re-attaches the request's stream: the resumed response starts
    with the `: attached` comment (no new priming event), carries exactly the stream's
    messages after that event id (here an older one than the last the client saw, so some
    are sent again, as the client asked), then the messages sent from then on, live, then
    the response; after the response the stream ends."""
    live = await live_server(server)
    key, gate = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        request = call(key, 6)
        first = Wire()
        async with open_call(session, request) as stream:
            await gate.allow(3)
            await read_until(stream, first, messages=3)
        cursor = first.ids[1]  # the id of notification 0 (ids[0] is the priming event)
        await gate.allow(1)  # sent while no connection is attached

        second = Wire()
        async with resume(session, cursor) as stream:
            status, content_type = stream.status, stream.content_type
            head = await stream.next_event()
            await read_until(stream, second, messages=3)
            await gate.allow(2)
            await read_until(stream, second, messages=2)
            gate.release()
            ended = await read_until(stream, second)

    assert (200, "text/event-stream") == (status, content_type)
    assert head is not None and head.comment is not None and head.comment.startswith("attached")
    assert [0, 1, 2] == first.numbers
    assert [1, 2, 3, 4, 5] == second.numbers
    assert request["id"] == second.messages[-1]["id"]
    assert "result" in second.messages[-1]
    assert ended
    # No priming event on a resumed stream: every event carries a message.
    assert all(e.data for e in second.events)
    assert {stream_of(first.ids[0])} == {stream_of(i) for i in first.ids + second.ids}


@pytest.mark.spec("T-RESUME-6", "T-GET-6", "T-GET-5", "T-MULTI-2", "T-RESUME-3")
async def test_resumed_stream_never_carries_another_streams_messages(
    live_server: StartServer,
) -> None:
    """Two calls run at once in one session and the standalone stream is busy too. Resuming
    call A's stream delivers A's messages and A's response, none of call B's and none of the
    standalone stream's; B's stream and the standalone GET carry only their own, and the
    standalone stream never carries a response."""
    live = await live_server(server)
    key_a, gate_a = new_gate()
    key_b, gate_b = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        call_a, call_b = call(key_a, 3, "a"), call(key_b, 3, "b")
        wire_a, wire_b, wire_get = Wire(), Wire(), Wire()
        async with session.open_get() as get, open_call(session, call_b) as stream_b:
            async with open_call(session, call_a) as stream_a:
                priming = await stream_a.next_event()
                assert priming is not None
                wire_a.take(priming)
            # A's connection is gone; everything happens while it is away.
            await gate_a.allow(3)
            await gate_b.allow(3)
            for i in range(3):
                standalone_note(live, session, i)
            gate_a.release()
            assert wire_a.last_id is not None
            async with resume(session, wire_a.last_id) as resumed:
                ended_a = await read_until(resumed, wire_a)
            gate_b.release()
            ended_b = await read_until(stream_b, wire_b)
            await read_until(get, wire_get, messages=3)

    assert ended_a and ended_b
    assert ({"a"}, [0, 1, 2]) == (tags(wire_a), wire_a.numbers)
    assert ({"b"}, [0, 1, 2]) == (tags(wire_b), wire_b.numbers)
    assert ({"standalone"}, [0, 1, 2]) == (tags(wire_get), wire_get.numbers)
    assert [call_a["id"]] == [m["id"] for m in wire_a.messages if "id" in m]
    assert [call_b["id"]] == [m["id"] for m in wire_b.messages if "id" in m]
    assert [] == [m for m in wire_get.messages if "id" in m]
    assert {STANDALONE_STREAM} == {stream_of(i) for i in wire_get.ids}
    assert len({stream_of(i) for i in wire_a.ids + wire_b.ids + wire_get.ids}) == 3


@pytest.mark.spec("TM-RES-TAKEOVER", "T-MULTI-2", "T-RESUME-5")
async def test_second_connection_takes_the_stream_over_and_the_first_gets_nothing_more(
    live_server: StartServer,
) -> None:
    """A client re-attaches a stream while its first connection to it is still open: the
    server detaches the first connection, which ends without another event, and every later
    message goes out on the new connection only. No message is written on both."""
    live = await live_server(server)
    key, gate = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        request = call(key, 5)
        old, new = Wire(), Wire()
        async with open_call(session, request) as first:
            await gate.allow(2)
            await read_until(first, old, messages=2)
            assert old.last_id is not None
            async with resume(session, old.last_id) as second:
                head = await second.next_event()  # the server has attached the new one
                old_ended = await read_until(first, old)
                await gate.allow(3)
                gate.release()
                new_ended = await read_until(second, new)

    assert head is not None and head.comment is not None and head.comment.startswith("attached")
    assert old_ended and new_ended
    assert [0, 1] == old.numbers
    assert [2, 3, 4] == new.numbers
    assert [] == [m for m in old.messages if m in new.messages]
    assert request["id"] == new.messages[-1]["id"]
    assert [] == old.retries  # a detached connection is not told to come back


@pytest.mark.spec("TM-RES-POST", "T-RESUME-6", "T-MULTI-2", "T-RESUME-7")
async def test_last_event_id_on_a_post_is_ignored(live_server: StartServer) -> None:
    """Resumption is always a GET. A POST that carries Last-Event-ID is a new request: it
    gets a new stream (its own priming event, its own response) and none of the messages of
    the stream the header names; that stream's own connection stays attached and goes on."""
    live = await live_server(server)
    key, gate = new_gate()
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        wire_a, wire_post = Wire(), Wire()
        async with open_call(session, call(key, 4, "a")) as stream_a:
            await gate.allow(2)
            await read_until(stream_a, wire_a, messages=2)
            assert wire_a.last_id is not None
            listing = rpc_request("tools/list")
            async with open_call(session, listing, [("last-event-id", wire_a.last_id)]) as post:
                status = post.status
                post_ended = await read_until(post, wire_post)
            await gate.allow(2)
            gate.release()
            a_ended = await read_until(stream_a, wire_a)

    assert 200 == status and post_ended and a_ended
    assert [listing["id"]] == [m.get("id") for m in wire_post.messages]
    assert "tools" in wire_post.messages[0]["result"]
    assert wire_post.events[0].data == "" and wire_post.events[0].id
    assert stream_of(wire_post.ids[0]) != stream_of(wire_a.ids[0])
    assert [0, 1, 2, 3] == wire_a.numbers


@pytest.mark.spec("TM-GET-FRESH", "T-GET-4", "T-PSSE-1")
async def test_fresh_get_delivers_what_was_queued_and_replays_nothing_delivered(
    live_server: StartServer,
) -> None:
    """Messages the server sends on the standalone stream while no GET is open wait in the
    log; a fresh GET (no Last-Event-ID) starts with a priming event, then delivers them, then
    goes live. After the client closes it, the next fresh GET delivers only what was sent
    since: nothing already delivered is sent again."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        for i in range(3):
            standalone_note(live, session, i)
        first, second = Wire(), Wire()
        async with session.open_get() as get:
            await read_until(get, first, messages=3)
            standalone_note(live, session, 3)
            await read_until(get, first, messages=1)
        # A moment for the server to see that connection go before the next fresh GET.
        server_session = live.table.sessions[session.id]
        while STANDALONE_STREAM in server_session.views:  # noqa: ASYNC110 (runtime state)
            await trio.sleep(0.001)
        standalone_note(live, session, 4)
        standalone_note(live, session, 5)
        async with session.open_get() as get:
            await read_until(get, second, messages=2)
            standalone_note(live, session, 6)
            await read_until(get, second, messages=1)

    assert [0, 1, 2, 3] == first.numbers
    assert [4, 5, 6] == second.numbers
    for wire in (first, second):
        assert wire.events[0].data == "" and wire.events[0].id
    assert len(set(first.ids + second.ids)) == len(first.ids + second.ids)


@pytest.mark.spec("TM-GET-ONE", "TM-RES-TAKEOVER", "T-RESUME-7", "T-MULTI-2", "T-GET-3")
async def test_a_second_get_takes_the_standalone_stream_over_fresh_or_resuming(
    live_server: StartServer,
) -> None:
    """While the standalone stream has a connection, a second GET without Last-Event-ID takes
    it over: the old connection ends, the new one gets what no connection took yet. A GET
    with the Last-Event-ID of an event of the standalone stream takes it over too, and gets
    what follows that event. Later messages go to the newest connection only."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        first, second, third = Wire(), Wire(), Wire()
        async with session.open_get() as get:
            standalone_note(live, session, 0)
            await read_until(get, first, messages=1)
            async with session.open_get() as fresh:
                fresh_status = fresh.status
                first_ended = await read_until(get, first)
                standalone_note(live, session, 1)
                await read_until(fresh, second, messages=1)
                assert second.last_id is not None
                async with resume(session, second.last_id) as takeover:
                    status = takeover.status
                    second_ended = await read_until(fresh, second)
                    standalone_note(live, session, 2)
                    await read_until(takeover, third, messages=1)

    assert (200, True, [0]) == (fresh_status, first_ended, first.numbers)
    assert (200, True, [1]) == (status, second_ended, second.numbers)
    assert [2] == third.numbers
    assert third.comments and third.comments[0].startswith("attached stream=0")
