"""The demonstration server behind ``trio-mcp serve``.

It is written as an example of trio-mcp code, and it exposes what the official MCP
conformance suite calls (the ``test_*`` tools, resources and prompts), so ``trio-mcp serve``
can be tested by it. Read it top to bottom: each definition shows one feature.
"""

from __future__ import annotations

import base64
import secrets
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
    Skill,
    Skills,
    Text,
    ToolError,
    ToolResult,
    UserMessage,
    apps_supported,
    elicitation_request,
    roots_request,
    sampling_request,
)
from trio_mcp._demo_page import DICE_PAGE
from trio_mcp.protocol import ErrorCode, RemoteProtocolError

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


# An explicit input schema, kept as written: JSON Schema 2020-12 with $defs, an $anchor,
# composition and conditionals (J-SCHEMA-1). Arguments are validated against it as written.
CONTACT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(input_schema=CONTACT_SCHEMA)
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Takes a contact described with JSON Schema 2020-12: $defs, $anchor, allOf/anyOf and
    if/then/else."""
    how = phone if contactMethod == "phone" else email
    return f"Hello {name or 'you'} from {(address or {}).get('city', 'somewhere')}, at {how}"


# -- 2026-07-28: tools the conformance suite's stateless scenarios call -------------------------


@server.tool(requires={"sampling": {}})
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability: a 2026-07-28 client that does not declare it
    is refused with -32021 before the tool runs."""
    result = await ctx.sample("Say hello.", max_tokens=20)
    return f"LLM response: {result.text}"


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Asks the user for a name. In a 2026-07-28 request the question comes back as an
    input_required result at once, never as a request on the stream."""
    result = await ctx.elicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        key="user_name",
    )
    return f"Hello, {(result.content or {}).get('name', 'stranger')}!"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs three messages; a 2026-07-28 request gets them only if its _meta names a level."""
    for step in ("started", "working", "done"):
        await ctx.log("info", f"test_logging_tool {step}", logger="demo")
    return "Logged three messages."


async def _dynamic_tool() -> str:
    """A tool that test_trigger_tool_change adds and removes."""
    return "Here for now."


@server.tool()
async def test_trigger_tool_change() -> str:
    """Adds or removes the tool test_dynamic_tool: every listener of tools/list_changed is
    told (notifications/tools/list_changed)."""
    if "test_dynamic_tool" in server.tools:
        server.remove_tool("test_dynamic_tool")
        return "Removed test_dynamic_tool."
    server.add_tool(_dynamic_tool, name="test_dynamic_tool")
    return "Added test_dynamic_tool."


async def _dynamic_prompt() -> str:
    """A prompt that test_trigger_prompt_change adds and removes."""
    return "Here for now."


@server.tool()
async def test_trigger_prompt_change() -> str:
    """Adds or removes the prompt test_dynamic_prompt (notifications/prompts/list_changed)."""
    if "test_dynamic_prompt" in server.prompts:
        server.remove_prompt("test_dynamic_prompt")
        return "Removed test_dynamic_prompt."
    server.add_prompt(_dynamic_prompt, name="test_dynamic_prompt")
    return "Added test_dynamic_prompt."


@server.tool(headers={"region": "Region"})
async def test_header_params(region: str, count: int = 0) -> str:
    """Mirrors its region argument into the Mcp-Param-Region header (x-mcp-header), so a
    load balancer can route on it without reading the body.

    Args:
        region: where the request should go.
        count: how many times to say it.
    """
    return " ".join([region] * max(count, 1))


# -- 2026-07-28: asking for input (multi round-trip requests) ----------------------------------
# The same ctx.elicit / ctx.sample / ctx.list_roots serve both eras: a legacy session gets a
# request on the call's stream; a 2026-07-28 call gets an input_required result and retries
# with the answers, and the tool runs again from its first line (TM-MRTR-RERUN).

