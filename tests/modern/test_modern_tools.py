# Tools in the 2026-07-28 era, end to end over loopback: tools/list is the same whoever asks
# and whatever came before it on the connection; arguments are validated before a tool runs;
# and only the parameters an application names are mirrored into Mcp-Param headers.
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import h11
import pytest
import trio
from support.client import open_session
from support.fixtures import StartServer
from support.modern import call_tool, modern_headers, modern_request, post

from trio_mcp import Server
from trio_mcp.demo import server as demo

TIMEOUT = 10

ALL_CAPS = {"sampling": {"tools": {}}, "elicitation": {}, "roots": {"listChanged": True}}


async def on_one_connection(url: str, messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """POST each message in turn on one kept-alive HTTP/1.1 connection; the JSON answers."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    conn = h11.Connection(h11.CLIENT)
    answers = []
    async with await trio.open_tcp_stream(host, port) as sock:
        for message in messages:
            body = json.dumps(message).encode()
            headers = [("host", f"{host}:{port}"), ("content-length", str(len(body)))]
            headers += modern_headers(message)
            data = conn.send(h11.Request(method="POST", target=parts.path, headers=headers))
            data += conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
            await sock.send_all(data)
            status, chunks = 0, []
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await sock.receive_some(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
            assert 200 == status, b"".join(chunks)
            answers.append(json.loads(b"".join(chunks)))
            conn.start_next_cycle()
    return answers


# -- tools/list --------------------------------------------------------------------------------


@pytest.mark.spec("MU-TOOL-2", "ML-STATE-1")
async def test_tools_list_is_the_same_whoever_asks_on_whatever_connection(
    live_server: StartServer,
) -> None:
    """Other clients, connections, capabilities and earlier requests change no tools/list."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        listing = modern_request("tools/list", id="list")
        fresh = await post(live.url, listing)
        declared_everything = await post(
            live.url, modern_request("tools/list", id="list", capabilities=ALL_CAPS,
                                     log_level="debug")
        )
        # One connection, the list asked before and after calls that succeed, fail, are
        # refused for a missing capability or ask for input.
        kept_alive = await on_one_connection(
            live.url,
            [
                listing,
                call_tool("echo", {"text": "hi"}, id="c1"),
                call_tool("no_such_tool", id="c2"),
                call_tool("test_streaming_elicitation", id="c3",
                          capabilities={"elicitation": {}}),
                modern_request("resources/read", {"uri": "test://static-text"}, id="c4"),
                listing,
            ],
        )
        refused = await post(live.url, call_tool("test_missing_capability", id="c5"))
        after_a_refusal = await post(live.url, listing)
        session = await open_session(live.url)
        legacy = await session.result("tools/list")

    assert 400 == refused.status
    first = fresh.json()
    assert "list" == first["id"]
    assert first == declared_everything.json() == after_a_refusal.json()
    assert first == kept_alive[0] == kept_alive[-1]
    # A legacy session of the same server is told the same tools.
    assert first["result"]["tools"] == legacy["tools"]
    assert {"echo", "test_missing_capability"} <= {t["name"] for t in legacy["tools"]}


# -- validating what a tool is given -------------------------------------------------------------


CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
    "required": ["code"],
    "additionalProperties": False,
}


def _recording_server(ran: list[tuple[str, Any]]) -> Server:
    server = Server("validation-tests")

    @server.tool()
    async def repeat(word: str, times: int) -> str:
        """Say a word several times.

        Args:
            word: what to say.
            times: how often.
        """
        ran.append(("repeat", (word, times)))
        return " ".join([word] * times)

    @server.tool(input_schema=CODE_SCHEMA)
    async def lookup(code: str) -> str:
        """Look up a three-letter code (its schema is written by hand)."""
        ran.append(("lookup", code))
        return f"found {code}"

    return server


INVALID_CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("wrong type", "repeat", {"word": "hi", "times": "3"}),
    ("missing", "repeat", {"word": "hi"}),
    ("unexpected", "repeat", {"word": "hi", "times": 2, "loud": True}),
    ("pattern", "lookup", {"code": "abc"}),
    ("additionalProperties", "lookup", {"code": "ABC", "region": "eu"}),
    ("required", "lookup", {}),
]


