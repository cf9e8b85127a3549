# TM-POST-ATONCE: a request stream whose answer is complete before its first byte goes out is
# sent as one complete text/event-stream body; anything else streams through a View. Over
# real sockets on both HTTP servers (the wire form), and in memory (what a failed reply
# leaves in the log).
from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from support.client import McpSession, Response, open_session, rpc_request
from support.fixtures import StartServer, wait_until
from support.slow import MemoryServer, PacedResponder

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.protocol import Reply, SSEDecoder

TIMEOUT = 10


def at_once_server() -> Server:
    server = Server("at-once")

    @server.tool()
    async def quick(text: str) -> str:
        """Answer at once."""
        return text

    @server.tool()
    async def chatty(ctx: Context, text: str) -> str:
        """Log once, then answer, waiting on nothing."""
        await ctx.log("warning", text)
        return text

    @server.tool()
    async def napping(text: str) -> str:
        """Answer after a short sleep."""
        await trio.sleep(0.05)
        return text

    @server.tool()
    async def large(size: int) -> str:
        """Answer at once with ``size`` characters."""
        return "x" * size

    return server


async def call(session: McpSession, tool: str, arguments: dict[str, Any]) -> Response:
    return await session.post(
        rpc_request("tools/call", {"name": tool, "arguments": arguments}, id=f"{tool}-1")
    )


def check_stream(response: Response, tool: str) -> list[dict[str, Any]]:
    """The events of a POST's SSE response: the priming event (an id, empty data), then
    messages each with an id of the same stream, the last the tool's response."""
    assert response.status == 200 and response.content_type == "text/event-stream"
    events = response.events()
    priming, *messages = [e for e in events if e.id is not None or e.data]
    assert priming.id and priming.data == "", events
    assert all(e.id and e.event is None for e in messages), events
    stream = priming.id.split(".")[0]
    assert all(e.id and e.id.split(".")[0] == stream for e in messages), events
    decoded = [json.loads(e.data) for e in messages]
    assert decoded[-1]["id"] == f"{tool}-1" and "result" in decoded[-1], decoded
    return decoded


@pytest.mark.spec("TM-POST-ATONCE", "T-PSSE-1")
async def test_answer_ready_before_the_first_byte_goes_out_whole_with_its_length(
    live_server: StartServer,
) -> None:
    """A POST whose handlers answer without waiting gets one complete SSE body with a
    Content-Length: the priming event, then the response; a handler that sends a message
    first gets the same events, whole or streamed (a send may wait a turn or more)."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(at_once_server())
        session = await open_session(live.url)
        quick = await call(session, "quick", {"text": "hi"})
        chatty = await call(session, "chatty", {"text": "note"})

    assert quick.header("content-length") == str(len(quick.body)), quick.headers
    assert quick.header("transfer-encoding") is None, quick.headers
    check_stream(quick, "quick")
    log, answer = check_stream(chatty, "chatty")
    assert log["method"] == "notifications/message" and log["params"]["data"] == "note"
    assert answer["result"]["content"][0]["text"] == "note"


@pytest.mark.spec("TM-POST-ATONCE")
@pytest.mark.parametrize(("tool", "arguments"), [
    ("napping", {"text": "later"}),
    ("large", {"size": 20000}),
])
async def test_answer_that_waits_or_is_large_is_streamed(
    live_server: StartServer, tool: str, arguments: dict[str, Any]
) -> None:
    """A handler that waits, or an answer over 16 KiB, goes through a streamed (chunked)
    response, with the same events."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(at_once_server())
        session = await open_session(live.url)
        response = await call(session, tool, arguments)

    assert response.header("content-length") is None, response.headers
    assert response.header("transfer-encoding") == "chunked", response.headers
    check_stream(response, tool)


class FailingReply(PacedResponder):
    """A client that is gone by the time a complete reply would reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: Reply | None = None

    async def reply(self, reply: Reply) -> None:
        self.lost = reply
        self.client_leaves()


@pytest.mark.spec("TM-POST-ATONCE", "TM-RES-PIN")
async def test_complete_reply_that_never_got_through_stays_to_resume() -> None:
    """A complete reply whose connection failed marks nothing taken: resuming from its
    priming event delivers the response, once."""
    with trio.fail_after(TIMEOUT):
        async with MemoryServer.open(at_once_server(), ServerConfig()) as mem:
            session_id = await mem.initialize()
            failed = FailingReply()
            mem.call(session_id, "quick", {"text": "kept"}, failed)
            await failed.connection_closed.wait()
            assert failed.lost is not None
            first_id = SSEDecoder().feed(failed.lost.body)[0].id
            assert first_id is not None
            resumed = mem.get(session_id, last_event_id=first_id)
            await wait_until(lambda: bool(resumed.messages()))
            resumed.client_leaves()

    [message] = resumed.messages()
    assert message["result"]["content"][0]["text"] == "kept", message


@pytest.mark.spec("TM-POST-ATONCE", "TM-RES-PIN", "TM-SESS-INFLIGHT")
async def test_answers_sent_whole_are_taken_and_pin_nothing(live_server: StartServer) -> None:
    """Answers sent whole count as delivered once they went out: more calls on one
    session than it may hold in flight all succeed, and none stays pinned in the log."""
    config = ServerConfig(max_inflight_requests=8)
    with trio.fail_after(TIMEOUT):
        live = await live_server(at_once_server(), config)
        session = await open_session(live.url)
        for i in range(3 * config.max_inflight_requests):
            response = await session.post(
                rpc_request("tools/call", {"name": "quick", "arguments": {"text": f"{i}"}})
            )
            assert response.status == 200, response
            [answer] = [json.loads(e.data) for e in response.events() if e.data]
            assert answer["result"]["content"][0]["text"] == f"{i}", answer
        # The server marks the last one once its write returned, which may come after the
        # client has read it.
        [state] = [s for s in live.app.table.sessions.values() if s.id == session.id]
        await wait_until(lambda: state.log.pinned_responses == 0)
