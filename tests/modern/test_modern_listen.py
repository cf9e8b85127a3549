# subscriptions/listen end to end over loopback: the acknowledgment first, then only the
# notifications the listener asked for, each naming its subscription; keep-alive comments on a
# quiet stream; a graceful end with the listen result when the server shuts down; and a
# listener that falls behind or stops reading is cut, with nothing kept for it.
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import trio
from support.client import SSEStream
from support.fixtures import StartServer, wait_until
from support.modern import (
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    call_tool,
    modern_headers,
    modern_request,
    open_modern,
    post,
)
from support.slow import open_slow

from trio_mcp import Context, Server, ServerConfig
from trio_mcp.protocol import SSEDecoder

TIMEOUT = 10


def listen(notifications: Mapping[str, Any], rid: str | int) -> dict[str, Any]:
    return modern_request("subscriptions/listen", {"notifications": dict(notifications)}, id=rid)


def same_id(expected: str | int, actual: Any) -> bool:
    """Equal and of the same JSON type (1 and "1" are different ids)."""
    return bool(expected == actual and type(expected) is type(actual))


async def acked(stream: SSEStream, rid: str | int) -> dict[str, Any]:
    """Read the stream's first message, which must be the acknowledgment; its params."""
    assert 200 == stream.status
    assert "text/event-stream" == stream.content_type
    first = await stream.next_event()
    assert first is not None and first.data, first
    assert first.id is None and first.retry is None and first.event is None, first
    message = json.loads(first.data)
    assert "notifications/subscriptions/acknowledged" == message["method"], message
    assert "id" not in message
    params: dict[str, Any] = message["params"]
    assert same_id(rid, params["_meta"][META_SUBSCRIPTION_ID]), params
    return params


async def next_message(stream: SSEStream, rid: str | int) -> dict[str, Any]:
    """The next JSON-RPC message (keep-alive comments skipped), checked to name ``rid``."""
    message = await stream.next_message()
    meta = (message.get("params") or message.get("result") or {}).get("_meta") or {}
    assert same_id(rid, meta.get(META_SUBSCRIPTION_ID)), message
    return message


def make_server() -> Server:
    """Tools, prompts and two subscribable resources; a tool that logs and reports progress."""
    server = Server("listen-tests", version="1.2.3")

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Log a message and report progress (request-scoped notifications)."""
        await ctx.log("error", "chatty speaking")
        await ctx.report_progress(1, 1, "done")
        return "said it"

    @server.prompt()
    async def greet() -> str:
        """A prompt."""
        return "hello"

    @server.resource("test://a", mime_type="text/plain")
    async def res_a() -> str:
        """Resource a."""
        return "a"

    @server.resource("test://b", mime_type="text/plain")
    async def res_b() -> str:
        """Resource b."""
        return "b"

    return server


async def _extra() -> str:
    """An added tool or prompt."""
    return "extra"


# -- the acknowledgment ------------------------------------------------------------------------


@pytest.mark.spec("MU-SUB-2", "MU-SUB-3", "MU-SUB-6", "MU-SUB-7", "MU-SUB-8", "MT-SSE-5",
                  "MT-SSE-6")
@pytest.mark.parametrize("rid", ["listen-1", 7, 0], ids=["string", "int", "zero"])
async def test_the_acknowledgment_comes_first_and_names_the_listen_requests_id(
    live_server: StartServer, rid: str | int
) -> None:
    """The ack is the stream's first message; its subscriptionId is the request's id."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        wanted = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": False,
            "resourceSubscriptions": ["test://watched-resource", "test://static-text"],
        }
        async with open_modern(live.url, listen(wanted, rid)) as stream:
            headers = (stream.header("x-accel-buffering"), stream.header("mcp-session-id"))
            params = await acked(stream, rid)

    assert ("no", None) == headers
    assert {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourceSubscriptions": ["test://static-text", "test://watched-resource"],
    } == params["notifications"]
    assert {META_SUBSCRIPTION_ID} == set(params["_meta"])


