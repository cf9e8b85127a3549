"""Server-to-client requests: sampling, elicitation, roots and ping, from a handler (on its
request's stream) and from outside any request (on the standalone stream)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp import (
    ClientCapabilityError,
    ClientTimeoutError,
    Context,
    Image,
    Server,
    SessionContext,
    UserMessage,
)
from trio_mcp.protocol import LocalProtocolError

ALL_CAPS = {"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": True}}


def asking_server() -> tuple[Server, list[Any]]:
    server = Server("client-request-tests")
    outcomes: list[Any] = []

    @server.tool()
    async def ask(ctx: Context, what: str, timeout: float | None = None) -> str:
        """Sends one request to the client.

        Args:
            what: sample, elicit, roots or ping.
            timeout: seconds to wait for the answer.
        """
        if what == "sample":
            result: Any = await ctx.sample(
                [UserMessage("hi"), UserMessage(Image(b"png"))],
                max_tokens=5,
                system_prompt="be brief",
                temperature=0.5,
                timeout=timeout,
            )
        elif what == "elicit":
            schema = {"type": "object", "properties": {"name": {"type": "string"}}}
            result = await ctx.elicit("Who are you?", schema, timeout=timeout)
        elif what == "roots":
            result = await ctx.list_roots(timeout=timeout)
        else:
            result = await ctx.ping(timeout=timeout)
        outcomes.append(result)
        return "ok"

    return server, outcomes


async def answer_one(stream: Any, s: Any, result: dict[str, Any]) -> dict[str, Any]:
    """Read the server's request from ``stream``, answer it, return it."""
    req = await stream.next_message()
    assert req is not None and "method" in req and "id" in req, req
    ack = await s.respond(req["id"], result)
    assert ack.status == 202
    return dict(req)


@pytest.mark.spec("T-PSSE-8", "J-ID-3")
async def test_sampling_goes_on_the_request_stream(autojump_clock, mem):
    """ctx.sample sends sampling/createMessage on the calling request's stream, with the
    messages, maxTokens and options in wire form; the client's POSTed result comes back to
    the handler as a SamplingResult."""
    server, outcomes = asking_server()
    ms = await mem(server)
    s = await ms.open_session(ALL_CAPS)
    with trio.fail_after(10):
        call, stream = await s.start("tools/call", {"name": "ask", "arguments": {"what": "sample"}})
        req = await answer_one(
            stream,
            s,
            {
                "role": "assistant",
                "content": {"type": "text", "text": "hello"},
                "model": "m1",
                "stopReason": "endTurn",
            },
        )
        assert req["method"] == "sampling/createMessage"
        assert isinstance(req["id"], int)
        assert req["params"] == {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "hi"}},
                {
                    "role": "user",
                    "content": {"type": "image", "data": "cG5n", "mimeType": "image/png"},
                },
            ],
            "maxTokens": 5,
            "systemPrompt": "be brief",
            "temperature": 0.5,
        }
        [response] = await stream.messages()
        assert response["id"] == call["id"] and "result" in response
        [result] = outcomes
        assert (result.text, result.model, result.stop_reason) == ("hello", "m1", "endTurn")


async def test_elicitation_uses_form_mode(autojump_clock, mem):
    """ctx.elicit sends elicitation/create with mode "form", the message and the schema;
    the user's action and content come back as an ElicitationResult."""
    server, outcomes = asking_server()
    ms = await mem(server)
    s = await ms.open_session(ALL_CAPS)
    with trio.fail_after(10):
        _, stream = await s.start("tools/call", {"name": "ask", "arguments": {"what": "elicit"}})
        req = await answer_one(stream, s, {"action": "accept", "content": {"name": "Ada"}})
        assert req["method"] == "elicitation/create"
        assert req["params"]["mode"] == "form"
        assert req["params"]["message"] == "Who are you?"
        assert req["params"]["requestedSchema"]["properties"] == {"name": {"type": "string"}}
        await stream.messages()
        [result] = outcomes
        assert result.accepted and result.content == {"name": "Ada"}


