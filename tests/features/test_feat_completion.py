"""Argument completion (completion/complete)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import pytest
import trio
from feat_support import error_of

from trio_mcp import Completion, CompletionRef, Context, Server


def completion_server() -> tuple[Server, list[object]]:
    server = Server("completion-tests")
    calls: list[object] = []

    @server.prompt()
    async def greet(name: str, language: Literal["en", "fr", "es"] = "en") -> str:
        """Greets someone."""
        return f"{language}: hello {name}"

    @server.prompt()
    async def plain(topic: str) -> str:
        """No completion for topic."""
        return topic

    @server.resource("db://{table}/{row}")
    async def row(table: str, row: str) -> str:
        """A row of a table."""
        return f"{table}/{row}"

    @server.completion("prompt", "greet", "name")
    async def names(value: str, arguments: Mapping[str, str], ctx: Context) -> list[str]:
        calls.append((value, dict(arguments), ctx.method))
        return [n for n in ("alice", "alfred", "bob") if n.startswith(value)]

    @server.completion("resource", "db://{table}/{row}", "table")
    async def tables(value: str) -> Completion:
        return Completion(values=["users"], total=12, has_more=True)

    @server.completion("resource", "db://{table}/{row}", "row")
    async def rows(value: str) -> list[str]:
        return [str(i) for i in range(250)]

    return server, calls


def ref_prompt(name: str) -> dict[str, str]:
    return {"type": "ref/prompt", "name": name}


@pytest.mark.spec("U-COMP-1")
async def test_a_specific_handler_completes_a_prompt_argument(autojump_clock, connect):
    """completion/complete for a prompt argument with a handler returns its values; the
    handler sees the value, the other arguments already given and the context."""
    server, calls = completion_server()
    s = await connect(server)
    assert s.server_capabilities["completions"] == {}
    with trio.fail_after(10):
        result = await s.request(
            "completion/complete",
            {
                "ref": ref_prompt("greet"),
                "argument": {"name": "name", "value": "al"},
                "context": {"arguments": {"language": "fr"}},
            },
        )
        assert result == {"completion": {"values": ["alice", "alfred"]}}
        assert calls == [("al", {"language": "fr"}, "completion/complete")]


@pytest.mark.spec("U-COMP-2")
async def test_resource_template_variables_and_the_100_value_cap(autojump_clock, connect):
    """A template variable completes through its handler; a Completion carries total and
    hasMore; a list longer than 100 is cut to 100 with total and hasMore: true."""
    server, _ = completion_server()
    s = await connect(server)
    ref = {"type": "ref/resource", "uri": "db://{table}/{row}"}
    with trio.fail_after(10):
        result = await s.request(
            "completion/complete", {"ref": ref, "argument": {"name": "table", "value": "u"}}
        )
        assert result == {"completion": {"values": ["users"], "total": 12, "hasMore": True}}
        result = await s.request(
            "completion/complete", {"ref": ref, "argument": {"name": "row", "value": ""}}
        )
        completion = result["completion"]
        assert len(completion["values"]) == 100
        assert completion["total"] == 250 and completion["hasMore"] is True


@pytest.mark.spec("U-COMP-4")
async def test_no_handler_means_no_values_or_the_literal_choices(autojump_clock, connect):
    """Without a handler an argument has no suggestions (an empty list); a Literal[...]
    argument completes from its allowed values by prefix."""
    server, _ = completion_server()
    s = await connect(server)
    with trio.fail_after(10):
        result = await s.request(
            "completion/complete",
            {"ref": ref_prompt("plain"), "argument": {"name": "topic", "value": "x"}},
        )
        assert result == {"completion": {"values": []}}
        result = await s.request(
            "completion/complete",
            {"ref": ref_prompt("greet"), "argument": {"name": "language", "value": "f"}},
        )
        assert result == {"completion": {"values": ["fr"]}}


async def test_a_generic_handler_takes_the_rest(autojump_clock, connect):
    """A @server.complete() handler answers every argument without a specific handler; when
    it returns None the answer is empty."""
    server, _ = completion_server()
    seen: list[tuple[CompletionRef, str, str]] = []

    @server.complete()
    async def anything(
        ref: CompletionRef, argument: str, value: str, arguments: Mapping[str, str]
    ) -> list[str] | None:
        seen.append((ref, argument, value))
        return [value + "!"] if argument == "topic" else None

    s = await connect(server)
    with trio.fail_after(10):
        result = await s.request(
            "completion/complete",
            {"ref": ref_prompt("plain"), "argument": {"name": "topic", "value": "x"}},
        )
        assert result == {"completion": {"values": ["x!"]}}
        result = await s.request(
            "completion/complete",
            {"ref": ref_prompt("greet"), "argument": {"name": "name", "value": "b"}},
        )
        assert result == {"completion": {"values": ["bob"]}}  # the specific handler wins
        assert seen == [(CompletionRef(type="prompt", name="plain"), "topic", "x")]


@pytest.mark.parametrize(
    "params",
    [
        {"ref": ref_prompt("nope"), "argument": {"name": "a", "value": ""}},
        {
            "ref": {"type": "ref/resource", "uri": "db://nope"},
            "argument": {"name": "a", "value": ""},
        },
        {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}},
        {"ref": ref_prompt("greet")},
        {"ref": ref_prompt("greet"), "argument": {"name": "name"}},
        {"argument": {"name": "a", "value": ""}},
    ],
)
@pytest.mark.spec("U-COMP-3", "U-COMP-4", "U-COMP-5")
async def test_invalid_completion_requests(autojump_clock, connect, params):
    """An unknown prompt or template, or a malformed ref or argument, is -32602."""
    server, _ = completion_server()
    s = await connect(server)
    with trio.fail_after(10):
        assert (await error_of(s, "completion/complete", params))["code"] == -32602


@pytest.mark.spec("U-COMP-1", "U-COMP-3")
async def test_no_completions_capability_without_prompts_or_templates(autojump_clock, connect):
    """A server with neither prompts nor templates declares no completions capability, and
    completion/complete is -32601 there."""
    s = await connect(Server("bare"))
    assert "completions" not in s.server_capabilities
    with trio.fail_after(10):
        error = await error_of(s,
            "completion/complete",
            {"ref": ref_prompt("x"), "argument": {"name": "a", "value": ""}},
        )
        assert error["code"] == -32601
