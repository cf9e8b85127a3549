"""The demonstration server behind ``trio-mcp serve``.

It is written as an example of trio-mcp code, and it exposes what the official MCP
conformance suite calls (the ``test_*`` tools), so ``trio-mcp serve`` can be tested by it.
Read it top to bottom: each tool shows one feature.
"""

from __future__ import annotations

import base64
from typing import Literal

import attrs
import trio

from trio_mcp import Audio, Context, EmbeddedResource, Image, Server, Text, ToolError

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
    result = await ctx.request(
        "sampling/createMessage",
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": 100,
        },
    )
    content = result.get("content", {})
    text = content.get("text", "") if isinstance(content, dict) else ""
    return f"LLM response: {text}"


@server.tool()
async def test_elicitation(ctx: Context, message: str) -> str:
    """Asks the user for a username and an email (elicitation/create, form mode).

    Args:
        message: what to tell the user.
    """
    result = await ctx.request(
        "elicitation/create",
        {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "Your username"},
                    "email": {"type": "string", "format": "email", "description": "Your email"},
                },
                "required": ["username", "email"],
            },
        },
    )
    return f"User response: action={result.get('action')}, content={result.get('content')}"