async def test_roots_and_ping(autojump_clock, mem):
    """ctx.list_roots returns the client's roots; ctx.ping needs no capability and returns
    once the client answered with an empty result."""
    server, outcomes = asking_server()
    ms = await mem(server)
    s = await ms.open_session({"roots": {}})
    with trio.fail_after(10):
        _, stream = await s.start("tools/call", {"name": "ask", "arguments": {"what": "roots"}})
        req = await answer_one(stream, s, {"roots": [{"uri": "file:///a", "name": "A"}]})
        assert req["method"] == "roots/list"
        await stream.messages()
        _, stream = await s.start("tools/call", {"name": "ask", "arguments": {"what": "ping"}})
        req = await answer_one(stream, s, {})
        assert req["method"] == "ping"
        await stream.messages()
        roots, pong = outcomes
        assert [(r.uri, r.name) for r in roots] == [("file:///a", "A")]
        assert pong is None


@pytest.mark.spec("L-CAP-1")
@pytest.mark.parametrize(
    ("what", "caps", "missing"),
    [
        ("sample", {}, "sampling"),
        ("elicit", {}, "elicitation.form"),
        ("elicit", {"elicitation": {"url": {}}}, "elicitation.form"),
        ("roots", {"sampling": {}}, "roots"),
    ],
)
async def test_a_missing_client_capability_is_a_clear_error(
    autojump_clock, mem, what, caps, missing
):
    """A request needing a capability the client did not declare is not sent; the handler
    gets ClientCapabilityError, which names the capability."""
    server = Server("caps")
    errors: list[Exception] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks without checking."""
        try:
            if what == "sample":
                await ctx.sample("hi", max_tokens=1)
            elif what == "elicit":
                await ctx.elicit("hi", {"type": "object", "properties": {}})
            else:
                await ctx.list_roots()
        except ClientCapabilityError as exc:
            errors.append(exc)
            raise
        return "sent"

    ms = await mem(server)
    s = await ms.open_session(caps)
    with trio.fail_after(10):
        answer, before = await s.call("tools/call", {"name": "ask"})
        assert before == []
        assert answer["error"]["code"] == -32603
        assert missing in answer["error"]["message"]
        assert answer["error"]["data"] == {"missingCapability": missing}
        assert len(errors) == 1


async def test_empty_elicitation_capability_means_form(autojump_clock, mem):
    """An empty elicitation capability object declares form mode (backwards compatibility)."""
    server, outcomes = asking_server()
    ms = await mem(server)
    s = await ms.open_session({"elicitation": {}})
    with trio.fail_after(10):
        _, stream = await s.start("tools/call", {"name": "ask", "arguments": {"what": "elicit"}})
        await answer_one(stream, s, {"action": "decline"})
        await stream.messages()
        assert outcomes[0].action == "decline" and outcomes[0].content is None


@pytest.mark.spec("L-TIME-1", "L-TIME-2", "U-CANCEL-1", "U-CANCEL-6")
async def test_an_unanswered_request_times_out_and_is_cancelled(autojump_clock, mem):
    """A server-to-client request the client never answers fails after its timeout with
    ClientTimeoutError, and the server sends notifications/cancelled for it on the same
    stream (then stops waiting)."""
    server = Server("timeouts")
    caught: list[tuple[float, Exception]] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Samples with a 5 s timeout."""
        t0 = trio.current_time()
        try:
            await ctx.sample("hi", max_tokens=1, timeout=5)
        except ClientTimeoutError as exc:
            caught.append((trio.current_time() - t0, exc))
            return "timed out"
        return "answered"

    ms = await mem(server)
    s = await ms.open_session({"sampling": {}})
    with trio.fail_after(30):
        _, stream = await s.start("tools/call", {"name": "ask"})
        req = await stream.next_message()
        assert req is not None and req["method"] == "sampling/createMessage"
        cancel = await stream.next_message()
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": req["id"], "reason": "timed out"},
        }
        [response] = await stream.messages()
        assert response["result"]["content"][0]["text"] == "timed out"
        [(elapsed, exc)] = caught
        assert elapsed == pytest.approx(5, abs=0.01)
        assert "did not answer sampling/createMessage" in str(exc)
        # A late answer is ignored (U-CANCEL-6 on the client's side of the race).
        late = await s.respond(req["id"], {"role": "assistant", "content": {}, "model": "m"})
        assert late.status == 202


