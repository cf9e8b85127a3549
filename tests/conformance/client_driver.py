"""trio_mcp.Client as the official conformance suite's client under test:

    conformance client --command "python tests/conformance/client_driver.py"

The suite appends the scenario server's URL and names the scenario in
``MCP_CONFORMANCE_SCENARIO`` and the revision in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (a
dated version through 2025-11-25: a session; 2026-07-28: stateless). What a scenario
checks is what a client does with the server's tools, so the driver does what a careful
application would: it lists the tools (the client leaves out those whose ``x-mcp-header``
annotations are invalid) and calls each one, with arguments made from its schema,
answering elicitations with the schema's defaults, sampling with a fixed message and roots
with one root; a server that asks for authorization gets the OAuth flow (``OAuth``), with
no user: the client follows the authorization endpoint's redirect itself. The scenario's
context (``MCP_CONFORMANCE_CONTEXT``) may give a pre-registered client.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import trio

from trio_mcp import Client, ClientError
from trio_mcp.client import OAuth

#: The client id metadata document the suite's authorization servers take as this client's
#: id (SEP-991; they do not fetch it).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
SAMPLES: dict[str, Any] = {"string": "test", "integer": 1, "number": 1.5, "boolean": True}


def _value(schema: Mapping[str, Any]) -> Any:
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return _arguments(schema)
    if kind == "array":
        return []
    return SAMPLES.get(kind if isinstance(kind, str) else "string", "test")


def _arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for every property of an object schema (required or not)."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {name: _value(prop) for name, prop in properties.items()
            if isinstance(prop, Mapping) and "$ref" not in prop}


#: http-custom-headers: values that exercise each way a header carries a parameter.
ENCODING_CASES: dict[str, Any] = {
    "non_ascii_val": "Zürich 東京", "whitespace_val": "  padded  ",
    "leading_space_val": " leading", "trailing_space_val": "trailing ",
    "internal_space_val": "internal spaces here", "control_char_val": "bell\x07here",
    "crlf_val": "line\r\nbreak", "tab_val": "\ttabbed",
}


def _call_arguments(
    scenario: str, tool: Mapping[str, Any], tools: list[dict[str, Any]]
) -> dict[str, Any]:
    schema = tool.get("inputSchema")
    if not isinstance(schema, Mapping):
        return {}
    if tool.get("name") == "json_schema_echo":
        # json-schema-2020-12-preservation: echo another tool's schema as the client holds
        # it (every keyword kept: the client keeps a tool's JSON as it came).
        echoed = [t.get("inputSchema") for t in tools if t.get("name") != "json_schema_echo"]
        return {"schema": echoed[0] if echoed else {}}
    arguments = _arguments(schema)
    if scenario == "http-custom-headers":
        if str(tool.get("name")).endswith("_null"):
            # Only what is required: an absent argument has no header (MT-HDR-20).
            required = set(schema.get("required") or ())
            return {k: v for k, v in arguments.items() if k in required}
        arguments.update({k: v for k, v in ENCODING_CASES.items() if k in arguments})
    return arguments


async def on_elicit(params: Mapping[str, Any]) -> dict[str, Any]:
    schema = params.get("requestedSchema")
    content = _arguments(schema) if isinstance(schema, Mapping) else {}
    return {"action": "accept", "content": content}


async def on_sample(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "a sampled answer"},
            "model": "conformance-driver", "stopReason": "endTurn"}


async def main(url: str) -> None:
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "auto"
    mode = version if version != "2025-11-25" else "legacy"
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    oauth = OAuth(client_id=context.get("client_id"), client_secret=context.get("client_secret"),
                  client_metadata_url=context.get("client_metadata_url", CLIENT_METADATA_URL))
    async with Client(url, mode=mode, oauth=oauth, on_elicit=on_elicit, on_sample=on_sample,
                      roots=[{"uri": "file:///tmp/conformance", "name": "conformance"}],
                      on_log=lambda params: None) as client:
        tools = await client.list_tools()
        scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
        for tool in tools:
            arguments = _call_arguments(scenario, tool, tools)
            try:
                with trio.move_on_after(30):
                    await client.call_tool(tool["name"], arguments,
                                           on_progress=lambda p, t, m: None)
            except ClientError as error:
                print(f"{tool['name']}: {error}", file=sys.stderr)


if __name__ == "__main__":
    trio.run(main, sys.argv[-1])
