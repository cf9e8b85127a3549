"""The demo server exposes what the conformance suite's server scenarios require
(conformance.md §2), checked here strictly, through trio_mcp.Client(server) as a host with
sampling, elicitation and roots."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
import trio
from feat_support import Connect

from trio_mcp import Client
from trio_mcp.demo import PNG_1X1, server


class Host:
    """A host's answers to the demo's questions, and the questions it was asked."""

    def __init__(self, sampled: Mapping[str, Any] | None = None,
                 elicited: Mapping[str, Any] | None = None) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self._sampled = dict(sampled or {"role": "assistant", "model": "m",
                                         "content": {"type": "text", "text": "hi"}})
        self._elicited = dict(elicited or {"action": "accept", "content": {}})

    async def sample(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self.asked.append(("sampling/createMessage", dict(params)))
        return self._sampled

    async def elicit(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self.asked.append(("elicitation/create", dict(params)))
        return self._elicited


async def open_demo(connect: Connect, host: Host | None = None) -> Client:
    host = host or Host()
    return await connect(server, on_sample=host.sample, on_elicit=host.elicit, roots=[])


@pytest.mark.spec("U-TOOL-9")
async def test_capabilities(autojump_clock, connect):
    """The demo declares tools, resources (with subscribe), prompts, logging, completions:
    its tools return embedded resources, so it offers resources too."""
    s = await open_demo(connect)
    caps = s.server_capabilities
    assert caps.keys() >= {"tools", "resources", "prompts", "logging", "completions"}
    assert caps["resources"]["subscribe"] is True


async def test_every_tool_resource_and_prompt_is_described(autojump_clock, connect):
    """tools-list, resources-list, prompts-list: every tool has a description and an
    inputSchema, every resource a uri and a name, every prompt a description."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        tools = (await s.request("tools/list"))["tools"]
        assert all(t["description"] and t["inputSchema"]["type"] == "object" for t in tools)
        resources = (await s.request("resources/list"))["resources"]
        assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= {
            r["uri"] for r in resources
        }
        assert all(r["name"] for r in resources)
        prompts = (await s.request("prompts/list"))["prompts"]
        assert {p["name"] for p in prompts} >= {
            "test_simple_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image",
        }
        assert all(p["description"] for p in prompts)


async def test_resources(autojump_clock, connect):
    """resources-read-text, -read-binary, -templates-read, -subscribe, -unsubscribe."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        [text] = (await s.request("resources/read", {"uri": "test://static-text"}))["contents"]
        assert text["mimeType"] == "text/plain" and text["text"]
        [blob] = (await s.request("resources/read", {"uri": "test://static-binary"}))["contents"]
        assert blob["mimeType"] == "image/png"
        assert base64.b64decode(blob["blob"]) == PNG_1X1
        templates = (await s.request("resources/templates/list"))["resourceTemplates"]
        assert [t["uriTemplate"] for t in templates] == ["test://template/{id}/data"]
        [item] = (await s.request("resources/read", {"uri": "test://template/123/data"}))["contents"]
        assert "123" in item["text"]
        watched = {"uri": "test://watched-resource"}
        assert await s.request("resources/subscribe", watched) == {}
        assert await s.request("resources/unsubscribe", watched) == {}
        [example] = (await s.request("resources/read", {"uri": "test://example-resource"}))[
            "contents"
        ]
        assert example["text"]


async def test_watched_resource_updates(autojump_clock, connect):
    """The update_watched_resource tool changes the resource and notifies subscribers."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        await s.subscribe("test://watched-resource")
        async with s.listen(tools=False, prompts=False, resources=False) as changes:
            result = await s.call_tool("update_watched_resource", {"text": "v2"})
            assert "1 subscriber" in result["content"][0]["text"]
            note = await changes.__anext__()
        assert note.method == "notifications/resources/updated"
        assert note.params == {"uri": "test://watched-resource"}
        [c] = (await s.read_resource("test://watched-resource"))["contents"]
        assert c["text"] == "v2"