@pytest.mark.spec("L-TIME-3")
async def test_progress_from_the_client_does_not_extend_the_timeout(autojump_clock, mem):
    """The timeout of a server-to-client request is a maximum: progress notifications from
    the client meanwhile do not extend it."""
    server = Server("timeouts")
    elapsed: list[float] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Pings with a 5 s timeout."""
        t0 = trio.current_time()
        try:
            await ctx.ping(timeout=5)
        except ClientTimeoutError:
            elapsed.append(trio.current_time() - t0)
        return "done"

    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(30):
        _, stream = await s.start("tools/call", {"name": "ask"})
        req = await stream.next_message()
        assert req is not None and req["method"] == "ping"
        for i in range(8):
            await trio.sleep(1)
            await s.notify(
                "notifications/progress", {"progressToken": req["id"], "progress": i + 1}
            )
        await stream.messages()
        assert elapsed == [pytest.approx(5, abs=0.01)]


@pytest.mark.spec("L-TIME-4")
async def test_each_request_to_the_client_may_have_its_own_timeout(autojump_clock, mem):
    """Requests a handler sends time out after their own timeouts, not the configured one."""
    from trio_mcp import ServerConfig

    server = Server("per-request-timeouts")
    elapsed: list[float] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Pings with a 2 s timeout, then lists roots with a 7 s one."""
        for call in (lambda: ctx.ping(timeout=2), lambda: ctx.list_roots(timeout=7)):
            t0 = trio.current_time()
            with pytest.raises(ClientTimeoutError):
                await call()
            elapsed.append(trio.current_time() - t0)
        return "done"

    ms = await mem(server, ServerConfig(client_request_timeout=60))
    s = await ms.open_session(ALL_CAPS)
    with trio.fail_after(30):
        answer, before = await s.call("tools/call", {"name": "ask"})
        assert answer["result"]["content"] == [{"type": "text", "text": "done"}]
        assert [m["method"] for m in before] == [
            "ping",
            "notifications/cancelled",
            "roots/list",
            "notifications/cancelled",
        ]
        assert elapsed == [pytest.approx(2, abs=0.01), pytest.approx(7, abs=0.01)]


async def test_the_default_timeout_is_the_config_value(autojump_clock, mem):
    """Without a timeout argument, ServerConfig.client_request_timeout applies."""
    from trio_mcp import ServerConfig

    server, _outcomes = asking_server()
    ms = await mem(server, ServerConfig(client_request_timeout=3))
    s = await ms.open_session(ALL_CAPS)
    with trio.fail_after(30):
        t0 = trio.current_time()
        answer, before = await s.call("tools/call", {"name": "ask", "arguments": {"what": "ping"}})
        assert trio.current_time() - t0 == pytest.approx(3, abs=0.01)
        assert [m["method"] for m in before] == ["ping", "notifications/cancelled"]
        assert "did not answer ping within 3 s" in answer["error"]["message"]


async def test_an_error_answer_reaches_the_handler(autojump_clock, mem):
    """When the client answers with a JSON-RPC error, the handler's call raises with the
    client's code and message."""
    server, _ = asking_server()
    ms = await mem(server)
    s = await ms.open_session(ALL_CAPS)
    with trio.fail_after(10):
        _, stream = await s.start("tools/call", {"name": "ask", "arguments": {"what": "sample"}})
        req = await stream.next_message()
        assert req is not None
        await s.post(
            {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -1, "message": "User rejected"}}
        )
        [response] = await stream.messages()
        assert response["error"]["code"] == -1
        assert "User rejected" in response["error"]["message"]


