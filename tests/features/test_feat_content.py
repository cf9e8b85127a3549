"""Tool results from plain Python values: content blocks and structured content."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from feat_support import error_of

from trio_mcp import (
    Audio,
    EmbeddedResource,
    Image,
    ResourceLink,
    Server,
    Text,
    ToolResult,
)


@attrs.frozen
class Point:
    x: int
    y: int


def content_server() -> Server:
    server = Server("content-tests")

    @server.tool()
    async def text() -> str:
        """A str."""
        return "plain"

    @server.tool()
    async def image() -> Image:
        """An image from raw bytes."""
        return Image(b"\x89PNG", "image/png")

    @server.tool()
    async def audio() -> Audio:
        """Audio from base64 text."""
        return Audio("UklGRg==", "audio/wav")

    @server.tool()
    async def link() -> ResourceLink:
        """A resource link."""
        return ResourceLink(uri="test://r", name="r", description="d", mime_type="text/plain")

    @server.tool()
    async def embedded() -> list[EmbeddedResource]:
        """A text and a blob resource."""
        return [
            EmbeddedResource(uri="test://t", text="t", mime_type="text/plain"),
            EmbeddedResource(uri="test://b", blob=b"\x00\x01"),
        ]

    @server.tool()
    async def mixed() -> list[Text | Image]:
        """Several blocks."""
        return [Text("a"), Image(b"i", "image/gif")]

    @server.tool()
    async def nothing() -> None:
        """No content."""

    @server.tool()
    async def point() -> Point:
        """Structured output from an attrs class."""
        return Point(1, 2)

    @server.tool()
    async def number() -> int:
        """A number, wrapped as {"result": ...}."""
        return 42

    @server.tool()
    async def liar() -> int:
        """Breaks its own output schema."""
        bad: Any = "not a number"
        return bad  # type: ignore[no-any-return]

    @server.tool()
    async def explicit() -> ToolResult:
        """A result spelled out."""
        return ToolResult(content=[Text("partial")], structured={"ok": False}, is_error=True)

    return server


@pytest.mark.parametrize(
    ("tool", "content"),
    [
        ("text", [{"type": "text", "text": "plain"}]),
        ("image", [{"type": "image", "data": "iVBORw==", "mimeType": "image/png"}]),
        ("audio", [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]),
        (
            "link",
            [
                {
                    "type": "resource_link",
                    "uri": "test://r",
                    "name": "r",
                    "description": "d",
                    "mimeType": "text/plain",
                }
            ],
        ),
        (
            "embedded",
            [
                {
                    "type": "resource",
                    "resource": {"uri": "test://t", "mimeType": "text/plain", "text": "t"},
                },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "test://b", "mimeType": "application/octet-stream", "blob": "AAE="
                    },
                },
            ],
        ),
        (
            "mixed",
            [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "aQ==", "mimeType": "image/gif"},
            ],
        ),
        ("nothing", []),
    ],
)
async def test_plain_values_become_content_blocks(autojump_clock, connect, tool, content):
    """A tool may return a str, a content object, a list of them, or None: each becomes the
    matching content blocks (binary data base64-encoded), with no structured content."""
    s = await connect(content_server())
    with trio.fail_after(10):
        result = await s.request("tools/call", {"name": tool})
        assert result == {"content": content}


async def test_content_tools_have_no_output_schema(autojump_clock, connect):
    """Tools that return content blocks list no outputSchema; structured ones do."""
    s = await connect(content_server())
    with trio.fail_after(10):
        tools = {t["name"]: t for t in (await s.request("tools/list"))["tools"]}
        for name in ("text", "image", "audio", "link", "embedded", "mixed", "nothing"):
            assert "outputSchema" not in tools[name], name
        assert tools["point"]["outputSchema"]["properties"].keys() == {"x", "y"}


@pytest.mark.spec("U-TOOL-5", "U-TOOL-6", "TM-TOOL-WRAP")
@pytest.mark.parametrize(
    ("tool", "structured", "text"),
    [("point", {"x": 1, "y": 2}, '{"x": 1, "y": 2}'), ("number", {"result": 42}, "42")],
)
async def test_structured_results_also_come_as_json_text(
    autojump_clock, connect, tool, structured, text
):
    """A structured result conforms to the tool's outputSchema and is also sent as JSON in
    a text block, for clients that do not read structuredContent: an object as itself, a
    value that is no object (wrapped as {"result": ...} for structuredContent) as the
    value alone."""
    s = await connect(content_server())
    with trio.fail_after(10):
        result = await s.request("tools/call", {"name": tool})
        assert result["structuredContent"] == structured
        assert [{"type": "text", "text": text}] == result["content"]


@pytest.mark.spec("U-TOOL-6", "TM-TOOL-SCHEMA")
async def test_a_result_that_breaks_the_output_schema_is_an_error(autojump_clock, connect):
    """A tool whose value does not match its own outputSchema does not send it: the call
    fails with an internal error instead."""
    s = await connect(content_server())
    with trio.fail_after(10):
        error = await error_of(s, "tools/call", {"name": "liar"})
        assert error["code"] == -32603
        assert "outputSchema" in error["message"]


@pytest.mark.spec("U-TOOL-7")
async def test_an_explicit_tool_result(autojump_clock, connect):
    """ToolResult spells out content, structured content and isError."""
    s = await connect(content_server())
    with trio.fail_after(10):
        result = await s.request("tools/call", {"name": "explicit"})
        assert result == {
            "content": [{"type": "text", "text": "partial"}],
            "structuredContent": {"ok": False},
            "isError": True,
        }


@pytest.mark.spec("U-TOOL-4")
@pytest.mark.parametrize("name", ["", "x" * 129, "has space", "slash/name", "ünï"])
def test_tool_names_are_checked_at_registration(name):
    """Tool names are 1 to 128 characters of A-Z a-z 0-9 _ - . : another name is refused
    when the tool is registered, not when a client calls it."""
    server = Server("names")

    async def fn() -> str:
        """A tool."""
        return "x"

    with pytest.raises(ValueError, match="1-128 characters"):
        server.add_tool(fn, name=name)
    server.add_tool(fn, name="ok.name-1_" + "x" * 118)
    assert len(next(iter(server.tools))) == 128


def _named_tool() -> Any:
    async def fn() -> str:
        """A tool."""
        return "x"

    return fn


@pytest.mark.spec("U-TOOL-11")
@pytest.mark.parametrize("char", [*"!\"#$%&'()*+/:;<=>?@[\\]^`{|}~", "é", "\t", "\x00"])
def test_only_the_allowed_characters_make_a_tool_name(char):
    """A-Z a-z 0-9 _ - . make a tool name; any other character refuses it at registration."""
    server = Server("names")
    server.add_tool(_named_tool(), name="AZaz09_-.")
    for name in (f"{char}tool", f"to{char}ol", f"tool{char}"):
        with pytest.raises(ValueError, match="1-128 characters"):
            server.add_tool(_named_tool(), name=name)
    assert list(server.tools) == ["AZaz09_-."]


@pytest.mark.spec("U-TOOL-12")
@pytest.mark.parametrize("name", ["get user", "get,user", " getUser", "getUser ", "a, b"])
def test_a_tool_name_with_a_space_or_a_comma_is_refused(name):
    """A tool name with a space or a comma is refused at registration."""
    server = Server("names")
    with pytest.raises(ValueError, match="1-128 characters"):
        server.add_tool(_named_tool(), name=name)
    assert dict(server.tools) == {}


@pytest.mark.spec("U-TOOL-10")
async def test_tool_names_are_case_sensitive(autojump_clock, connect):
    """getUser and getuser are two tools; another spelling is an unknown tool (-32602)."""
    server = Server("case")

    async def upper() -> str:
        """Upper."""
        return "upper"

    async def lower() -> str:
        """Lower."""
        return "lower"

    server.add_tool(upper, name="getUser")
    server.add_tool(lower, name="getuser")
    s = await connect(server)
    with trio.fail_after(10):
        names = [t["name"] for t in (await s.request("tools/list"))["tools"]]
        assert sorted(names) == ["getUser", "getuser"]
        upper_result = await s.request("tools/call", {"name": "getUser"})
        lower_result = await s.request("tools/call", {"name": "getuser"})
        assert upper_result["content"] == [{"type": "text", "text": "upper"}]
        assert lower_result["content"] == [{"type": "text", "text": "lower"}]
        error = await error_of(s, "tools/call", {"name": "GETUSER"})
        assert error["code"] == -32602


@pytest.mark.spec("U-TOOL-13")
async def test_a_tool_name_is_listed_once(autojump_clock, connect):
    """A second tool under a taken name, registered with replace=True, replaces the first:
    the name is listed once."""
    server = Server("unique")

    async def first() -> str:
        """First."""
        return "first"

    async def second() -> str:
        """Second."""
        return "second"

    server.add_tool(first, name="tool")
    server.add_tool(second, name="tool", replace=True)
    s = await connect(server)
    with trio.fail_after(10):
        tools = (await s.request("tools/list"))["tools"]
        assert [t["name"] for t in tools] == ["tool"]
        assert tools[0]["description"] == "Second."
        result = await s.request("tools/call", {"name": "tool"})
        assert result["content"] == [{"type": "text", "text": "second"}]


@pytest.mark.spec("U-TASK-2")
@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
async def test_a_task_param_is_ignored_and_the_call_answered_normally(
    autojump_clock, mem, version
):
    """Without the tasks capability, a tools/call with a task param gets its plain result."""
    from feat_support import request

    ms = await mem(content_server())
    init = await ms.post(
        request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        ),
        version=None,
    )
    answer = await init.next_message()
    assert answer is not None and answer["result"]["protocolVersion"] == version
    assert "tasks" not in answer["result"]["capabilities"]
    sid = init.headers["mcp-session-id"]
    with trio.fail_after(10):
        call = request(
            "tools/call",
            {
                "name": "point",
                "arguments": {},
                "task": {"ttl": 60000},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t-1"}},
            },
        )
        ex = await ms.post(call, session_id=sid, version=version)
        assert ex.status == 200
        messages = await ex.messages()
        assert [m.get("id") for m in messages] == [call["id"]]
        result = messages[0]["result"]
        assert result["structuredContent"] == {"x": 1, "y": 2}
        assert "task" not in result