@pytest.mark.spec("MU-TOOL-6", "U-TOOL-8", "TM-TOOL-INPUT", "U-TOOL-7")
async def test_arguments_are_validated_before_the_tool_runs(live_server: StartServer) -> None:
    """Arguments off the signature or the hand-written schema: isError, and no run."""
    ran: list[tuple[str, Any]] = []
    with trio.fail_after(TIMEOUT):
        live = await live_server(_recording_server(ran))
        refused = [
            await post(live.url, call_tool(tool, arguments, id=label))
            for label, tool, arguments in INVALID_CALLS
        ]
        ran_before_valid_calls = list(ran)
        good_repeat = await post(live.url, call_tool("repeat", {"word": "hi", "times": 2}))
        good_lookup = await post(live.url, call_tool("lookup", {"code": "ABC"}))

    for (label, tool, _), response in zip(INVALID_CALLS, refused, strict=True):
        assert 200 == response.status, label
        result = response.json()["result"]
        assert "complete" == result["resultType"]
        assert result["isError"] is True, label
        assert result["content"][0]["text"].startswith(f"Invalid arguments for tool {tool}: ")
    assert [] == ran_before_valid_calls
    assert [{"type": "text", "text": "hi hi"}] == good_repeat.json()["result"]["content"]
    assert [{"type": "text", "text": "found ABC"}] == good_lookup.json()["result"]["content"]
    assert [("repeat", ("hi", 2)), ("lookup", "ABC")] == ran


# -- x-mcp-header: only what the application names ------------------------------------------------


def _deploy_server() -> Server:
    server = Server("mirror-tests")

    @server.tool(headers={"region": "Region"})
    async def deploy(region: str, api_key: str) -> str:
        """Deploy to a region.

        Args:
            region: where to deploy (mirrored into Mcp-Param-Region for routing).
            api_key: the caller's key: never mirrored.
        """
        return f"deployed to {region}"

    return server


def mirrored_paths(schema: Mapping[str, Any], path: str = "") -> dict[str, str]:
    """Every property path of ``schema`` that carries x-mcp-header, and its header name."""
    found: dict[str, str] = {}
    for name, prop in (schema.get("properties") or {}).items():
        where = f"{path}{name}"
        if "x-mcp-header" in prop:
            found[where] = prop["x-mcp-header"]
        found.update(mirrored_paths(prop, f"{where}."))
    return found


@pytest.mark.spec("MT-HDR-9", "MT-HDR-7")
async def test_only_the_parameters_the_application_names_are_mirrored(
    live_server: StartServer,
) -> None:
    """x-mcp-header marks the named parameter only; the key is never asked for in a header."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(_deploy_server())
        listed = await post(live.url, modern_request("tools/list"))
        arguments = {"region": "eu-west", "api_key": "sk-secret"}
        call = await post(
            live.url,
            call_tool("deploy", arguments, id="d-1"),
            extra=[("mcp-param-region", "eu-west")],
        )

    [tool] = listed.json()["result"]["tools"]
    assert {"region": "Region"} == mirrored_paths(tool["inputSchema"])
    # Without any header for api_key, the call passes header validation and runs.
    assert 200 == call.status, call.body
    assert [{"type": "text", "text": "deployed to eu-west"}] == call.json()["result"]["content"]


@pytest.mark.spec("MT-HDR-9")
def test_the_demo_mirrors_no_secret_and_registration_says_never_to() -> None:
    """The demo mirrors only a routing region; Server.tool documents never naming a secret."""
    mirrored = {name: dict(tool.mirrored) for name, tool in demo.tools.items() if tool.mirrored}
    schemas = {name: mirrored_paths(tool.to_dict()["inputSchema"])
               for name, tool in demo.tools.items()}

    assert {"test_header_params": {"region": ("region",)}} == mirrored
    assert {"test_header_params": {"region": "Region"}} == {k: v for k, v in schemas.items() if v}
    doc = " ".join((Server.tool.__doc__ or "").split())
    assert "never a secret" in doc and "MT-HDR-9" in doc
