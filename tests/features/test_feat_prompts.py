"""Prompts: registration from signatures, prompts/list (paginated) and prompts/get."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Any, Literal

import pytest
import trio
from feat_support import error_of

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


@pytest.mark.spec("U-PROMPT-1", "U-PROMPT-9")
async def test_the_capability_is_declared_only_with_prompts(autojump_clock, connect):
    """A server with prompts declares prompts {listChanged} and completions; one without
    declares neither and answers prompts/* with -32601."""
    s = await connect(prompt_server())
    caps = s.server_capabilities
    assert caps["prompts"] == {"listChanged": True}
    assert caps["completions"] == {}
    b = await connect(Server("bare"))
    assert "prompts" not in b.server_capabilities
    with trio.fail_after(10):
        assert (await error_of(b, "prompts/list"))["code"] == -32601
        assert (await error_of(b, "prompts/get", {"name": "x"}))["code"] == -32601


async def test_prompts_list_describes_arguments(autojump_clock, connect):
    """prompts/list gives each prompt's name, title, description, and arguments derived
    from the signature: name, description from the docstring's Args, required unless it
    has a default. A Context parameter is not an argument."""
    s = await connect(prompt_server())
    with trio.fail_after(10):
        prompts = {p["name"]: p for p in (await s.request("prompts/list"))["prompts"]}
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
async def test_prompts_list_pages(autojump_clock, connect):
    """prompts/list is paginated; a bad cursor is -32602."""
    s = await connect(prompt_server(), config=ServerConfig(page_size=3))
    with trio.fail_after(10):
        first = await s.request("prompts/list")
        second = await s.request("prompts/list", {"cursor": first["nextCursor"]})
        names = [p["name"] for p in first["prompts"] + second["prompts"]]
        assert names == ["broken", "custom-name", "dialogue", "review"]
        assert "nextCursor" not in second
        assert (await error_of(s, "prompts/list", {"cursor": "nope"}))["code"] == -32602


async def test_get_renders_messages(autojump_clock, connect):
    """prompts/get returns the description and the messages: a str is one user message,
    arguments fill the function's parameters (defaults for the absent ones)."""
    s = await connect(prompt_server())
    with trio.fail_after(10):
        result = await s.request("prompts/get", {"name": "review", "arguments": {"code": "x=1"}})
        assert result == {
            "description": "Ask for a code review.",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Review this (kind): x=1"}}
            ],
        }
        result = await s.request("prompts/get", {"name": "custom-name"})
        assert result["description"] == "Rendered for you."


async def test_every_message_form(autojump_clock, connect):
    """Messages may be str, UserMessage/AssistantMessage with text, image, audio, embedded
    resource or resource link content, a bare content block, or a {role, content} dict."""
    s = await connect(prompt_server())
    with trio.fail_after(10):
        result = await s.request("prompts/get", {"name": "dialogue", "arguments": {"topic": "x"}})
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
async def test_bad_prompt_requests_are_invalid_params(autojump_clock, connect, params):
    """An unknown prompt, a missing required argument or an invalid argument is -32602."""
    s = await connect(prompt_server())
    with trio.fail_after(10):
        error = await error_of(s, "prompts/get", params)
        assert error["code"] == -32602


async def test_a_failing_prompt_is_an_internal_error(autojump_clock, connect):
    """A prompt function that raises gives -32603, without its details on the wire."""
    s = await connect(prompt_server())
    with trio.fail_after(10):
        error = await error_of(s, "prompts/get", {"name": "broken"})
        assert error["code"] == -32603 and "secret" not in str(error)


@pytest.mark.spec("U-PROMPT-4")
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

        async def fresh() -> str:
            """A new prompt."""
            return "new"

        server.add_prompt(fresh)
        message = await get.next_message()
        assert message == {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}
        assert "fresh" in server.prompts


def test_prompt_arguments_must_be_strings():
    """Prompt arguments are strings on the wire, so a parameter that cannot take a str is
    refused at registration; prompt functions are async."""
    server = Server("t")
    with pytest.raises(TypeError, match="must accept a str"):

        @server.prompt()
        async def counted(n: int) -> str:
            return str(n)

    with pytest.raises(TypeError, match="generator"):

        @server.prompt()
        def sync() -> Iterator[str]:
            yield "x"


MIME_TYPE = re.compile(r"[a-z]+/[a-z0-9][a-z0-9.+-]*")
PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
WAV = b"RIFF\x00\x01\xfe\xffWAVE"


def media_server() -> Server:
    server = Server("media")

    @server.prompt()
    async def media() -> list[Any]:
        """An image, an audio clip and embedded resources, from raw bytes."""
        return [
            UserMessage(Image(PNG)),
            UserMessage(Audio(WAV)),
            UserMessage(EmbeddedResource(uri="x://doc", text="hello", mime_type="text/plain")),
            UserMessage(
                EmbeddedResource(uri="x://pdf", blob=b"%PDF\xff", mime_type="application/pdf")
            ),
        ]

    return server


@pytest.mark.spec("U-PROMPT-5", "U-PROMPT-6")
async def test_image_and_audio_data_is_base64_with_a_mime_type(autojump_clock, connect):
    """Raw image and audio bytes go out as strict base64 with a type/subtype MIME type."""
    s = await connect(media_server())
    with trio.fail_after(10):
        messages = (await s.request("prompts/get", {"name": "media"}))["messages"]
    image, audio = messages[0]["content"], messages[1]["content"]
    assert (image["type"], audio["type"]) == ("image", "audio")
    assert base64.b64decode(image["data"], validate=True) == PNG
    assert base64.b64decode(audio["data"], validate=True) == WAV
    assert (image["mimeType"], audio["mimeType"]) == ("image/png", "audio/wav")
    assert MIME_TYPE.fullmatch(image["mimeType"]) and MIME_TYPE.fullmatch(audio["mimeType"])


@pytest.mark.spec("U-PROMPT-7")
async def test_embedded_resources_carry_uri_mime_type_and_their_data(autojump_clock, connect):
    """An embedded resource has its URI, its MIME type, and text or base64 blob data."""
    s = await connect(media_server())
    with trio.fail_after(10):
        messages = (await s.request("prompts/get", {"name": "media"}))["messages"]
    text, blob = messages[2]["content"], messages[3]["content"]
    assert text == {
        "type": "resource",
        "resource": {"uri": "x://doc", "mimeType": "text/plain", "text": "hello"},
    }
    assert blob["resource"]["uri"] == "x://pdf"
    assert blob["resource"]["mimeType"] == "application/pdf"
    assert base64.b64decode(blob["resource"]["blob"], validate=True) == b"%PDF\xff"
    assert "text" not in blob["resource"]
    with pytest.raises(ValueError, match="exactly one of text and blob"):
        EmbeddedResource(uri="x://none")
    with pytest.raises(ValueError, match="exactly one of text and blob"):
        EmbeddedResource(uri="x://both", text="t", blob=b"b")


@pytest.mark.spec("U-PROMPT-8")
@pytest.mark.parametrize(
    "arguments",
    [None, {"style": "kind"}, {"code": "x", "style": "rude"}, {"code": "x", "extra": "y"}],
)
async def test_prompt_arguments_are_validated_before_the_prompt_runs(
    autojump_clock, connect, arguments
):
    """Invalid prompt arguments are -32602, and the prompt function never runs."""
    server = Server("validate")
    runs: list[str] = []

    @server.prompt()
    async def review(code: str, style: Literal["terse", "kind"] = "kind") -> str:
        """Review."""
        runs.append(code)
        return code

    s = await connect(server)
    params: dict[str, Any] = {"name": "review"}
    if arguments is not None:
        params["arguments"] = arguments
    with trio.fail_after(10):
        error = await error_of(s, "prompts/get", params)
        assert error["code"] == -32602
        assert runs == []
        await s.request("prompts/get", {"name": "review", "arguments": {"code": "ok"}})
        assert runs == ["ok"]


@pytest.mark.spec("U-PROMPT-5", "U-PROMPT-6")
@pytest.mark.parametrize(
    "make",
    [
        lambda: Image("not base64!", "image/png"),
        lambda: Image(PNG, "png"),
        lambda: Image(PNG, "audio/wav"),
        lambda: Audio("%%%", "audio/wav"),
        lambda: Audio(WAV, "image/png"),
        lambda: Audio(WAV, "audio/"),
    ],
    ids=["image-text-not-base64", "image-no-subtype", "image-of-audio-type",
         "audio-text-not-base64", "audio-of-image-type", "audio-empty-subtype"],
)
def test_image_and_audio_refuse_data_that_is_not_base64_or_a_mime_type_of_their_kind(
    make: Any,
) -> None:
    """Image and audio content refuse, when made, text that is not base64 and a MIME type
    that is not one of their kind: nothing invalid can go out."""
    with pytest.raises(ValueError):
        make()


@pytest.mark.spec("U-PROMPT-7")
def test_an_embedded_resource_needs_a_uri_and_always_names_a_mime_type() -> None:
    """An embedded resource refuses what is not a URI, and one made without a MIME type goes
    out with the type of its data: text/plain for text, application/octet-stream for a
    blob."""
    for uri in ("no-scheme", "/path/only", "test://a b"):
        with pytest.raises(ValueError, match="not a URI"):
            EmbeddedResource(uri=uri, text="t")
    with pytest.raises(ValueError, match="MIME type"):
        EmbeddedResource(uri="x://t", text="t", mime_type="plain")

    assert [("text/plain", "t"), ("application/octet-stream", "AAE=")] == [
        (c["mimeType"], c.get("text", c.get("blob")))
        for c in (
            EmbeddedResource(uri="x://t", text="t").contents(),
            EmbeddedResource(uri="x://b", blob=b"\x00\x01").contents(),
        )
    ]


@pytest.mark.spec("U-PROMPT-9", "L-CAP-1", "U-PROMPT-4")
async def test_a_session_keeps_to_the_capabilities_its_initialize_declared(autojump_clock, mem):
    """A session initialized before the server had any prompt negotiated no prompts
    capability: when a prompt is registered later, it is not told of the change and is not
    served prompts/*, while a session initialized after is, on both counts."""
    server = Server("late-prompts")
    ms = await mem(server)
    early = await ms.open_session()
    with trio.fail_after(10):
        early_get = await early.get()

        async def late() -> str:
            """A prompt that came late."""
            return "late"

        server.add_prompt(late)
        later = await ms.open_session()
        later_get = await later.get()
        server.remove_prompt("late")
        told = await later_get.next_message()
        server.add_prompt(late)
        early_told = None
        with trio.move_on_after(1):
            early_told = await early_get.next_message()
        refused = await early.error("prompts/list")
        served = await later.result("prompts/list")

    assert "prompts" not in early.initialize_result["capabilities"]
    assert {"listChanged": True} == later.initialize_result["capabilities"]["prompts"]
    assert {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"} == told
    assert early_told is None
    assert -32601 == refused["code"]
    assert ["late"] == [p["name"] for p in served["prompts"]]
