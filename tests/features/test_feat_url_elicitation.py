# URL-mode elicitation (issue 40, spec/handlers.md TM-HAND-URLELICIT): ctx.elicit_url asks
# the user to open a URL, in both eras; ctx.elicitation_complete says the interaction is
# done; UrlElicitationRequired answers -32042 with well-formed elicitations in a session.
from __future__ import annotations

from typing import Any

import pytest
import trio
from support.client import open_session, rpc_messages
from support.fixtures import StartServer
from support.modern import call_tool, messages_of, post

from trio_mcp import Context, Server, UrlElicitationRequired

TIMEOUT = 20
URL_CAPS = {"elicitation": {"url": {}}}

pytestmark = pytest.mark.spec("TM-HAND-URLELICIT")


def url_server() -> Server:
    server = Server("urls")

    @server.tool()
    async def connect(ctx: Context) -> str:
        """Send the user to authorize the connection."""
        answer = await ctx.elicit_url(
            "Authorize access to your calendar", "https://example.com/oauth?state=1",
            elicitation_id="cal-1", key="authorize",
        )
        return f"{answer.action} {answer.elicitation_id}"

    @server.tool()
    async def finish(ctx: Context) -> str:
        """Say the authorization finished."""
        sent = await ctx.elicitation_complete("cal-1")
        return f"sent {sent}"

    @server.tool()
    async def guarded() -> str:
        """Needs the user at a URL first."""
        raise UrlElicitationRequired([("Sign in first", "https://example.com/login", "login-7")])

    return server


@pytest.mark.spec("MU-ELIC-3", "MU-ELIC-1")
async def test_a_modern_tool_asks_in_url_mode_and_gets_the_answer_on_retry(
    live_server: StartServer,
) -> None:
    """A 2026-07-28 call answers input_required with a URL-mode question carrying the URL,
    the message and the id; the retry with the user's accept completes with that id."""
    live = await live_server(url_server())
    with trio.fail_after(TIMEOUT):
        first = (await post(live.url, call_tool("connect", capabilities=URL_CAPS))).json()
        question = first["result"]["inputRequests"]["authorize"]
        retry = call_tool("connect", capabilities=URL_CAPS,
                          inputResponses={"authorize": {"action": "accept"}},
                          requestState=first["result"]["requestState"])
        second = (await post(live.url, retry)).json()
    assert "elicitation/create" == question["method"]
    assert {"mode": "url", "message": "Authorize access to your calendar",
            "url": "https://example.com/oauth?state=1", "elicitationId": "cal-1"} == (
        question["params"]
    )
    assert "accept cal-1" == second["result"]["content"][0]["text"]


async def test_a_client_without_url_mode_is_refused_before_anything_is_asked(
    live_server: StartServer,
) -> None:
    """A client that declared form elicitation only gets -32021 naming elicitation.url."""
    live = await live_server(url_server())
    with trio.fail_after(TIMEOUT):
        answer = await post(live.url, call_tool("connect", capabilities={"elicitation": {}}))
    error = answer.json()["error"]
    assert -32021 == error["code"] and "url" in str(error.get("data")), error


@pytest.mark.spec("J-ERR-6", "J-ERR-7")
async def test_url_elicitation_required_is_32042_with_url_mode_elicitations_in_a_session(
    live_server: StartServer,
) -> None:
    """UrlElicitationRequired answers -32042 whose data lists URL-mode elicitations, each
    with its id; the completion notice goes out on the request's stream."""
    live = await live_server(url_server())
    with trio.fail_after(TIMEOUT):
        session = await open_session(live.url, capabilities=URL_CAPS)
        guarded = await session.call("tools/call", {"name": "guarded", "arguments": {}})
        message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": "finish", "arguments": {}}}
        finished = rpc_messages(await session.post(message))
    assert -32042 == guarded["error"]["code"]
    assert [{"mode": "url", "message": "Sign in first", "url": "https://example.com/login",
             "elicitationId": "login-7"}] == guarded["error"]["data"]["elicitations"]
    notice: dict[str, Any] = finished[0]
    assert {"method": "notifications/elicitation/complete",
            "params": {"elicitationId": "cal-1"}} == {k: notice[k] for k in ("method", "params")}
    assert "sent True" == finished[-1]["result"]["content"][0]["text"]


@pytest.mark.spec("TM-MOD-URLELICIT")
async def test_url_elicitation_required_in_the_modern_era_is_an_internal_error(
    live_server: StartServer,
) -> None:
    """-32042 is no answer of the 2026-07-28 era: a handler raising it gets -32603 there."""
    live = await live_server(url_server())
    with trio.fail_after(TIMEOUT):
        answer = messages_of(await post(live.url, call_tool("guarded", capabilities=URL_CAPS)))
    assert -32603 == answer[-1]["error"]["code"]


def test_a_url_elicitation_needs_an_https_url_and_an_id() -> None:
    """Plain http (but to loopback), a javascript: URL, or an empty id are refused."""
    for url in ("http://example.com/x", "javascript:alert(1)"):
        with pytest.raises(ValueError, match="https URL"):
            UrlElicitationRequired([("m", url, "id")])
    with pytest.raises(ValueError, match="elicitation id"):
        UrlElicitationRequired([("m", "https://example.com", "")])
    UrlElicitationRequired([("m", "http://127.0.0.1:8080/cb", "id")])
