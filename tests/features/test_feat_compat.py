# trio_mcp.compat (issue 40, spec/handlers.md TM-HAND-COMPAT-SERVER on): the official Python SDK's
# MCPServer and FastMCP's names over trio-mcp's Server, over loopback in both eras: the
# Context view, Depends as a default, FastMCP's middleware hooks and the SDK's middleware
# functions, run()'s settings, and the refusals of what trio-mcp cannot honour.

# No `from __future__ import annotations`: the handlers here are local functions, whose
# annotations string annotations could not name.

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pydantic
import pytest
import trio
from support.eras import ERAS, rpc, tool_call
from support.fixtures import StartServer

from trio_mcp import ElicitationResult, ResponseMode
from trio_mcp.app._compat import _transport_config
from trio_mcp.compat import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    CurrentContext,
    DeclinedElicitation,
    Depends,
    FastMCP,
    MCPServer,
    Middleware,
    MiddlewareContext,
    Unsupported,
)

TIMEOUT = 20


def context_server(seen: list[Any]) -> MCPServer:
    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        seen.append(("lifespan of", type(server).__name__))
        yield {"greeting": "hello"}

    mcp = MCPServer(lifespan=lifespan)

    async def greeting(ctx: Context = CurrentContext()) -> str:
        value: str = ctx.lifespan_context["greeting"]
        return value

    async def shout(text: str = Depends(greeting)) -> str:
        return text.upper()

    @mcp.tool()
    async def inspect(ctx: Context[Any, Any], loud: str = Depends(shout)) -> dict[str, Any]:
        """What the SDK's Context says."""
        await ctx.info("inspecting")
        [text] = await ctx.read_resource("notes://text")
        [blob] = await ctx.read_resource("notes://blob")
        return {
            "lifespan": ctx.request_context.lifespan_context["greeting"],
            "loud": loud,
            "request_id": isinstance(ctx.request_id, str),
            "method": ctx.request_context.method,
            "text": [text.content, text.mime_type],
            "blob": list(blob.content) if isinstance(blob.content, bytes) else None,
            "headers": ctx.headers,
            "client_id": ctx.client_id,
        }

    @mcp.resource("notes://text", mime_type="text/plain")
    def text() -> str:
        return "some text"

    @mcp.resource("notes://blob", mime_type="application/octet-stream")
    def blob() -> bytes:
        return b"\x00\x01\x02"

    return mcp


@pytest.mark.spec("TM-HAND-COMPAT-SERVER", "TM-HAND-COMPAT-CONTEXT", "TM-HAND-COMPAT-DEPENDS")
@pytest.mark.parametrize("era", ERAS)
async def test_the_sdk_context_is_a_view_of_the_request_in_both_eras(
    live_server: StartServer, era: str
) -> None:
    """A tool annotated Context[...] gets the lifespan's value under the SDK's and FastMCP's
    names, reads resources (text and bytes) through ctx.read_resource, and a Depends given as
    a default (and a CurrentContext() inside it) is resolved and kept out of the schema; the
    lifespan receives the MCPServer, and an unnamed server is mcp-server."""
    seen: list[Any] = []
    mcp = context_server(seen)
    live = await live_server(mcp)
    with trio.fail_after(TIMEOUT):
        listed = await rpc(live.url, era, "tools/list")
        result = await tool_call(live.url, era, "inspect")
    [tool] = listed["result"]["tools"]
    assert {} == tool["inputSchema"].get("properties", {})
    assert {
        "lifespan": "hello", "loud": "HELLO", "request_id": True, "method": "tools/call",
        "text": ["some text", "text/plain"], "blob": [0, 1, 2], "headers": None,
        "client_id": None,
    } == result["structuredContent"]
    assert [("lifespan of", "MCPServer")] == seen
    assert "mcp-server" == mcp.name and FastMCP is MCPServer


def middleware_server(log: list[str]) -> MCPServer:
    class Outer(Middleware):
        async def on_message(self, context: MiddlewareContext, call_next: Any) -> Any:
            log.append(f"message {context.method}")
            return await call_next(context)

        async def on_request(self, context: MiddlewareContext, call_next: Any) -> Any:
            log.append("request")
            return await call_next(context)

        async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
            log.append(f"call_tool {context.message.name} {context.message.arguments}")
            assert isinstance(context.fastmcp_context, Context)
            if context.message.name == "rewrite":
                return await call_next(context.copy(message={"name": "echo"}))
            result = await call_next(context)
            log.append("call_tool out")
            return result

        async def on_list_tools(self, context: MiddlewareContext, call_next: Any) -> Any:
            log.append("list_tools")
            return await call_next(context)

    async def sdk_style(ctx: Any, call_next: Any) -> Any:
        log.append(f"sdk {ctx.method} {ctx.lifespan_context}")
        return await call_next(ctx)

    class Inner(Middleware):
        async def on_call_tool(self, context: MiddlewareContext, call_next: Any) -> Any:
            log.append("inner")
            return await call_next(context)

    mcp = FastMCP("mw", middleware=[Outer(), sdk_style])
    mcp.add_middleware(Inner())

    @mcp.tool
    def echo(text: str) -> str:
        """Echo (FastMCP's bare decorator)."""
        log.append("handler")
        return text

    @mcp.tool()
    async def rewrite() -> str:
        """Never runs: its middleware passes call_next a request of its own."""
        return "never"

    @mcp.prompt()
    def greet(name: str) -> str:
        """A prompt, so that completion/complete is served."""
        return f"Hello {name}"

    return mcp