@pytest.mark.spec("MU-SUB-7", "MU-SUB-2")
async def test_the_acknowledgment_omits_what_the_server_does_not_offer(
    live_server: StartServer,
) -> None:
    """A server with tools only honours toolsListChanged and leaves the rest out."""
    server = Server("tools-only")

    @server.tool()
    async def one() -> str:
        """The only tool."""
        return "1"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        wanted = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
            "resourceSubscriptions": ["test://nowhere"],
        }
        async with open_modern(live.url, listen(wanted, "only")) as stream:
            params = await acked(stream, "only")

    assert {"toolsListChanged": True} == params["notifications"]


# -- what is delivered -----------------------------------------------------------------------------


@pytest.mark.spec("MU-SUB-1", "MU-SUB-3", "MU-SUB-8", "MU-SUB-9", "MU-TOOL-4", "MU-LOG-4",
                  "MT-SSE-7", "MJ-NOTIF-2")
async def test_each_listener_gets_only_the_list_changes_it_asked_for(
    live_server: StartServer,
) -> None:
    """Each listener gets only the list changes it asked for, never request-scoped ones."""
    server = make_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        runtime = live.app.runtime
        async with (
            open_modern(live.url, listen({"toolsListChanged": True}, "tools")) as tools,
            open_modern(live.url, listen({"promptsListChanged": True}, 42)) as prompts,
        ):
            await acked(tools, "tools")
            await acked(prompts, 42)
            await wait_until(lambda: 2 == len(runtime.listeners.live))

            server.add_tool(_extra, name="extra_tool")
            to_tools = await next_message(tools, "tools")
            # A request's own notifications stay on its own stream.
            chatty = await post(live.url, call_tool("chatty", log_level="debug",
                                                    progress_token="c"))
            server.add_prompt(_extra, name="extra_prompt")
            # The prompts listener's first message is the prompt change: the tool change
            # (and chatty's log and progress) never reached it.
            to_prompts = await next_message(prompts, 42)
            server.remove_tool("extra_tool")
            # And the tools listener's next is the tool removal: no prompt change between.
            to_tools_again = await next_message(tools, "tools")

    assert "notifications/tools/list_changed" == to_tools["method"]
    assert "notifications/prompts/list_changed" == to_prompts["method"]
    assert "notifications/tools/list_changed" == to_tools_again["method"]
    for message in (to_tools, to_prompts, to_tools_again):
        assert "id" not in message
    methods = [m.get("method") for m in _sse_messages(chatty.body)]
    assert ["notifications/message", "notifications/progress", None] == methods


def _sse_messages(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in SSEDecoder().feed(body) if e.data]


@pytest.mark.spec("MU-SUB-1", "MU-SUB-3", "MU-SUB-10")
async def test_resource_updates_go_only_to_listeners_subscribed_to_that_uri(
    live_server: StartServer,
) -> None:
    """notify_resource_updated reaches exactly the listeners that named the URI."""
    server = make_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        runtime = live.app.runtime
        async with (
            open_modern(live.url, listen({"resourceSubscriptions": ["test://a"]}, "a")) as a,
            open_modern(live.url, listen({"resourceSubscriptions": ["test://b"]}, "b")) as b,
            open_modern(live.url, listen({"resourcesListChanged": True}, "l")) as lists,
        ):
            await acked(a, "a")
            await acked(b, "b")
            await acked(lists, "l")
            await wait_until(lambda: 3 == len(runtime.listeners.live))

            counts = [
                server.notify_resource_updated("test://b"),
                server.notify_resource_updated("test://c"),
                server.notify_resource_updated("test://a"),
            ]
            to_a = await next_message(a, "a")
            to_b = await next_message(b, "b")
            server.add_resource(_extra, "test://new")
            to_lists = await next_message(lists, "l")
            # a did not ask for list changes: its next message is the next update of a.
            server.notify_resource_updated("test://a")
            to_a_again = await next_message(a, "a")

    assert [1, 0, 1] == counts
    assert ("notifications/resources/updated", "test://a") == (
        to_a["method"], to_a["params"]["uri"]
    )
    assert ("notifications/resources/updated", "test://b") == (
        to_b["method"], to_b["params"]["uri"]
    )
    assert "notifications/resources/list_changed" == to_lists["method"]
    assert ("notifications/resources/updated", "test://a") == (
        to_a_again["method"], to_a_again["params"]["uri"]
    )


