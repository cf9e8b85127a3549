"""The method table walked against a running server (in memory): every request a client may
send is answered by a handler in each era its row names, and is Method not found in the
others. A row added without its handler, or a handler without its row, fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from feat_support import MemoryServer, request
from support.modern import modern_headers, modern_request

from trio_mcp import Server, ServerConfig
from trio_mcp.protocol._methods import CORE_METHODS, METHODS, Kind, Sender
from trio_mcp.protocol._versions import Era

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}

#: Params that reach each method's handler; a row not listed gets its target field only.
PARAMS: dict[str, dict[str, Any]] = {
    "tools/call": {"name": "echo", "arguments": {"text": "x"}},
    "prompts/get": {"name": "greet", "arguments": {"who": "x"}},
    "resources/read": {"uri": "mem://a"},
    "resources/subscribe": {"uri": "mem://a"},
    "resources/unsubscribe": {"uri": "mem://a"},
    "logging/setLevel": {"level": "info"},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": ""},
    },
    # Refused by its handler (-32602) rather than opening a stream that stays open.
    "subscriptions/listen": {},
}

#: The core's requests: an extension's rows (registered when a test module imports the demo)
#: are served only where installed (tests/features/test_feat_extensions.py).
RECEIVED = sorted(n for n, m in METHODS.items() if m.kind is Kind.REQUEST and m.sent_by.client
                  and n in CORE_METHODS)


def every_primitive() -> Server:
    """A server that serves a method of every row: a tool that may run as a task, a
    resource and a template, a prompt (and so completion)."""
    server = Server("walk")

    @server.tool(task="optional")
    async def echo(text: str) -> str:
        """Echo."""
        return text

    @server.resource("mem://a")
    async def a() -> str:
        """A."""
        return "a"

    @server.resource("mem://{name}")
    async def by_name(name: str) -> str:
        """By name."""
        return name

    @server.prompt()
    async def greet(who: str) -> str:
        """Greet."""
        return f"hello {who}"

    return server


def params_of(name: str) -> dict[str, Any]:
    target = METHODS[name].target
    return PARAMS.get(name, {target: "no-such-thing"} if target else {})


def not_found(status: int, answer: dict[str, Any] | None) -> bool:
    return status == 404 or (
        answer is not None and answer.get("error", {}).get("code") == -32601
    )


@pytest.mark.spec("MT-HDR-4", "TM-ERA-REMOVED", "L-CAP-1")
@pytest.mark.parametrize("name", RECEIVED)
async def test_a_request_is_served_in_the_eras_of_its_row_and_not_found_in_the_others(
    mem: Any, name: str
) -> None:
    """In each era, a request of every row is answered by its handler (a result, or an
    error other than -32601) where its row lists the era, and gets Method not found where
    it does not."""
    served: MemoryServer = await mem(every_primitive(), ServerConfig())
    spec = METHODS[name]

    session = await served.open_session()
    message = request(name, params_of(name))
    legacy = await session.post(message)
    replies = await legacy.messages()
    # (a second initialize is answered by the lifecycle: 400, -32600; L-INIT-1)
    legacy_answer = next((m for m in replies if m.get("id") == message["id"]), None)
    assert not_found(legacy.status, legacy_answer) is (Era.LEGACY not in spec.eras), (
        legacy.status, legacy_answer,
    )

    modern = modern_request(name, params_of(name), capabilities=TASKS)
    exchange = await served.request("POST", modern_headers(modern), json.dumps(modern).encode())
    modern_answer = await exchange.next_message()
    assert not_found(exchange.status, modern_answer) is (Era.MODERN not in spec.eras), (
        exchange.status, modern_answer,
    )


def test_the_walk_covers_every_request_a_client_may_send() -> None:
    """Nothing a client may ask is left out of the walk: the requests either side sends
    (ping) are in it, the server's own requests are not."""
    assert "ping" in RECEIVED and "initialize" in RECEIVED
    assert not {n for n in RECEIVED if METHODS[n].sent_by is Sender.SERVER}
    assert set(PARAMS) <= set(RECEIVED)