async def test_prompts(autojump_clock, connect):
    """prompts-get-simple, -with-args, -embedded-resource, -with-image."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        simple = await s.request("prompts/get", {"name": "test_simple_prompt"})
        assert simple["messages"] and all(
            "role" in m and "content" in m for m in simple["messages"]
        )
        args = {"arg1": "testValue1", "arg2": "testValue2"}
        with_args = await s.request(
            "prompts/get", {"name": "test_prompt_with_arguments", "arguments": args}
        )
        text = str(with_args["messages"])
        assert "testValue1" in text and "testValue2" in text
        embedded = await s.request(
            "prompts/get",
            {
                "name": "test_prompt_with_embedded_resource",
                "arguments": {"resourceUri": "test://example-resource"},
            },
        )
        [res] = [m["content"] for m in embedded["messages"] if m["content"]["type"] == "resource"]
        assert res["resource"]["uri"] == "test://example-resource"
        image = await s.request("prompts/get", {"name": "test_prompt_with_image"})
        [img] = [m["content"] for m in image["messages"] if m["content"]["type"] == "image"]
        assert img["mimeType"] == "image/png" and base64.b64decode(img["data"]) == PNG_1X1


async def test_completion(autojump_clock, connect):
    """completion-complete: arg1 of test_prompt_with_arguments completes to a list."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        params: dict[str, Any] = {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "test"},
        }
        result = await s.request("completion/complete", params)
        assert result["completion"]["values"] == ["test", "testing"]


async def test_json_schema_2020_12_tool(autojump_clock, connect):
    """json-schema-2020-12: the listed inputSchema keeps $schema, $defs.address and
    additionalProperties: false as written, and the tool runs."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        tools = {t["name"]: t for t in (await s.request("tools/list"))["tools"]}
        schema = tools["json_schema_2020_12_tool"]["inputSchema"]
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$defs"]["address"]["type"] == "object"
        assert schema["additionalProperties"] is False
        result = await s.request(
            "tools/call",
            {
                "name": "json_schema_2020_12_tool",
                "arguments": {
                    "name": "A",
                    "address": {"city": "B"},
                    "contactMethod": "email",
                    "email": "a@example.com",
                },
            },
        )
        assert result["content"][0]["text"] == "Hello A from B, at a@example.com"


CONTACT = "json_schema_2020_12_tool"

#: Arguments the tool's signature takes (every parameter is an optional str or dict) but its
#: hand-written schema forbids: only validation against the schema as written refuses them.
OFF_SCHEMA_CONTACTS = [
    # if contactMethod is "phone", then phone is required.
    ("then", {"contactMethod": "phone", "email": "a@example.com"}),
    # no contactMethod: else email is required.
    ("else", {"phone": "555-0100"}),
    # allOf/anyOf: a phone or an email, and there is neither.
    ("allOf", {"name": "A", "contactMethod": "email"}),
    # properties.contactMethod.enum.
    ("enum", {"contactMethod": "fax", "email": "a@example.com"}),
]


@pytest.mark.spec("TM-TOOL-INPUT", "U-TOOL-8")
@pytest.mark.parametrize(
    "arguments", [c[1] for c in OFF_SCHEMA_CONTACTS], ids=[c[0] for c in OFF_SCHEMA_CONTACTS]
)
async def test_json_schema_2020_12_tool_refuses_what_its_schema_forbids(
    autojump_clock, connect, arguments
):
    """Arguments its if/then/else, allOf or enum forbid get an isError result, not a run."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        result = await s.request("tools/call", {"name": CONTACT, "arguments": arguments})

    assert result["isError"] is True
    [block] = result["content"]
    assert block["type"] == "text"
    assert block["text"].startswith(f"Invalid arguments for tool {CONTACT}: ")
    # The tool's own greeting never comes: it did not run.
    assert "Hello" not in block["text"]