# -- keep-alive, graceful end ---------------------------------------------------------------------


@pytest.mark.spec("TM-MOD-KEEPALIVE")
async def test_a_quiet_listen_stream_gets_keep_alive_comments(live_server: StartServer) -> None:
    """A quiet listen stream gets ': keep-alive' comments every keepalive_interval."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(make_server(), ServerConfig(keepalive_interval=0.1))
        async with open_modern(live.url, listen({"toolsListChanged": True}, "k")) as stream:
            await acked(stream, "k")
            started = trio.current_time()
            comments = [await stream.next_event() for _ in range(3)]
            elapsed = trio.current_time() - started

    for comment in comments:
        assert comment is not None
        assert "keep-alive" == comment.comment
        assert comment.data is None and comment.id is None
    # Spaced by the interval, not a burst.
    assert elapsed >= 0.15


@pytest.mark.spec("MU-SUB-4", "MU-SUB-8", "TM-MOD-SUBEND", "MU-CANCEL-2", "MJ-RES-3",
                  "ML-META-4")
async def test_server_shutdown_ends_every_subscription_with_its_listen_result(
    live_server: StartServer,
) -> None:
    """Shutdown ends each subscription with its listen result, then ends the stream."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(make_server())
        runtime = live.app.runtime
        async with (
            open_modern(live.url, listen({"toolsListChanged": True}, "s-1")) as one,
            open_modern(live.url, listen({"promptsListChanged": True}, 99)) as two,
        ):
            await acked(one, "s-1")
            await acked(two, 99)
            await wait_until(lambda: 2 == len(runtime.listeners.live))
            await runtime.shutdown(1.0)
            rest_one = [json.loads(e.data) async for e in one.events() if e.data]
            rest_two = [json.loads(e.data) async for e in two.events() if e.data]
            ends = [(one.ended, one.truncated), (two.ended, two.truncated)]

    for rest, rid in ((rest_one, "s-1"), (rest_two, 99)):
        # Only the result: never a notifications/cancelled (MU-CANCEL-2, TM-MOD-SUBEND).
        [final] = rest
        assert same_id(rid, final["id"]), final
        assert "method" not in final
        result = final["result"]
        assert "complete" == result["resultType"]
        assert same_id(rid, result["_meta"][META_SUBSCRIPTION_ID])
        assert {"name": "listen-tests", "version": "1.2.3"} == result["_meta"][META_SERVER_INFO]
    assert [(True, False), (True, False)] == ends
    assert set() == runtime.listeners.live


