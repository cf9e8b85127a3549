# Output is valid JSON (issue 20, item 4): a tool returning NaN or an infinity gets a tool
# error in both eras, and the response parses under JSON's own grammar (no NaN, no Infinity).
from __future__ import annotations

import json
import math
from typing import Any

import pytest
import trio
from support.client import open_session
from support.fixtures import StartServer
from support.modern import call_tool, messages_of, post

from trio_mcp import Server
from trio_mcp.protocol._jsonrpc import non_finite_at


def _strict(text: str) -> Any:
    """Parse as JSON proper: Python's reader accepts NaN and Infinity, JSON does not."""

    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def _server() -> Server:
    server = Server("non-finite")

    @server.tool()
    async def ratio(a: float, b: float) -> dict[str, float]:
        """Divides, the IEEE way."""
        return {"ratio": a / b if b else math.copysign(math.inf, a) if a else math.nan}

    return server


@pytest.mark.spec("TM-TOOL-FINITE")
@pytest.mark.parametrize(("a", "b"), [(1.0, 0.0), (0.0, 0.0), (-1.0, 0.0)])
async def test_a_non_finite_result_is_a_tool_error_in_both_eras(
    live_server: StartServer, a: float, b: float
) -> None:
    """A tool whose structured result holds NaN or an infinity answers with isError true,
    as strict JSON, to a legacy session and to a 2026-07-28 request; a finite result of
    the same tool goes through."""
    live = await live_server(_server())
    with trio.fail_after(20):
        session = await open_session(live.url)
        legacy = await session.post(
            {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
             "params": {"name": "ratio", "arguments": {"a": a, "b": b}}}
        )
        modern = await post(live.url, call_tool("ratio", {"a": a, "b": b}, id=8))
        fine = await session.result("tools/call", {"name": "ratio", "arguments": {"a": 1, "b": 4}})

    for response in (legacy, modern):
        assert 200 == response.status
        if response.content_type == "application/json":
            _strict(response.body.decode("utf-8"))
        else:
            for event in response.events():
                if event.data:
                    _strict(event.data)
        [answer] = [m for m in messages_of(response) if "id" in m]
        assert answer["result"]["isError"] is True, answer
        assert "NaN or an infinity" in answer["result"]["content"][0]["text"]
    assert {"ratio": 0.25} == fine["structuredContent"]


@pytest.mark.spec("TM-TOOL-FINITE")
def test_non_finite_at_names_where_the_number_is() -> None:
    """The check finds a NaN or an infinity at any depth, says where, and passes finite
    numbers, integers and booleans."""
    assert non_finite_at({"a": [1, 2.5, True, {"b": None}]}) is None
    assert "structuredContent.v[1]" == non_finite_at({"structuredContent": {"v": [0.0, math.inf]}})
    assert "" == non_finite_at(math.nan)
    assert "x" == non_finite_at({"x": -math.inf})
