# Which Last-Event-ID values a server accepts as a cursor (spec/reattachment.md): only event
# ids it issued itself, in this process, for this session, unedited. Anything else is a 400
# with a JSON-RPC error body, never a replay; an unknown session is a 404, as always.
from __future__ import annotations

import json

import pytest
import trio
from support.client import McpSession, open_session, rpc_request
from support.fixtures import StartServer
from support.resume import Wire, open_call, read_until, resume

from trio_mcp import Server
from trio_mcp.protocol import Cursor, Notification

TIMEOUT = 10

server = Server("resume-cursors")


@server.tool()
async def three(tag: str = "") -> str:
    """Return at once.

    Args:
        tag: echoed back.
    """
    return f"three {tag}"


async def answered_call(session: McpSession) -> Wire:
    """One complete tool call on a POST stream: its priming id, its response id."""
    wire = Wire()
    async with open_call(session, rpc_request("tools/call", {"name": "three"})) as stream:
        await read_until(stream, wire)
    assert len(wire.ids) == 2, wire
    return wire


async def refused(session: McpSession, last_event_id: str) -> tuple[int, str, dict[str, object]]:
    async with resume(session, last_event_id) as stream:
        body = await stream.read_body()
        return stream.status, stream.content_type, json.loads(body)


def edited(event_id: str, *, stream: int = 0, seq: int = 0) -> str:
    # With a shared store, an id starts with the worker holding its stream ("origin~").
    origin, _, rest = event_id.rpartition("~")
    s, q, mac = rest.split(".")
    return f"{origin + '~' if origin else ''}{int(s) + stream}.{int(q) + seq}.{mac}"


def assert_bad_request(answer: tuple[int, str, dict[str, object]]) -> None:
    status, content_type, body = answer
    assert (400, "application/json") == (status, content_type), answer
    assert "2.0" == body["jsonrpc"] and "result" not in body, body
    error = body["error"]
    assert isinstance(error, dict) and isinstance(error["code"], int), body
    assert "Last-Event-ID" in error["message"], body


@pytest.mark.spec("TM-RES-MALFORMED")
@pytest.mark.parametrize(
    "last_event_id",
    ["garbage", "1", "1.2", "1.2.3.4", "-1.0.AAAAAAAAAAAAAAAA", "01.2.AAAAAAAAAAAAAAAA",
     "1.2.AAAAAAAAAAAAAAAA", "0.0.AAAAAAAAAAAAAAAA", "", "1.2.AAAAAAAAAAAAAAA="],
)
async def test_malformed_cursor_gets_400_with_a_json_rpc_error(
    live_server: StartServer, last_event_id: str
) -> None:
    """A Last-Event-ID that is not an event id this server issued (wrong shape, or the right
    shape with a made-up MAC) is answered 400 with a JSON-RPC error body: never a replay,
    never an empty event stream."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        await answered_call(session)
        answer = await refused(session, last_event_id)

    assert_bad_request(answer)


@pytest.mark.spec("TM-RES-MALFORMED", "TM-RES-EVENTID", "T-RESUME-3")
@pytest.mark.parametrize(("stream", "seq"), [(0, 1), (0, -1), (1, 0), (-1, 0), (1, 1)])
async def test_cursor_with_an_edited_stream_or_position_gets_400(
    live_server: StartServer, stream: int, seq: int
) -> None:
    """An event id whose stream number or position was edited by hand no longer matches its
    MAC: 400, even when the edited id names a stream and position that exist."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        await answered_call(session)
        wire = await answered_call(session)
        genuine = wire.ids[0]
        answer = await refused(session, edited(genuine, stream=stream, seq=seq))

    assert_bad_request(answer)


@pytest.mark.spec("TM-RES-MALFORMED", "T-RESUME-6")
async def test_cursor_of_another_session_gets_400_and_leaves_that_session_alone(
    live_server: StartServer,
) -> None:
    """An event id of session A sent with session B's id is refused with 400: B gets none
    of A's messages, and A's own connection to that stream is not detached by it."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session_a = await open_session(live.url)
        session_b = await open_session(live.url)
        wire = Wire()
        async with session_a.open_get() as get_a:
            first = await get_a.next_event()
            assert first is not None and first.id
            wire.take(first)
            answer = await refused(session_b, first.id)
            for held in list(live.table.sessions.values()):
                held.send(Notification(method="notifications/tools/list_changed"))
            await read_until(get_a, wire, messages=1)

    assert_bad_request(answer)
    assert ["notifications/tools/list_changed"] == [m["method"] for m in wire.messages]


@pytest.mark.spec("TM-RES-MALFORMED", "TM-RES-EVENTID")
async def test_cursor_from_another_server_process_gets_400(live_server: StartServer) -> None:
    """Event ids carry a MAC under a key that lives as long as the server process. An id
    issued by another process (here: a second server, with its own key) is refused with 400,
    both a real id of that server's session and one that server minted for this very
    session id."""
    old = await live_server(server)
    new = await live_server(server)
    with trio.fail_after(TIMEOUT):
        old_session = await open_session(old.url)
        old_wire = await answered_call(old_session)
        session = await open_session(new.url)
        await answered_call(session)
        foreign = await refused(session, old_wire.ids[0])
        minted = old.runtime.codec.encode(session.id, Cursor(stream=1, seq=1))
        assert new.runtime.codec.decode(session.id, minted) is None
        forged = await refused(session, minted)

    assert_bad_request(foreign)
    assert_bad_request(forged)


@pytest.mark.spec("T-SESS-7", "TM-RES-MALFORMED")
async def test_unknown_or_ended_session_gets_404_not_400(live_server: StartServer) -> None:
    """A resume GET with a session id the server does not know, or one that has ended, is
    answered 404 (the session is gone: start a new one, T-SESS-8), which a client must be
    able to tell from the 400 of a bad cursor in a live session."""
    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url)
        wire = await answered_call(session)
        unknown = McpSession(
            url=live.url, id="not-a-session", protocol_version=session.protocol_version,
            initialize_result={},
        )
        async with resume(unknown, wire.ids[0]) as stream:
            unknown_status = stream.status
        deleted = await session.delete()
        async with resume(session, wire.ids[0]) as stream:
            ended_status = stream.status

    assert (404, 204, 404) == (unknown_status, deleted.status, ended_status)