@pytest.mark.spec("T-GET-4", "T-GET-5")
async def test_server_initiated_requests_go_on_the_standalone_stream(autojump_clock, mem):
    """Outside any request, Server.sessions() gives a SessionContext whose requests go on
    the session's GET stream; the client's answer comes back by POST."""
    server, _ = asking_server()
    ms = await mem(server)
    s = await ms.open_session(ALL_CAPS)
    got: list[Any] = []
    with trio.fail_after(10):
        get = await s.get()
        [session] = server.sessions()
        assert session.session_id == s.id

        async def ask() -> None:
            got.append(await session.list_roots())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await answer_one(get, s, {"roots": [{"uri": "file:///x"}]})
        assert [r.uri for r in got[0]] == ["file:///x"]


@pytest.mark.spec("L-INIT-6")
async def test_only_pings_before_initialized(autojump_clock, mem):
    """Before the client's initialized notification the server sends no request but ping:
    other requests fail at once without being sent, a ping goes out."""
    server, _ = asking_server()
    ms = await mem(server)
    s = await ms.open_session(ALL_CAPS, initialized=False)
    with trio.fail_after(10):
        get = await s.get()
        [session] = server.sessions()
        with pytest.raises(LocalProtocolError, match="before the client sent"):
            await session.list_roots()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.ping)
            req = await answer_one(get, s, {})
        assert req["method"] == "ping"


async def test_roots_list_changed_runs_the_hook(autojump_clock, mem):
    """notifications/roots/list_changed from the client runs the registered hook as a task
    of the session; the hook can ask for the new roots on the standalone stream."""
    server = Server("roots-hook")
    seen: list[list[str]] = []
    done = trio.Event()

    @server.on_roots_list_changed
    async def changed(session: SessionContext) -> None:
        seen.append([r.uri for r in await session.list_roots()])
        done.set()

    ms = await mem(server)
    s = await ms.open_session({"roots": {"listChanged": True}})
    with trio.fail_after(10):
        get = await s.get()
        ack = await s.notify("notifications/roots/list_changed")
        assert ack.status == 202
        req = await answer_one(get, s, {"roots": [{"uri": "file:///new"}]})
        assert req["method"] == "roots/list"
        await done.wait()
        assert seen == [["file:///new"]]


async def test_a_failing_hook_does_not_end_the_session(autojump_clock, mem):
    """A notification hook that raises is logged; the session goes on."""
    server = Server("bad-hook")

    @server.on_notification("notifications/roots/list_changed")
    async def broken(session: SessionContext, params: Any) -> None:
        raise RuntimeError("boom")

    ms = await mem(server)
    s = await ms.open_session({"roots": {"listChanged": True}})
    with trio.fail_after(10):
        await s.notify("notifications/roots/list_changed")
        await trio.sleep(0.1)
        assert await s.result("ping") == {}


async def test_sampling_content_must_be_text_image_or_audio(autojump_clock, mem):
    """Sampling messages carry text, image or audio: other content is refused in the
    handler, before anything is sent to the client."""
    from trio_mcp import EmbeddedResource

    server = Server("sampling-content")
    refused: list[Exception] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Samples with a resource in the message."""
        try:
            await ctx.sample([UserMessage(EmbeddedResource(uri="x://y", text="t"))], 1)
        except TypeError as exc:
            refused.append(exc)
        return "done"

    ms = await mem(server)
    s = await ms.open_session(ALL_CAPS)
    with trio.fail_after(10):
        answer, before = await s.call("tools/call", {"name": "ask"})
        assert before == [] and "result" in answer
        assert len(refused) == 1
