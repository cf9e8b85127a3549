"""Prompts: registration from signatures, prompts/list (paginated) and prompts/get."""

from __future__ import annotations

from typing import Any, Literal

import pytest
import trio

from trio_mcp import (
    AssistantMessage,
    Audio,
    Context,
    EmbeddedResource,
    Image,
    PromptResult,
    ResourceLink,
    Server,
    ServerConfig,
    Text,
    UserMessage,
)


def prompt_server() -> Server:
    server = Server("prompt-tests")

    @server.prompt(title="Review code")
    async def review(code: str, style: Literal["terse", "kind"] = "kind") -> str:
        """Ask for a code review.

        Args:
            code: the code to review.
            style: how to phrase the review.
        """
        return f"Review this ({style}): {code}"

    @server.prompt()
    async def dialogue(ctx: Context, topic: str | None = None) -> list[Any]:
        """A short dialogue, with every kind of message content."""
        return [
            f"Let us talk about {topic or 'nothing'}",
            AssistantMessage("Sure."),
            UserMessage(Image(b"i", "image/gif")),
            UserMessage(Audio(b"a", "audio/wav")),
            UserMessage(EmbeddedResource(uri="x://r", text="r", mime_type="text/plain")),
            UserMessage(ResourceLink(uri="x://l", name="l")),
            Text("a bare block"),
            {"role": "assistant", "content": {"type": "text", "text": "raw"}},
        ]

    @server.prompt(name="custom-name", description="Explicit description.")
    async def renamed() -> PromptResult:
        return PromptResult(messages=["hi"], description="Rendered for you.")

    @server.prompt()
    async def broken() -> str:
        """Fails."""
        raise RuntimeError("secret")

    return server


@pytest.mark.spec("U-PROMPT-1")
async def test_the_capability_is_declared_only_with_prompts(autojump_clock, mem):
    """A server with prompts declares prompts {listChanged} and completions; one without
    declares neither and answers prompts/* with -32601."""
    ms = await mem(prompt_server())
    s = await ms.open_session()
    caps = s.initialize_result["capabilities"]
    assert caps["prompts"] == {"listChanged": True}
    assert caps["completions"] == {}
    bare = await mem(Server("bare"))
    b = await bare.open_session()
    assert "prompts" not in b.initialize_result["capabilities"]
    with trio.fail_after(10):
        assert (await b.error("prompts/list"))["code"] == -32601
        assert (await b.error("prompts/get", {"name": "x"}))["code"] == -32601


async def test_prompts_list_describes_arguments(autojump_clock, mem):
    """prompts/list gives each prompt's name, title, description, and arguments derived
    from the signature: name, description from the docstring's Args, required unless it
    has a default. A Context parameter is not an argument."""
    ms = await mem(prompt_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        prompts = {p["name"]: p for p in (await s.result("prompts/list"))["prompts"]}
        assert prompts["review"] == {
            "name": "review",
            "title": "Review code",
            "description": "Ask for a code review.",
            "arguments": [
                {"name": "code", "description": "the code to review.", "required": True},
                {"name": "style", "description": "how to phrase the review.", "required": False},
            ],
        }
        assert prompts["dialogue"]["arguments"] == [{"name": "topic", "required": False}]
        assert prompts["custom-name"] == {
            "name": "custom-name",
            "description": "Explicit description.",
        }


@pytest.mark.spec("U-PAGE-4")
async def test_prompts_list_pages(autojump_clock, mem):
    """prompts/list is paginated; a bad cursor is -32602."""
    ms = await mem(prompt_server(), ServerConfig(page_size=3))
    s = await ms.open_session()
    with trio.fail_after(10):
        first = await s.result("prompts/list")
        second = await s.result("prompts/list", {"cursor": first["nextCursor"]})
        names = [p["name"] for p in first["prompts"] + second["prompts"]]
        assert names == ["broken", "custom-name", "dialogue", "review"]
        assert "nextCursor" not in second
        assert (await s.error("prompts/list", {"cursor": "nope"}))["code"] == -32602


async def test_get_renders_messages(autojump_clock, mem):
    """prompts/get returns the description and the messages: a str is one user message,
    arguments fill the function's parameters (defaults for the absent ones)."""
    ms = await mem(prompt_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        result = await s.result("prompts/get", {"name": "review", "arguments": {"code": "x=1"}})
        assert result == {
            "description": "Ask for a code review.",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Review this (kind): x=1"}}
            ],
        }
        result = await s.result("prompts/get", {"name": "custom-name"})
        assert result["description"] == "Rendered for you."


async def test_every_message_form(autojump_clock, mem):
    """Messages may be str, UserMessage/AssistantMessage with text, image, audio, embedded
    resource or resource link content, a bare content block, or a {role, content} dict."""
    ms = await mem(prompt_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        result = await s.result("prompts/get", {"name": "dialogue", "arguments": {"topic": "x"}})
        messages = result["messages"]
        assert [m["role"] for m in messages] == [
            "user",
            "assistant",
            "user",
            "user",
            "user",
            "user",
            "user",
            "assistant",
        ]
        assert [m["content"]["type"] for m in messages] == [
            "text",
            "text",
            "image",
            "audio",
            "resource",
            "resource_link",
            "text",
            "text",
        ]
        assert messages[0]["content"]["text"] == "Let us talk about x"
        assert messages[2]["content"] == {"type": "image", "data": "aQ==", "mimeType": "image/gif"}
        assert messages[4]["content"]["resource"] == {
            "uri": "x://r",
            "mimeType": "text/plain",
            "text": "r",
        }


@pytest.mark.spec("U-PROMPT-2", "U-PROMPT-3")
@pytest.mark.parametrize(
    "params",
    [
        {"name": "no-such-prompt"},
        {},
        {"name": 3},
        {"name": "review"},  # missing required argument
        {"name": "review", "arguments": {"code": 1}},  # arguments are strings
        {"name": "review", "arguments": {"code": "x", "style": "rude"}},  # not an allowed value
        {"name": "review", "arguments": {"code": "x", "extra": "y"}},  # unknown argument
        {"name": "review", "arguments": ["x"]},
    ],
)
async def test_bad_prompt_requests_are_invalid_params(autojump_clock, mem, params):
    """An unknown prompt, a missing required argument or an invalid argument is -32602."""
    ms = await mem(prompt_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        error = await s.error("prompts/get", params)
        assert error["code"] == -32602


async def test_a_failing_prompt_is_an_internal_error(autojump_clock, mem):
    """A prompt function that raises gives -32603, without its details on the wire."""
    ms = await mem(prompt_server())
    s = await ms.open_session()
    with trio.fail_after(10):
        error = await s.error("prompts/get", {"name": "broken"})
        assert error["code"] == -32603 and "secret" not in str(error)


async def test_prompts_list_changed(autojump_clock, mem):
    """Adding or removing a prompt sends notifications/prompts/list_changed on the GET
    stream."""
    server = prompt_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        get = await s.get()
        server.remove_prompt("broken")
        message = await get.next_message()
        assert message == {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}
        assert "broken" not in server.prompts


def test_prompt_arguments_must_be_strings():
    """Prompt arguments are strings on the wire, so a parameter that cannot take a str is
    refused at registration; prompt functions are async."""
    server = Server("t")
    with pytest.raises(TypeError, match="must accept a str"):

        @server.prompt()
        async def counted(n: int) -> str:
            return str(n)

    with pytest.raises(TypeError, match="async"):

        @server.prompt()
        def sync() -> str:  # type: ignore[type-var]
            return "x"