NAME_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name (key user_name), then greets them."""
    answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    if not answer.accepted:
        return f"No name given ({answer.action})."
    return f"Hello, {(answer.content or {})['name']}!"


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question (key capital_question)."""
    answer = await ctx.sample(
        "What is the capital of France?", max_tokens=50, key="capital_question"
    )
    return f"The model says: {answer.text}"


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Lists the client's roots (key client_roots)."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(root.uri for root in roots)


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation (key confirm); the round trip carries a requestState."""
    answer = await ctx.elicit(
        "Proceed?",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    confirmed = answer.accepted and (answer.content or {}).get("ok") is True
    return "state-ok: confirmed" if confirmed else "state-ok: not confirmed"


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks three questions at once: a form, the model and the roots."""
    answers = await ctx.ask(
        {
            "user_name": elicitation_request("What is your name?", NAME_FORM),
            "greeting": sampling_request("Write a one-line greeting.", max_tokens=50),
            "client_roots": roots_request(),
        }
    )
    name = (answers["user_name"].get("content") or {}).get("name", "stranger")
    roots = ", ".join(r["uri"] for r in answers["client_roots"].get("roots", []))
    return f"{name}; greeting received; roots: {roots}"


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks two questions one after the other (keys step1, step2): two rounds."""
    name = await ctx.elicit("What is your name?", NAME_FORM, key="step1")
    color = await ctx.elicit(
        "And your favourite colour?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"{(name.content or {}).get('name')} likes {(color.content or {}).get('color')}."


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; a retry whose requestState was altered is refused."""
    answer = await ctx.elicit(
        "Proceed?",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return f"Confirmed: {answer.accepted}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only what the client can answer: each kind of question it declared."""
    questions = {}
    if ctx.client_supports("elicitation", "form"):
        questions["user_name"] = elicitation_request("What is your name?", NAME_FORM)
    if ctx.client_supports("sampling"):
        questions["greeting"] = sampling_request("Write a one-line greeting.", max_tokens=50)
    if ctx.client_supports("roots"):
        questions["client_roots"] = roots_request()
    if not questions:
        return "The client can answer no question."
    answers = await ctx.ask(questions)
    return "Answered: " + ", ".join(sorted(answers))


# -- 2026-07-28 tasks (the io.modelcontextprotocol/tasks extension) -------------------------------
# A client that declares the extension may get a task id for these calls and poll it; one that
# does not gets the answer as usual (task="optional") or -32021 (task="required"). Inside a
# task, ctx.elicit waits for the client's tasks/update.


@server.tool()
async def greet(name: str) -> str:
    """Greets by name, synchronously (never a task)."""
    return f"Hello, {name}!"


@server.tool(task="optional")
async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "job") -> str:
    """Sleeps ``seconds`` (cancellably), reporting progress; a call that lasts becomes a task."""
    steps = max(1, min(int(seconds * 4), 400))
    for step in range(steps):
        await trio.sleep(seconds / steps)
        await ctx.report_progress(step + 1, steps)
    return f"{label}: computed in {seconds:g} s"


@server.tool(task="required")
async def failing_job() -> str:
    """Works for about a second, then ends with a tool error (isError): the task completes."""
    await trio.sleep(1.0)
    raise ToolError("failing_job failed, as it always does")


@server.tool(task="required")
async def protocol_error_job() -> str:
    """Works briefly, then ends with a JSON-RPC error: the task fails."""
    await trio.sleep(0.2)
    raise RemoteProtocolError(
        "Internal error: protocol_error_job ends with a JSON-RPC error",
        code=ErrorCode.INTERNAL_ERROR,
    )


@server.tool(task="required")
async def confirm_delete(ctx: Context, filename: str = "example.txt") -> str:
    """Asks the user to confirm, inside the task, before "deleting" a file."""
    answer = await ctx.elicit(
        f"Delete {filename}?",
        {"type": "object", "properties": {"confirm": {"type": "boolean"}},
         "required": ["confirm"]},
    )
    if answer.accepted and (answer.content or {}).get("confirm") is True:
        return f"Deleted {filename}."
    return f"Kept {filename} ({answer.action})."


