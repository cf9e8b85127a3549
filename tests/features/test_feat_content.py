"""Tool results from plain Python values: content blocks and structured content."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

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
                {"type": "resource", "resource": {"uri": "test://b", "blob": "AAE="}},
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
async def test_plain_values_become_content_blocks(autojump_clock, mem, tool, content):
    """A tool may return a str, a content object, a list of them, or None: each becomes the
    matching content blocks (binary data base64-encoded), with no structured content."""
    ms = await mem(content_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        result = await s.result("tools/call", {"name": tool})
        assert result == {"content": content}


async def test_content_tools_have_no_output_schema(autojump_clock, mem):
    """Tools that return content blocks list no outputSchema; structured ones do."""
    ms = await mem(content_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        tools = {t["name"]: t for t in (await s.result("tools/list"))["tools"]}
        for name in ("text", "image", "audio", "link", "embedded", "mixed", "nothing"):
            assert "outputSchema" not in tools[name], name
        assert tools["point"]["outputSchema"]["properties"].keys() == {"x", "y"}


@pytest.mark.spec("U-TOOL-5", "U-TOOL-6")
@pytest.mark.parametrize(
    ("tool", "structured"),
    [("point", {"x": 1, "y": 2}), ("number", {"result": 42})],
)
async def test_structured_results_also_come_as_json_text(autojump_clock, mem, tool, structured):
    """A structured result conforms to the tool's outputSchema and is also sent as its
    serialized JSON in a text block, for clients that do not read structuredContent."""
    ms = await mem(content_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        result = await s.result("tools/call", {"name": tool})
        assert result["structuredContent"] == structured
        import json

        assert [json.loads(c["text"]) for c in result["content"]] == [structured]


@pytest.mark.spec("U-TOOL-6", "TM-TOOL-SCHEMA")
async def test_a_result_that_breaks_the_output_schema_is_an_error(autojump_clock, mem):
    """A tool whose value does not match its own outputSchema does not send it: the call
    fails with an internal error instead."""
    ms = await mem(content_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        error = await s.error("tools/call", {"name": "liar"})
        assert error["code"] == -32603
        assert "outputSchema" in error["message"]


@pytest.mark.spec("U-TOOL-7")
async def test_an_explicit_tool_result(autojump_clock, mem):
    """ToolResult spells out content, structured content and isError."""
    ms = await mem(content_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        result = await s.result("tools/call", {"name": "explicit"})
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
