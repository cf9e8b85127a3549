"""The demonstration server behind ``trio-mcp serve``.

It is written as an example of trio-mcp code, and it exposes what the official MCP
conformance suite calls (the ``test_*`` tools, resources and prompts), so ``trio-mcp serve``
can be tested by it. Read it top to bottom: each definition shows one feature.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import attrs
import trio

from trio_mcp import (
    AssistantMessage,
    Audio,
    Context,
    EmbeddedResource,
    Image,
    Server,
    SessionContext,
    Text,
    ToolError,
    UserMessage,
)

server = Server(
    "trio-mcp-demo",
    version="0.1.0",
    instructions="A demonstration server: small tools that each show one MCP feature.",
)

# A 1x1 transparent PNG and a tiny silent WAV, so media content needs no files.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
WAV_SILENCE = (
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00"
    b"\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
)


# -- plain tools: the signature is the schema ------------------------------------------------


@server.tool()
async def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: what to echo back.
    """
    return text


@server.tool()
async def add(a: float, b: float) -> float:
    """Add two numbers; the result is structured content with an output schema.

    Args:
        a: the first addend.
        b: the second addend.
    """
    return a + b


@attrs.frozen
class Forecast:
    city: str
    temperature: float
    conditions: Literal["sunny", "cloudy", "rain"]


@server.tool()
async def weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> Forecast:
    """A made-up forecast: shows attrs classes as structured output.

    Args:
        city: the city to forecast.
        unit: the temperature unit.
    """
    temp = 21.0 if unit == "celsius" else 69.8
    return Forecast(city=city, temperature=temp, conditions="sunny")


@server.tool()
async def countdown(ctx: Context, n: int = 5, interval: float = 0.1) -> str:
    """Count down from n, reporting progress on the way (cancel it with notifications/cancelled).

    Args:
        n: where to start.
        interval: seconds between steps.
    """
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"{n - i - 1} to go")
        await trio.sleep(interval)
    return "liftoff"


# -- the conformance suite's tools -----------------------------------------------------------


@server.tool()
async def test_simple_text() -> str:
    """Returns a simple text content block."""
    return "This is a simple text response for testing."


@server.tool()
async def test_image_content() -> Image:
    """Returns an image content block (a 1x1 PNG)."""
    return Image(PNG_1X1, "image/png")


@server.tool()
async def test_audio_content() -> Audio:
    """Returns an audio content block (a tiny WAV)."""
    return Audio(WAV_SILENCE, "audio/wav")


@server.tool()
async def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return EmbeddedResource(
        uri="test://embedded-resource",
        mime_type="text/plain",
        text="This is an embedded resource content.",
    )


@server.tool()
async def test_multiple_content_types() -> list[Text | Image | EmbeddedResource]:
    """Returns text, an image and an embedded resource together."""
    return [
        Text("Multiple content types test:"),
        Image(PNG_1X1, "image/png"),
        EmbeddedResource(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test": "data", "value": 123}',
        ),
    ]


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages while it runs."""
    for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log("info", step, logger="demo")
        await trio.sleep(0.05)
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for value in (0, 50, 100):
        await ctx.report_progress(value, 100, f"Completed step {value} of 100")
        await trio.sleep(0.05)
    return str(ctx.progress_token)


@server.tool()
async def test_error_handling() -> str:
    """Always fails with a tool error (isError: true), not a protocol error."""
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE connection after priming, then answers on the resumed stream (SEP-1699)."""
    await trio.sleep(0.05)
    ctx.close_sse_stream()
    await trio.sleep(0.2)
    return "Reconnection test completed successfully"


@server.tool()
async def test_sampling(ctx: Context, prompt: str) -> str:
    """Asks the client's model to complete the prompt (sampling/createMessage).

    Args:
        prompt: the text to send to the client's model.
    """
    result = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {result.text}"


