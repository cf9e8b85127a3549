# The example of issue 40 (examples/bookshop.py), written as the official SDK's MCPServer and
# FastMCP users write servers, served unchanged and called by the SDK's own client (mcp
# 2.3.0) in both eras, on both HTTP servers.
from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio
from mcp import Client
from support.fixtures import StartServer

TIMEOUT = 20
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "bookshop.py"
SDK_EXAMPLE = EXAMPLES / "bookshop_sdk.py"


def load_example(path: Path = EXAMPLE) -> ModuleType:
    """A fresh copy of the example module (its server is served once per process)."""
    spec = importlib.util.spec_from_file_location(f"{path.stem}_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses and pydantic read their module's globals through sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.spec("TM-HAND-PYDANTIC", "TM-HAND-THREAD", "TM-HAND-LIFESPAN", "TM-HAND-DEPENDS",
                  "TM-HAND-MIDDLEWARE", "TM-HAND-PATH", "TM-HAND-TEMPLATE")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_client_uses_the_example_server_in_both_eras(
    live_server: StartServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK client lists the example's tools (pydantic's schema for Order), calls the
    pydantic-in, dataclass-out tool and the def tool, reads the template, and gets a tool
    error naming the field for a bad order; the middleware times every call."""
    live = await live_server(load_example().server)
    order = {"customer": "Ada", "lines": [{"isbn": "978-0", "quantity": 2},
                                          {"isbn": "978-1", "quantity": 1}]}
    with caplog.at_level(logging.INFO, logger="bookshop"), trio.fail_after(TIMEOUT):
        async with Client(live.url, mode=mode) as client:
            listed = await client.list_tools()
            priced = await client.call_tool("invoice", {"order": order})
            count = await client.call_tool("shelf_count", {})
            title = await client.read_resource("shelves://fiction/new/978-1")
            bad = await client.call_tool(
                "invoice", {"order": {**order, "lines": [{"isbn": "978-0", "quantity": 11}]}}
            )
    tools: dict[str, Any] = {t.name: t for t in listed.tools}
    assert "Order" in tools["invoice"].input_schema["$defs"]
    assert tools["invoice"].output_schema["properties"]["issued"] == {
        "type": "string", "format": "date"}
    assert {"customer": "Ada", "total": 72.5, "issued": "2026-07-28"} == (
        priced.structured_content
    )
    assert {"result": 2} == count.structured_content
    assert "Nurseries (fiction/new)" == title.contents[0].text  # type: ignore[union-attr]
    assert bad.is_error and "order.lines[0].quantity" in bad.content[0].text  # type: ignore[union-attr]
    assert 5 <= sum("took" in r.getMessage() for r in caplog.records if r.name == "bookshop")


@pytest.mark.spec("TM-HAND-COMPAT-SERVER", "TM-HAND-COMPAT-CONTEXT", "TM-HAND-COMPAT-DEPENDS",
                  "TM-HAND-COMPAT-MIDDLEWARE", "TM-HAND-LIFESPAN", "TM-HAND-TEMPLATE")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_client_uses_the_server_written_with_the_sdk_and_fastmcp_names(
    live_server: StartServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """examples/bookshop_sdk.py, written with MCPServer, Context and
    ctx.request_context.lifespan_context as the SDK's README does and Depends, CurrentContext
    and a Middleware class as FastMCP's docs do, is served unchanged but for its imports: the
    SDK client lists and calls its tools (pydantic in, dataclass out; a def tool with a
    dependency; a tool reading a resource through ctx.read_resource), reads its {+path}
    template, gets its prompt, and the middleware's on_call_tool times each call."""
    example = load_example(SDK_EXAMPLE)
    order = {"customer": "Ada", "lines": [{"isbn": "978-0", "quantity": 2},
                                          {"isbn": "978-1", "quantity": 1}]}
    live = await live_server(example.mcp)
    with caplog.at_level(logging.INFO, logger="bookshop"), trio.fail_after(TIMEOUT):
        async with Client(live.url, mode=mode) as client:
            listed = await client.list_tools()
            priced = await client.call_tool("invoice", {"order": order})
            count = await client.call_tool("shelf_count", {})
            blurb = await client.call_tool("blurb", {"shelf": "fiction", "isbn": "978-0"})
            title = await client.read_resource("shelves://fiction/new/978-1")
            prompt = await client.get_prompt("review", {"title": "Nurseries"})
            bad = await client.call_tool(
                "invoice", {"order": {**order, "lines": [{"isbn": "978-0", "quantity": 0}]}}
            )
    tools: dict[str, Any] = {t.name: t for t in listed.tools}
    assert {"invoice", "shelf_count", "blurb"} == set(tools)
    assert "Order" in tools["invoice"].input_schema["$defs"]
    assert {} == tools["shelf_count"].input_schema.get("properties", {})  # the dependency
    assert {"customer": "Ada", "total": 72.5, "issued": "2026-07-28"} == (
        priced.structured_content
    )
    assert {"result": 2} == count.structured_content
    assert blurb.content[0].text.startswith(  # type: ignore[union-attr]
        "Read Structured Concurrency (fiction), request ")
    assert "Nurseries (fiction/new)" == title.contents[0].text  # type: ignore[union-attr]
    assert "Nurseries" in prompt.messages[0].content.text  # type: ignore[union-attr]
    assert bad.is_error and "order.lines[0].quantity" in bad.content[0].text  # type: ignore[union-attr]
    timed = [r.getMessage() for r in caplog.records if r.name == "bookshop"]
    assert 4 == sum(" took " in m for m in timed), timed