@pytest.mark.spec("MU-CANCEL-2")
@pytest.mark.xfail(
    strict=True,
    reason="MU-CANCEL-2 is a deviation: at shutdown trio-mcp ends a subscription with its "
    "listen result (MU-SUB-4, TM-MOD-SUBEND), never with notifications/cancelled",
)
async def test_shutdown_tears_a_subscription_down_with_notifications_cancelled(
    live_server: StartServer,
) -> None:
    """What the cancellation page asks: notifications/cancelled naming the listen request."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(make_server())
        runtime = live.app.runtime
        async with open_modern(live.url, listen({"toolsListChanged": True}, "torn")) as stream:
            await acked(stream, "torn")
            await wait_until(lambda: 1 == len(runtime.listeners.live))
            await runtime.shutdown(1.0)
            rest = [json.loads(e.data) async for e in stream.events() if e.data]

    cancelled = [m for m in rest if m.get("method") == "notifications/cancelled"]
    assert ["torn"] == [m["params"]["requestId"] for m in cancelled], rest


# -- a listener that falls behind is cut -------------------------------------------------------


@pytest.mark.spec("TM-MOD-LISTEN", "MU-SUB-5", "TM-BP-BOUNDED", "TM-BP-COUNTERS")
async def test_a_listener_that_falls_64_events_behind_is_cut_with_nothing_kept(
    live_server: StartServer,
) -> None:
    """A listener 64 events behind is cut: counted, dropped, no listen result."""
    # Its stream ends without a listen result: the client's cue to reconnect (MU-SUB-5).
    server = make_server()
    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        runtime = live.app.runtime
        message = listen({"resourceSubscriptions": ["test://a"]}, "flooded")
        async with open_modern(live.url, message) as stream:
            await acked(stream, "flooded")
            await wait_until(lambda: 1 == len(runtime.listeners.live))
            # No checkpoint between them: the writer cannot take any while they come.
            delivered = [server.notify_resource_updated("test://a") for _ in range(200)]
            await wait_until(lambda: not runtime.listeners.live)
            rest = [json.loads(e.data) async for e in stream.events() if e.data]
            ended_cleanly = stream.ended and not stream.truncated

    taken = sum(delivered)
    assert 64 <= taken <= 64 + 3, taken
    assert [1] * taken + [0] * (200 - taken) == delivered
    assert 1 == runtime.modern.stats.streams_cut
    assert not ended_cleanly
    assert all("id" not in m for m in rest), "a cut listener gets no listen result"
    assert all("notifications/resources/updated" == m["method"] for m in rest)
    assert len(rest) <= taken


@pytest.mark.slow
@pytest.mark.spec("TM-MOD-LISTEN", "TM-BP-STALL", "MU-SUB-5", "TM-BP-RELEASE")
async def test_a_listener_whose_reader_stops_is_cut_by_the_stall_rule(
    live_server: StartServer,
) -> None:
    """A listener whose reader stops (never 64 behind) is cut by the stall rule."""
    # A 4 KiB receive buffer, nothing read after the acknowledgment, 8 KB updates ten times a
    # second, fewer than 64 in all: only the stall rule can cut it.
    server = make_server()
    uri = "test://big/" + "u" * 8000
    config = ServerConfig(stall_budget=1.0, min_read_rate=2048.0)
    with trio.fail_after(30):
        live = await live_server(server, config)
        runtime = live.app.runtime
        message = listen({"resourceSubscriptions": [uri]}, "stalled")
        async with open_slow(
            (live.host, live.port), "POST", "/mcp", modern_headers(message),
            json.dumps(message).encode(),
        ) as client:
            await client.wait_for(lambda c: bool(c.messages))
            opened = trio.current_time()
            sent = 0
            while runtime.modern.stats.streams_cut == 0 and sent < 60:
                sent += server.notify_resource_updated(uri)
                await trio.sleep(0.1)
            cut_after = trio.current_time() - opened
            await wait_until(lambda: not runtime.listeners.live)
            await client.read(None)

    assert 1 == runtime.modern.stats.streams_cut, (sent, cut_after)
    assert sent < 64
    assert 1.0 <= cut_after <= 10.0, cut_after
    assert client.eof or client.reset
    assert not client.ended
    first, *rest = client.messages
    assert "notifications/subscriptions/acknowledged" == first["method"]
    assert all("id" not in m for m in rest)


@pytest.mark.spec("TM-SEC-MEMORY", "TM-MOD-LISTEN", "MU-SUB-5")
async def test_a_listeners_backlog_is_charged_and_cut_at_its_clients_budget(
    live_server: StartServer,
) -> None:
    """The events a listener has queued are charged to its client's budget: with 256 KiB of
    room, a listener of an 8 KB URI that reads nothing is cut once about 30 updates wait,
    long before 64, and everything it held is given back when it ends."""
    server = make_server()
    uri = "test://big/" + "u" * 8000
    budget = 256 * 1024
    config = ServerConfig(request_memory_per_client=budget)
    with trio.fail_after(TIMEOUT):
        live = await live_server(server, config)
        runtime = live.app.runtime
        message = listen({"resourceSubscriptions": [uri]}, "costly")
        async with open_modern(live.url, message) as stream:
            await acked(stream, "costly")
            await wait_until(lambda: 1 == len(runtime.listeners.live))
            held = live.stats()["request_memory_held"]
            # No checkpoint between them: the writer cannot take any while they come.
            delivered = [server.notify_resource_updated(uri) for _ in range(64)]
            await wait_until(lambda: not runtime.listeners.live)
        await wait_until(lambda: 0 == live.stats()["request_memory_held"])

    taken = sum(delivered)
    event = 8000 + 100
    assert 0 < held < budget
    assert (budget - held) // event <= taken <= (budget - held) // event + 3, (taken, held)
    assert taken < 64
    assert 1 == runtime.modern.stats.streams_cut