@pytest.mark.spec("TM-HAND-COMPAT-MIDDLEWARE", "TM-HAND-COMPAT-REFUSE")
@pytest.mark.parametrize("era", ERAS)
async def test_fastmcp_middleware_hooks_and_sdk_middleware_wrap_requests_in_order(
    live_server: StartServer, era: str
) -> None:
    """A FastMCP Middleware passes on_message, on_request, then the method's hook, reading
    context.message by attribute; an SDK (ctx, call_next) function sees the request and the
    lifespan; the first given is the outermost, add_middleware's innermost; a middleware
    passing call_next a rewritten request gets an internal error, and the tool never runs."""
    log: list[str] = []
    live = await live_server(middleware_server(log))
    with trio.fail_after(TIMEOUT):
        result = await tool_call(live.url, era, "echo", {"text": "hi"})
        after_call = list(log)
        log.clear()
        await rpc(live.url, era, "tools/list")
        after_list = list(log)
        log.clear()
        refused = await rpc(live.url, era, "tools/call", {"name": "rewrite", "arguments": {}})
        log.clear()
        completed = await rpc(live.url, era, "completion/complete", {
            "ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "name", "value": "A"}})
        after_complete = list(log)
    assert "hi" == result["content"][0]["text"]
    # FastMCP has no hook for completion/complete: it passes on_message and on_request.
    assert "result" in completed, completed
    assert ["message completion/complete", "request", "sdk completion/complete None"] == (
        after_complete)
    assert [
        "message tools/call", "request", "call_tool echo {'text': 'hi'}",
        "sdk tools/call None", "inner", "handler", "call_tool out",
    ] == after_call
    assert ["message tools/list", "request", "list_tools", "sdk tools/list None"] == after_list
    assert -32603 == refused["error"]["code"], refused
    assert "never" not in str(refused)


class Answer(pydantic.BaseModel):
    name: str
    age: int


class FakeContext:
    """Stands for trio-mcp's Context: answers an elicitation as told."""

    def __init__(self, answer: ElicitationResult) -> None:
        self.answer = answer
        self.asked: list[tuple[str, Mapping[str, Any]]] = []

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> ElicitationResult:
        self.asked.append((message, schema))
        return self.answer


@pytest.mark.spec("TM-HAND-COMPAT-CONTEXT")
async def test_elicit_asks_with_the_models_schema_and_validates_the_answer() -> None:
    """ctx.elicit(message, Model) asks with the model's JSON Schema; an accepted answer is
    the model's instance, a decline and a cancel are their own results."""
    fake = FakeContext(ElicitationResult(action="accept", content={"name": "Ada", "age": 36}))
    accepted = await Context(fake).elicit("Who?", Answer)  # type: ignore[arg-type]
    assert AcceptedElicitation(data=Answer(name="Ada", age=36)) == accepted
    assert [("Who?", Answer.model_json_schema())] == fake.asked
    declined = await Context(FakeContext(ElicitationResult(action="decline"))).elicit(  # type: ignore[arg-type]
        "Who?", response_type=Answer)
    assert DeclinedElicitation() == declined
    cancelled = await Context(FakeContext(ElicitationResult(action="cancel"))).elicit(  # type: ignore[arg-type]
        "Who?", Answer)
    assert CancelledElicitation() == cancelled


@pytest.mark.spec("TM-HAND-COMPAT-REFUSE")
async def test_what_cannot_be_honoured_is_refused_at_once_naming_the_alternative() -> None:
    """Each feature of the SDK or FastMCP without a counterpart raises Unsupported when the
    server is built or the call made, and the message says what to use."""
    with pytest.raises(Unsupported, match=r"\['auth', 'event_store'\].*ServerConfig\(auth="):
        MCPServer("x", auth=object(), event_store=object())
    with pytest.raises(Unsupported, match="description"):
        MCPServer("x", description="a server")
    mcp = MCPServer("x")
    with pytest.raises(Unsupported, match="screen_paths=False"):
        mcp.resource("files://{+path}", security=object())
    with pytest.raises(Unsupported, match=r'@server.route\("/health"'):
        mcp.custom_route("/health", methods=["GET"])
    with pytest.raises(Unsupported, match=r"@server.complete\(\)"):
        mcp.completion()
    with pytest.raises(Unsupported, match="streamable_http_app"):
        mcp.sse_app()
    with pytest.raises(Unsupported, match="streamable-http"):
        mcp.run("sse")
    with pytest.raises(Unsupported, match=r"event_store.*ServerConfig"):
        mcp.streamable_http_app(event_store=object())
    ctx = Context(None)  # type: ignore[arg-type]
    with pytest.raises(Unsupported, match=r"ctx.sample.*ctx.trio.sample"):
        ctx.sample  # noqa: B018
    with pytest.raises(Unsupported, match="notify_resource_updated"):
        ctx.notify_resource_updated  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        ctx.nonesuch  # noqa: B018
    with pytest.raises(Unsupported, match=r"ctx\.trio\.elicit"):
        await ctx.elicit("Pick one", dict)


@pytest.mark.spec("TM-HAND-COMPAT-RUN")
def test_run_options_map_onto_the_server_config() -> None:
    """run("streamable-http")'s options are ServerConfig's: the path, JSON responses, the body
    limit; stateless_http changes nothing; an option with no counterpart is refused."""
    config = _transport_config("/api/mcp", {
        "json_response": True, "stateless_http": True, "max_request_body_size": 65536,
    })
    assert ("/api/mcp", ResponseMode.JSON, 65536) == (
        config.path, config.response_mode, config.max_body_bytes)
    assert ResponseMode.SSE == _transport_config("/mcp", {"stateless_http": False}).response_mode
    with pytest.raises(Unsupported, match="session_idle_timeout"):
        _transport_config("/mcp", {"session_idle_timeout": 60})
    app = MCPServer("x").streamable_http_app(json_response=True)
    assert callable(app)
