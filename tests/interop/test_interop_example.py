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
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bookshop.py"


def load_example() -> ModuleType:
    """A fresh copy of the example module (its server is served once per process)."""
    spec = importlib.util.spec_from_file_location("bookshop_example", EXAMPLE)
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
