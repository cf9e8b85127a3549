# MCP Apps through an independent client: the official MCP Python SDK (2.3.0, which has the
# extension's server side in core as mcp.server.apps) lists the demo's app tool, reads its page
# and sees the extension declared, in the legacy era (mode="legacy") and the modern one (its
# default mode, which discovers 2026-07-28).
from __future__ import annotations

from typing import Any

import pytest
import trio
from mcp import Client
from support.fixtures import StartServer

from trio_mcp._demo_page import DICE_PAGE
from trio_mcp.app._apps import APP_MIME_TYPE, APPS_EXTENSION

TIMEOUT = 10
DICE = "ui://trio-mcp-demo/dice.html"


def dumped(model: Any) -> dict[str, Any]:
    """A model of the SDK as its JSON, with the wire's names."""
    value: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


@pytest.mark.spec("UI-TOOL-META", "UI-RES-MIME", "UI-RES-META", "TM-APPS-DECLARE")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_sees_the_app_tool_and_reads_its_page(
    live_server: StartServer, mode: str
) -> None:
    """Through the SDK, roll_dice carries ``_meta.ui.resourceUri``, the page it names reads
    as ``text/html;profile=mcp-app`` with its ``_meta.ui``, and a modern client finds the
    extension under the server's ``capabilities.extensions``."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        async with Client(live.url, mode=mode) as client:
            version = client.protocol_version
            capabilities = dumped(client.server_capabilities)
            tools = {t.name: dumped(t) for t in (await client.list_tools()).tools}
            read = dumped(await client.read_resource(DICE))
            called = await client.call_tool("roll_dice", {"sides": 6, "count": 1})

    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert tools["roll_dice"]["_meta"]["ui"]["resourceUri"] == DICE
    [contents] = read["contents"]
    assert (contents["mimeType"], contents["text"]) == (APP_MIME_TYPE, DICE_PAGE)
    assert contents["_meta"] == {"ui": {"prefersBorder": True}}
    assert called.content[0].type == "text" and called.content[0].text.startswith("Rolled ")
    if mode == "auto":
        assert capabilities["extensions"][APPS_EXTENSION] == {}
