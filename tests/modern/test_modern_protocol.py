# The 2026-07-28 base protocol as one client meets it, end to end over loopback: discovery and
# versioning, then each message pattern in turn (a request answered after progress, a multi
# round-trip request, a subscription, and a cancellation), with no session anywhere.
from __future__ import annotations

import pytest
import trio
from support.fixtures import StartServer, wait_until
from support.modern import (
    META_SUBSCRIPTION_ID,
    MODERN,
    call_tool,
    messages_of,
    modern_headers,
    modern_request,
    open_modern,
    post,
)

from trio_mcp import Context, Server

TIMEOUT = 10

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _pattern_server() -> Server:
    server = Server("patterns", version="2.0.0")

    @server.tool()
    async def count(ctx: Context, n: int = 3) -> str:
        """Count to n, reporting progress at each step.

        Args:
            n: how far to count.
        """
        for i in range(n):
            await ctx.report_progress(i + 1, n)
        return f"counted to {n}"

    @server.tool()
    async def greet(ctx: Context) -> str:
        """Ask the user's name, then greet them."""
        answer = await ctx.elicit("Your name?", NAME_FORM, key="name")
        return f"Hello, {(answer.content or {}).get('name')}!"

    @server.tool()
    async def wait(ctx: Context) -> str:
        """Report progress once, then wait until cancelled."""
        await ctx.report_progress(1)
        await trio.sleep_forever()
        return "never"

    @server.resource("test://note", mime_type="text/plain")
    async def note() -> str:
        """A note that clients may subscribe to."""
        return "a note"

    @server.tool()
    async def touch_note() -> str:
        """Tell subscribers that test://note changed."""
        server.notify_resource_updated("test://note")
        return "touched"

    return server


@pytest.mark.spec("ML-GEN-1", "ML-STATE-1")
async def test_one_client_meets_versioning_and_every_message_pattern(
    live_server: StartServer,
) -> None:
    """Discover, a refused version, progress, input_required, a listen and a cancellation."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_pattern_server())
        runtime = live.app.runtime
        # Versioning: the server names its versions, and refuses one it does not speak.
        discover = await post(live.url, modern_request("server/discover", id="v-1"))
        future = modern_request("tools/list", id="v-2", version="2099-01-01")
        refused = await post(live.url, future, headers=modern_headers(future,
                                                                       version="2099-01-01"))
        # A request answered after its notifications.
        counted = await post(live.url, call_tool("count", {"n": 3}, id="p-1", progress_token=9))
        # A multi round-trip request.
        caps = {"elicitation": {}}
        first = await post(live.url, call_tool("greet", id="m-1", capabilities=caps))
        state = first.json()["result"]["requestState"]
        answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        second = await post(live.url, call_tool("greet", id="m-2", capabilities=caps,
                                                inputResponses=answer, requestState=state))
        # A subscription: acknowledged, then told of the change it asked for.
        listen = modern_request(
            "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["test://note"]}},
            id="s-1",
        )
        async with open_modern(live.url, listen) as stream:
            ack = await stream.next_message()
            await wait_until(lambda: 1 == len(runtime.listeners.live))
            await post(live.url, call_tool("touch_note"))
            updated = await stream.next_message()
        # Cancellation: the client closes the request's response stream.
        async with open_modern(live.url, call_tool("wait", id="c-1", progress_token="w")) as s:
            await s.next_message()
        await wait_until(lambda: 1 == runtime.modern.stats.requests_cancelled)

    assert [MODERN] == discover.json()["result"]["supportedVersions"]
    assert (400, -32022) == (refused.status, refused.json()["error"]["code"])
    assert {"supported": [MODERN], "requested": "2099-01-01"} == refused.json()["error"]["data"]

    *progress, result = messages_of(counted)
    assert [1, 2, 3] == [m["params"]["progress"] for m in progress]
    assert {9} == {m["params"]["progressToken"] for m in progress}
    assert ("p-1", "counted to 3") == (result["id"], result["result"]["content"][0]["text"])

    assert "input_required" == first.json()["result"]["resultType"]
    assert "elicitation/create" == first.json()["result"]["inputRequests"]["name"]["method"]
    done = second.json()["result"]
    assert ("complete", "Hello, Ada!") == (done["resultType"], done["content"][0]["text"])

    assert "notifications/subscriptions/acknowledged" == ack["method"]
    assert "notifications/resources/updated" == updated["method"]
    assert {"uri": "test://note", "_meta": {META_SUBSCRIPTION_ID: "s-1"}} == updated["params"]

    # No answer of any pattern made or named a session.
    for response in (discover, refused, counted, first, second):
        assert response.header("mcp-session-id") is None
    assert {} == dict(live.table.sessions)
