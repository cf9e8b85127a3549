"""One JSON Schema validator for every schema a tool has (TM-RPC-SCHEMA): compiled once, not
on every call; worded with the path to the value at fault and never with a long value; and a
value nested deeper than the schema can follow is a tool error, not a server failure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import jsonschema
import pytest
import trio
from feat_support import Connect

from trio_mcp import Server


@attrs.frozen
class Node:
    """A tree: a recursive type, so its schema refers to itself."""

    value: int
    children: list[Node] = attrs.field(factory=list)


def schema_server() -> Server:
    server = Server("schemas")

    @server.tool()
    async def count(n: int, label: str = "") -> str:
        """Count to n."""
        return f"{label}{n}"

    @server.tool(input_schema={
        "type": "object",
        "properties": {"size": {"type": "integer", "minimum": 0},
                       "colour": {"enum": ["red", "green"]}},
        "required": ["size"],
    })
    async def paint(size: int, colour: str = "red") -> str:
        """Paint."""
        return f"{colour} {size}"

    @server.tool()
    async def depth(tree: Node) -> int:
        """How deep a tree is."""
        deepest, level = 0, [tree]
        while level:
            deepest += 1
            level = [c for node in level for c in node.children]
        return deepest

    return server


def nested(levels: int) -> dict[str, Any]:
    tree: dict[str, Any] = {"value": 0}
    for value in range(1, levels):
        tree = {"value": value, "children": [tree]}
    return tree


@pytest.mark.spec("TM-RPC-SCHEMA", "U-TOOL-8")
@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("count", {"n": "x" * 1_000_000}, "invalid argument 'n': expected integer, got string"),
        ("paint", {"size": "x" * 1_000_000}, "$.size: expected integer, got string"),
        ("paint", {"size": 1, "colour": "y" * 1_000_000}, 'must be one of ["red", "green"]'),
    ],
)
async def test_a_megabyte_argument_of_the_wrong_kind_is_answered_in_a_line(
    connect: Connect, tool: str, arguments: dict[str, Any], said: str
) -> None:
    """The tool error names where the value is and what was expected, and shows at most a
    few dozen characters of it: a client cannot make the server echo its megabyte back."""
    client = await connect(schema_server())
    with trio.fail_after(30):
        result = await client.call_tool(tool, arguments)

    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert said in text
    assert len(text) < 400


@pytest.mark.spec("TM-RPC-SCHEMA")
async def test_a_tool_schema_is_checked_and_compiled_once_not_on_every_call(
    connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation runs on every call, so its schema is checked against its dialect's
    metaschema (the costly part) on the first call only."""
    checked: list[object] = []
    original = jsonschema.Draft202012Validator.check_schema.__func__  # type: ignore[attr-defined]

    def counting(cls: type, schema: Mapping[str, Any], *args: Any, **kwargs: Any) -> None:
        checked.append(schema.get("properties"))
        original(cls, schema, *args, **kwargs)

    monkeypatch.setattr(
        jsonschema.Draft202012Validator, "check_schema", classmethod(counting)
    )
    client = await connect(schema_server())
    with trio.fail_after(30):
        for n in range(5):
            assert not (await client.call_tool("paint", {"size": n})).get("isError")
            assert not (await client.call_tool("count", {"n": n})).get("isError")

    # Three schemas: paint's as written and the one derived from its signature, which
    # converts the arguments after (TM-TOOL-INPUT), and count's derived one.
    assert 3 == len(checked)


@pytest.mark.spec("TM-RPC-SCHEMA")
async def test_a_tree_nested_deeper_than_the_schema_can_follow_is_a_tool_error(
    connect: Connect,
) -> None:
    """A recursive schema is followed as deep as the stack allows: a deeper value is refused
    with a tool error saying so, and the server answers the next call as before."""
    client = await connect(schema_server())
    with trio.fail_after(30):
        shallow = await client.call_tool("depth", {"tree": nested(20)})
        deep = await client.call_tool("depth", {"tree": nested(300)})
        after = await client.call_tool("depth", {"tree": nested(3)})

    assert "20" == shallow["content"][0]["text"]
    assert deep["isError"] is True
    assert "nested too deeply" in deep["content"][0]["text"]
    assert "3" == after["content"][0]["text"]