@server.tool(task="required")
async def multi_input(ctx: Context) -> str:
    """Asks two questions at once inside the task; either may be answered first."""
    answers = await ctx.ask(
        {
            "name": elicitation_request("What is your name?", NAME_FORM),
            "confirm": elicitation_request(
                "Shall I go on?",
                {"type": "object", "properties": {"confirm": {"type": "boolean"}},
                 "required": ["confirm"]},
            ),
        }
    )
    name = (answers["name"].get("content") or {}).get("name", "someone")
    go_on = (answers["confirm"].get("content") or {}).get("confirm") is True
    return f"{name}: {'going on' if go_on else 'stopping'}."


@server.tool(task="optional")
async def test_tool_with_task(ctx: Context) -> str:
    """Asks a name before any task exists (an input_required round trip), then works long
    enough to become a task."""
    answer = await ctx.elicit("What is your name?", NAME_FORM, key="user_name")
    name = (answer.content or {}).get("name", "stranger")
    await trio.sleep(1.5)
    return f"Hello, {name}! The task is done."


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


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that first asks for some context (key user_context)."""
    answer = await ctx.elicit(
        "What should the prompt be about?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return f"Write about: {(answer.content or {}).get('context', 'anything')}"


# -- MCP Apps: a tool whose results a host shows in a page (spec/apps.md) ---------------------


@server.app_tool(resource_uri="ui://trio-mcp-demo/dice.html", visibility=["model", "app"])
async def roll_dice(ctx: Context, sides: int = 6, count: int = 2) -> ToolResult:
    """Roll dice; a host with MCP Apps shows them in the dice page, which can roll again.

    Args:
        sides: faces of each die (2 to 1000).
        count: how many dice (1 to 20).
    """
    if not (2 <= sides <= 1000 and 1 <= count <= 20):
        raise ToolError("sides is 2 to 1000 and count 1 to 20")
    rolls = [secrets.randbelow(sides) + 1 for _ in range(count)]
    text = f"Rolled {' + '.join(map(str, rolls))} = {sum(rolls)} on {count}d{sides}."
    if not apps_supported(ctx):
        # UI-FALLBACK: a host without MCP Apps shows this text alone, so it says everything.
        text += " (A host with MCP Apps shows these dice in a page.)"
    return ToolResult(
        content=[Text(text)],
        structured={"rolls": rolls, "total": sum(rolls), "sides": sides},
    )


server.add_app_resource(
    "ui://trio-mcp-demo/dice.html",
    DICE_PAGE,
    name="dice",
    title="Dice",
    description="Shows roll_dice's dice and rolls again through the host.",
    prefers_border=True,
)


# -- skills (SEP-2640): two skills made in code, served as skill:// resources ----------------

server.add_extension(Skills(
    Skill.from_files("structured-concurrency", {
        "SKILL.md": (
            "---\n"
            "name: structured-concurrency\n"
            "description: Write trio code whose tasks live in nurseries and end with them\n"
            "license: MIT\n"
            "metadata:\n"
            "  version: \"1.0\"\n"
            "---\n\n"
            "# Structured concurrency\n\n"
            "Open a nursery for every group of tasks; read references/cancellation.md before\n"
            "cancelling, and run examples/echo.py to see one.\n"
        ),
        "references/cancellation.md": (
            "# Cancellation\n\nA cancel scope ends every task inside it; a nursery waits for\n"
            "its children, so nothing outlives the block that started it.\n"
        ),
        "examples/echo.py": (
            "import trio\n\n\nasync def main() -> None:\n"
            "    async with trio.open_nursery() as nursery:\n"
            "        nursery.start_soon(trio.sleep, 0.1)\n\n\ntrio.run(main)\n"
        ),
    }),
    Skill.from_files("resume-a-stream", {
        "SKILL.md": (
            "---\n"
            "name: resume-a-stream\n"
            "description: Resume a dropped MCP SSE stream with Last-Event-ID, never replaying\n"
            "---\n\n"
            "# Resuming a stream\n\n"
            "Send the last event id you applied; see references/cursors.md for what the\n"
            "server answers when the cursor is older than its retention.\n"
        ),
        "references/cursors.md": (
            "# Cursors\n\nA cursor names its stream. One outside retention is an explicit\n"
            "failure, never a silent gap.\n"
        ),
    }),
))