@server.tool()
async def test_elicitation(ctx: Context, message: str) -> str:
    """Asks the user for a username and an email (elicitation/create, form mode).

    Args:
        message: what to tell the user.
    """
    result = await ctx.elicit(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "Your username"},
                "email": {"type": "string", "format": "email", "description": "Your email"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={result.action}, content={result.content}"


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits a form whose fields all have defaults (SEP-1034)."""
    result = await ctx.elicit(
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verified", "default": True},
            },
            "required": [],
        },
    )
    return f"Elicitation completed: action={result.action}, content={result.content}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits a form with every enum style: untitled, titled, legacy, single and multi
    select (SEP-1330)."""
    titled = [
        {"const": "value1", "title": "First Option"},
        {"const": "value2", "title": "Second Option"},
        {"const": "value3", "title": "Third Option"},
    ]
    options = ["option1", "option2", "option3"]
    result = await ctx.elicit(
        "Please choose from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": options},
                "titledSingle": {"type": "string", "oneOf": titled},
                "legacyEnum": {
                    "type": "string",
                    "enum": options,
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
                "titledMulti": {"type": "array", "items": {"anyOf": titled}},
            },
            "required": [],
        },
    )
    return f"Elicitation completed: action={result.action}, content={result.content}"


# An explicit input schema, kept as written: JSON Schema 2020-12 with $defs (J-SCHEMA-1).
ADDRESS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "required": ["name"],
    "additionalProperties": False,
}


@server.tool(input_schema=ADDRESS_SCHEMA)
async def json_schema_2020_12_tool(name: str, address: dict[str, str] | None = None) -> str:
    """Takes a name and an address described with a JSON Schema 2020-12 $defs entry."""
    return f"Hello {name} from {(address or {}).get('city', 'somewhere')}"


# -- server-to-client requests outside the conformance suite ----------------------------------


@server.tool()
async def client_roots(ctx: Context) -> list[str]:
    """Lists the client's roots (roots/list); the client must declare the roots capability."""
    return [root.uri for root in await ctx.list_roots()]


@server.on_roots_list_changed
async def roots_changed(session: SessionContext) -> None:
    # A hook runs outside any request: its messages go on the session's GET stream.
    roots = await session.list_roots()
    await session.log("info", {"roots": [r.uri for r in roots]}, logger="demo")


# -- resources: fixed URIs, a URI template, a subscribable one ---------------------------------


@server.resource("test://static-text", mime_type="text/plain")
async def static_text() -> str:
    """A fixed text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """A fixed binary resource (a 1x1 PNG): bytes are sent as a base64 blob."""
    return PNG_1X1


@server.resource("test://template/{id}/data", mime_type="application/json")
async def template_data(id: str) -> dict[str, Any]:
    """A resource template: the id comes from the URI.

    Args:
        id: which item to read.
    """
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


watched = {"text": "Watched resource content, version 1."}


@server.resource("test://watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    """A resource clients may subscribe to; the update_watched_resource tool changes it."""
    return watched["text"]


@server.tool()
async def update_watched_resource(text: str) -> str:
    """Changes test://watched-resource and notifies its subscribers (resources/updated).

    Args:
        text: the new content.
    """
    watched["text"] = text
    count = server.notify_resource_updated("test://watched-resource")
    return f"Updated; {count} subscriber(s) notified."


@server.resource("test://example-resource", mime_type="text/plain")
async def example_resource() -> str:
    """An example resource, the one test_prompt_with_embedded_resource embeds."""
    return "This is an example resource."


# -- prompts: arguments come from the signature ------------------------------------------------


@server.prompt()
async def test_simple_prompt() -> str:
    """A prompt with no arguments: a str is one user message."""
    return "This is a simple prompt for testing."


@server.prompt()
async def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments.

    Args:
        arg1: the first argument.
        arg2: the second argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.completion("prompt", "test_prompt_with_arguments", "arg1")
async def complete_arg1(value: str) -> list[str]:
    """Suggestions for arg1 that start with what the user typed."""
    return [v for v in ("paris", "park", "party", "test", "testing") if v.startswith(value)]


@server.prompt()
async def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt whose first message embeds a resource.

    Args:
        resourceUri: the URI of the resource to embed.
    """
    return [
        UserMessage(
            EmbeddedResource(
                uri=resourceUri, mime_type="text/plain", text="Embedded resource content."
            )
        ),
        UserMessage("Please process the embedded resource above."),
    ]


@server.prompt()
async def test_prompt_with_image() -> list[UserMessage | AssistantMessage]:
    """A prompt with an image message."""
    return [
        UserMessage(Image(PNG_1X1, "image/png")),
        UserMessage("Please analyze the image above."),
        AssistantMessage("I see a single transparent pixel."),
    ]
