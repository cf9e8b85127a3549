"""Registration as FastMCP users write it (issue 37): the decorators with and without
parentheses, and a second registration under a name already taken, which is refused unless
asked to replace."""

from __future__ import annotations

import pytest
import trio

from trio_mcp import Server


async def test_bare_tool_and_prompt_decorators_register_the_function(autojump_clock, connect):
    """`@server.tool` and `@server.prompt` without parentheses register the function as the
    forms with parentheses do, and hand it back unchanged: listed and callable."""
    server = Server("bare")

    async def plain(text: str) -> str:
        """Echo."""
        return text

    registered = server.tool(plain)

    @server.prompt
    async def ask(topic: str) -> str:
        """Ask about a topic."""
        return f"Tell me about {topic}"

    s = await connect(server)
    with trio.fail_after(10):
        tools = await s.request("tools/list")
        called = await s.request("tools/call", {"name": "plain", "arguments": {"text": "hi"}})
        prompts = await s.request("prompts/list")
        got = await s.request("prompts/get", {"name": "ask", "arguments": {"topic": "trio"}})

    assert registered is plain
    assert ["plain"] == [t["name"] for t in tools["tools"]]
    assert "Echo." == tools["tools"][0]["description"]
    assert "hi" == called["content"][0]["text"]
    assert ["ask"] == [p["name"] for p in prompts["prompts"]]
    assert "Tell me about trio" == got["messages"][0]["content"]["text"]


def test_bare_resource_decorator_is_refused_naming_the_uri_it_needs():
    """`@server.resource` has no URI to register under: it is refused at once with a
    TypeError that shows the form to write, never a silent no-op."""
    server = Server("bare-resource")

    with pytest.raises(TypeError, match=r'@server\.resource\("file:///notes\.txt"\)'):

        @server.resource  # type: ignore[arg-type]
        async def notes() -> str:
            return "n"

    assert {} == server.resources


def test_bare_completion_and_notification_decorators_are_refused():
    """`@server.completion` and `@server.on_notification` without their arguments are refused
    at once (the second with the form to write), never silent no-ops."""
    server = Server("bare-others")

    async def hook(*args: object) -> None:
        return None

    with pytest.raises(TypeError, match="missing 2 required positional arguments"):
        server.completion(hook)  # type: ignore[arg-type, call-arg]
    with pytest.raises(TypeError, match=r"@server\.on_notification needs"):
        server.on_notification(hook)  # type: ignore[arg-type]


@pytest.mark.spec("U-TOOL-13")
def test_a_second_tool_of_the_same_name_is_refused_naming_the_first():
    """A tool registered under a name already taken is refused with a ValueError that names
    where the first was defined and how to replace it; the first stays."""
    server = Server("dup")

    @server.tool
    async def greet() -> str:
        """First."""
        return "1"

    with pytest.raises(ValueError, match=r"tool 'greet' is already registered") as caught:

        @server.tool(name="greet")
        async def other() -> str:
            """Second."""
            return "2"

    assert "test_feat_registration" in str(caught.value)
    assert "replace=True" in str(caught.value)
    assert "First." == server.tools["greet"].description


@pytest.mark.spec("U-TOOL-13", "U-TOOL-2")
async def test_replace_true_replaces_a_tool_and_announces_the_change(autojump_clock, connect):
    """With replace=True the second tool takes the name: tools/list shows it, once, and the
    call runs it."""
    server = Server("replace")

    @server.tool
    async def greet() -> str:
        """First."""
        return "1"

    @server.tool(name="greet", replace=True)
    async def greet_again() -> str:
        """Second."""
        return "2"

    s = await connect(server)
    with trio.fail_after(10):
        tools = await s.request("tools/list")
        called = await s.request("tools/call", {"name": "greet"})

    assert [("greet", "Second.")] == [(t["name"], t["description"]) for t in tools["tools"]]
    assert "2" == called["content"][0]["text"]


def test_second_prompts_resources_and_templates_under_a_taken_name_are_refused():
    """The same holds for prompts (by name), resources and resource templates (by URI):
    refused without replace=True, replaced with it."""
    server = Server("dup-others")

    @server.prompt
    async def p() -> str:
        return "1"

    @server.resource("x://fixed")
    async def fixed() -> str:
        return "1"

    @server.resource("x://t/{name}")
    async def templated(name: str) -> str:
        return name

    async def again(name: str) -> str:
        return "2"

    async def fixed_again() -> str:
        return "2"

    with pytest.raises(ValueError, match="prompt 'p' is already registered"):
        server.add_prompt(again, name="p")
    with pytest.raises(ValueError, match="resource 'x://fixed' is already registered"):
        server.add_resource(fixed_again, "x://fixed")
    with pytest.raises(
        ValueError, match=r"resource template 'x://t/\{name\}' is already registered"
    ):
        server.add_resource(again, "x://t/{name}")

    server.add_prompt(again, name="p", replace=True)
    server.add_resource(again, "x://t/{name}", replace=True)

    assert again is server.prompts["p"].fn
    assert again is server.resource_templates["x://t/{name}"].fn
