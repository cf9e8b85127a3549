"""One JSON-RPC request in either era, over loopback: the tests of a feature both eras share
(the handler API, spec/handlers.md) ask the same thing of a 2025-11-25 session and of a
2026-07-28 request, and compare the answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from support.client import open_session, rpc_messages
from support.modern import MODERN, messages_of, modern_request, post

__all__ = ["ERAS", "LEGACY", "rpc", "tool_call"]

LEGACY: Final = "2025-11-25"
#: The revisions a handler-API test runs in: the last legacy one and the modern one.
ERAS: Final = (LEGACY, MODERN)


async def rpc(
    url: str, era: str, method: str, params: Mapping[str, Any] | None = None,
    *, capabilities: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON-RPC response (result or error) to one request, in a new legacy session or as
    one modern request."""
    if era == LEGACY:
        session = await open_session(url, capabilities=capabilities)
        return await session.call(method, params)
    message = modern_request(method, params, capabilities=capabilities)
    response = await post(url, message)
    assert response.status == 200, (response.status, response.body[:300])
    answers = [m for m in messages_of(response) if m.get("id") == message["id"]]
    assert len(answers) == 1, rpc_messages(response)
    return answers[0]


async def tool_call(
    url: str, era: str, name: str, arguments: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The result of one tools/call (fails the test on a JSON-RPC error)."""
    answer = await rpc(url, era, "tools/call", {"name": name, "arguments": dict(arguments or {})})
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result