@pytest.mark.spec("TM-TOOL-INPUT")
@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({"contactMethod": "phone", "phone": "555-0100", "name": "Ada"},
         "Hello Ada from somewhere, at 555-0100"),
        ({"email": "ada@example.com", "address": {"city": "London"}},
         "Hello you from London, at ada@example.com"),
    ],
    ids=["then-branch", "else-branch"],
)
async def test_json_schema_2020_12_tool_runs_with_what_its_schema_allows(
    autojump_clock, connect, arguments, text
):
    """Arguments that meet the schema's branches as written run the tool."""
    s = await open_demo(connect)
    with trio.fail_after(10):
        result = await s.request("tools/call", {"name": CONTACT, "arguments": arguments})

    assert not result.get("isError")
    assert [{"type": "text", "text": text}] == result["content"]


async def elicited_schema(connect: Connect, tool: str) -> dict[str, Any]:
    host = Host()
    answer = await (await open_demo(connect, host)).call_tool(tool)
    assert "Elicitation completed: action=accept" in answer["content"][0]["text"]
    [(method, params)] = host.asked
    assert "elicitation/create" == method
    schema: dict[str, Any] = params["requestedSchema"]
    return schema


async def test_elicitation_sep1034_defaults(autojump_clock, connect):
    """elicitation-sep1034-defaults: each primitive field carries its default."""
    with trio.fail_after(10):
        props = (await elicited_schema(connect, "test_elicitation_sep1034_defaults"))["properties"]
        assert props["name"] == {**props["name"], "type": "string", "default": "John Doe"}
        assert props["age"] == {**props["age"], "type": "integer", "default": 30}
        assert props["score"] == {**props["score"], "type": "number", "default": 95.5}
        assert props["status"]["enum"] == ["active", "inactive", "pending"]
        assert props["status"]["default"] == "active"
        assert props["verified"] == {**props["verified"], "type": "boolean", "default": True}


async def test_elicitation_sep1330_enums(autojump_clock, connect):
    """elicitation-sep1330-enums: the five enum styles, each in its exact shape."""
    with trio.fail_after(10):
        props = (await elicited_schema(connect, "test_elicitation_sep1330_enums"))["properties"]
        assert props["untitledSingle"]["type"] == "string"
        assert "enum" in props["untitledSingle"]
        assert not {"oneOf", "enumNames"} & props["untitledSingle"].keys()
        assert props["titledSingle"]["type"] == "string" and "enum" not in props["titledSingle"]
        assert all({"const", "title"} <= o.keys() for o in props["titledSingle"]["oneOf"])
        legacy = props["legacyEnum"]
        assert legacy["type"] == "string" and len(legacy["enum"]) == len(legacy["enumNames"])
        multi = props["untitledMulti"]
        assert multi["type"] == "array" and multi["items"]["type"] == "string"
        assert "enum" in multi["items"] and "anyOf" not in multi["items"]
        titled = props["titledMulti"]
        assert titled["type"] == "array" and "enum" not in titled["items"]
        assert all({"const", "title"} <= o.keys() for o in titled["items"]["anyOf"])


@pytest.mark.parametrize(
    ("tool", "arguments", "method", "answer", "expected"),
    [
        (
            "test_sampling",
            {"prompt": "Say hi"},
            "sampling/createMessage",
            {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
            "LLM response: hi",
        ),
        (
            "test_elicitation",
            {"message": "Who?"},
            "elicitation/create",
            {"action": "accept", "content": {"username": "u", "email": "e@x.y"}},
            "User response: action=accept",
        ),
    ],
)
async def test_sampling_and_elicitation_tools(
    autojump_clock, connect, tool, arguments, method, answer, expected
):
    """tools-call-sampling and tools-call-elicitation: the request goes out while the call
    runs and the client's answer shapes the tool's result."""
    host = Host(**{"sampled" if method.startswith("sampling") else "elicited": answer})
    s = await open_demo(connect, host)
    with trio.fail_after(10):
        result = await s.call_tool(tool, arguments)
    assert [method] == [asked for asked, _ in host.asked]
    assert result["content"][0]["text"].startswith(expected)
