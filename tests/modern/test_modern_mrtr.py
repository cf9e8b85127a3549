# Multi round-trip requests over HTTP, end to end: a tool that needs the client's input answers
# input_required with its questions and a sealed requestState; the retry brings the answers and
# the state back and completes. A state that was altered, belongs to another request or has
# expired, and answers that are malformed, are refused in-band with -32602.
from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import trio
from support.client import Response
from support.fixtures import StartServer, wait_until
from support.modern import META_SERVER_INFO, call_tool, messages_of, modern_request, post

from trio_mcp import CacheHint, CacheScope, Context, Server, ServerConfig
from trio_mcp.runtime._stats import as_dict

TIMEOUT = 10

ELICIT = {"elicitation": {}}
ALL_CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}

NAME_FORM = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "Paris"},
    "model": "test-model",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


def result_of(response: Response, rid: Any) -> dict[str, Any]:
    """The result of a 200 JSON answer that echoes ``rid``."""
    assert 200 == response.status, response.body
    assert "application/json" == response.content_type
    body = response.json()
    assert rid == body["id"] and type(rid) is type(body["id"])
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def in_band_error(response: Response, rid: Any) -> dict[str, Any]:
    """The JSON-RPC error of an answer refused in-band: HTTP 200, the request's id."""
    assert 200 == response.status, (response.status, response.body)
    assert "application/json" == response.content_type
    body = response.json()
    assert rid == body["id"] and type(rid) is type(body["id"]), body
    assert "result" not in body, body
    error: dict[str, Any] = body["error"]
    return error


def asked(result: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The questions and requestState of an input_required result, checked for shape."""
    assert "input_required" == result["resultType"], result
    # MU-CACHE-4: an interim result carries no caching hints; and it has no content.
    assert "ttlMs" not in result and "cacheScope" not in result
    assert "content" not in result
    # ML-META-4: every result names the server, an interim one too.
    assert META_SERVER_INFO in result["_meta"], result
    questions: dict[str, Any] = result["inputRequests"]
    state = result["requestState"]
    assert isinstance(state, str) and state
    return questions, state


def tampered(state: str) -> str:
    """The state with one answer changed inside its (readable) body, tag left as it was."""
    body, _, tag = state.partition(".")
    raw = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw["r"] = {"user_name": accept(name="Mallory")}
    forged = base64.urlsafe_b64encode(json.dumps(raw).encode()).rstrip(b"=").decode()
    return f"{forged}.{tag}"


# -- the round trip ----------------------------------------------------------------------------


ROUND_TRIPS = [
    ("elicitation", "test_input_required_result_elicitation", ELICIT, "user_name",
     "elicitation/create", accept(name="Ada"), "Hello, Ada!"),
    ("sampling", "test_input_required_result_sampling", {"sampling": {}}, "capital_question",
     "sampling/createMessage", SAMPLED, "The model says: Paris"),
    ("roots", "test_input_required_result_list_roots", {"roots": {}}, "client_roots",
     "roots/list", ROOTS, "Roots: file:///test/root"),
    ("declined", "test_input_required_result_elicitation", ELICIT, "user_name",
     "elicitation/create", {"action": "decline"}, "No name given (decline)."),
    ("cancelled", "test_input_required_result_elicitation", ELICIT, "user_name",
     "elicitation/create", {"action": "cancel"}, "No name given (cancel)."),
]


@pytest.mark.spec(
    "MU-TOOL-5", "MU-MRTR-2", "MU-MRTR-5", "MU-MRTR-12", "MU-MRTR-13", "MU-CACHE-4",
    "MJ-RES-4", "TM-MRTR-STATE", "TM-MRTR-RERUN", "ML-STATE-3", "MJ-PAT-1", "ML-META-4",
    "MU-ELIC-4",
)
@pytest.mark.parametrize(
    ("label", "tool", "caps", "key", "method", "answer", "text"),
    ROUND_TRIPS,
    ids=[r[0] for r in ROUND_TRIPS],
)
async def test_input_required_then_a_retry_with_the_answer_completes(
    live_server: StartServer,
    label: str,
    tool: str,
    caps: dict[str, Any],
    key: str,
    method: str,
    answer: dict[str, Any],
    text: str,
) -> None:
    """input_required with one question and a state; the retry with the answer completes."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        first = await post(live.url, call_tool(tool, id=f"{label}-1", capabilities=caps))
        questions, state = asked(result_of(first, f"{label}-1"))
        retry = call_tool(
            tool, id=f"{label}-2", capabilities=caps,
            inputResponses={key: answer}, requestState=state,
        )
        second = await post(live.url, retry)

    assert [key] == list(questions)
    assert method == questions[key]["method"]
    if method == "elicitation/create":
        assert "form" == questions[key]["params"]["mode"]
        assert NAME_FORM == questions[key]["params"]["requestedSchema"]
    assert first.header("mcp-session-id") is None
    done = result_of(second, f"{label}-2")
    assert "complete" == done["resultType"]
    assert [{"type": "text", "text": text}] == done["content"]
    stats = live.app.runtime.modern.stats
    assert (2, 1) == (stats.requests, stats.input_required)


@pytest.mark.spec("MU-MRTR-13", "MU-MRTR-2", "TM-MRTR-RERUN")
async def test_a_prompt_may_ask_too(live_server: StartServer) -> None:
    """prompts/get of test_input_required_result_prompt asks for context, then renders."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        params = {"name": "test_input_required_result_prompt"}
        first = await post(live.url, modern_request("prompts/get", params, id=1,
                                                     capabilities=ELICIT))
        questions, state = asked(result_of(first, 1))
        retry = modern_request(
            "prompts/get",
            {**params, "inputResponses": {"user_context": accept(context="cats")},
             "requestState": state},
            id=2, capabilities=ELICIT,
        )
        second = await post(live.url, retry)

    assert ["user_context"] == list(questions)
    done = result_of(second, 2)
    assert "complete" == done["resultType"]
    assert "Write about: cats" in json.dumps(done["messages"])


@pytest.mark.spec("TM-MRTR-RERUN", "MU-MRTR-2", "TM-MRTR-STATE", "ML-STATE-3")
async def test_two_rounds_carry_the_first_answer_in_the_state(live_server: StartServer) -> None:
    """Two rounds: the second retry brings step2's answer, the state carries step1's."""
    tool = "test_input_required_result_multi_round"
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        r1 = await post(live.url, call_tool(tool, id="r1", capabilities=ELICIT))
        q1, s1 = asked(result_of(r1, "r1"))
        r2 = await post(live.url, call_tool(
            tool, id="r2", capabilities=ELICIT,
            inputResponses={"step1": accept(name="Ada")}, requestState=s1,
        ))
        q2, s2 = asked(result_of(r2, "r2"))
        r3 = await post(live.url, call_tool(
            tool, id="r3", capabilities=ELICIT,
            inputResponses={"step2": accept(color="blue")}, requestState=s2,
        ))

    assert ["step1"] == list(q1)
    assert ["step2"] == list(q2)
    assert s1 != s2
    assert [{"type": "text", "text": "Ada likes blue."}] == result_of(r3, "r3")["content"]


@pytest.mark.spec("MU-MRTR-10", "MU-MRTR-11", "MU-MRTR-9", "TM-MRTR-RERUN", "MU-MRTR-6")
async def test_missing_answers_are_asked_again_and_unknown_keys_are_ignored(
    live_server: StartServer,
) -> None:
    """Unanswered questions are asked again; answers nobody asked for are ignored."""
    # Three questions; the first retry answers one (plus keys nobody asked, one of them
    # malformed) and is asked the other two again; the second retry completes.
    tool = "test_input_required_result_multiple_inputs"
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        r1 = await post(live.url, call_tool(tool, id=1, capabilities=ALL_CAPS))
        q1, s1 = asked(result_of(r1, 1))
        r2 = await post(live.url, call_tool(
            tool, id=2, capabilities=ALL_CAPS, requestState=s1,
            inputResponses={
                "user_name": accept(name="Ada"),
                "not_asked": {"anything": True},
                "also_not_asked": 12345,
            },
        ))
        q2, s2 = asked(result_of(r2, 2))
        r3 = await post(live.url, call_tool(
            tool, id=3, capabilities=ALL_CAPS, requestState=s2,
            inputResponses={"greeting": SAMPLED, "client_roots": ROOTS, "extra": None},
        ))

    assert {"user_name", "greeting", "client_roots"} == set(q1)
    assert {"elicitation/create", "sampling/createMessage", "roots/list"} == {
        q["method"] for q in q1.values()
    }
    assert {"greeting", "client_roots"} == set(q2)
    assert q1["greeting"] == q2["greeting"] and q1["client_roots"] == q2["client_roots"]
    assert [{"type": "text", "text": "Ada; greeting received; roots: file:///test/root"}] == (
        result_of(r3, 3)["content"]
    )


@pytest.mark.spec("MT-SSE-3", "MJ-PAT-1", "MU-MRTR-12", "MT-SSE-4")
async def test_input_required_after_progress_is_the_streams_last_message(
    live_server: StartServer,
) -> None:
    """After progress, input_required is the SSE stream's last message; no server request."""
    server = Server("ask-after-progress")

    @server.tool()
    async def progress_then_ask(ctx: Context) -> str:
        """Report progress, then ask the user's name."""
        await ctx.report_progress(1, 2, "working")
        answer = await ctx.elicit("Name?", NAME_FORM, key="n")
        return f"hello {(answer.content or {}).get('name')}"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server)
        message = call_tool("progress_then_ask", id="pa", capabilities=ELICIT,
                            progress_token="pa")
        response = await post(live.url, message)

    assert 200 == response.status and "text/event-stream" == response.content_type
    assert not response.truncated
    progress, final = messages_of(response)
    assert "notifications/progress" == progress["method"] and "id" not in progress
    assert "pa" == final["id"] and "method" not in final
    questions, _ = asked(final["result"])
    assert ["n"] == list(questions)


@pytest.mark.spec("ML-TIME-1", "MJ-PAT-1", "MU-MRTR-12")
async def test_nothing_is_left_waiting_for_an_answer_so_nothing_needs_a_timeout(
    live_server: StartServer,
) -> None:
    """With an hour's client_request_timeout, questions come back at once; nothing waits."""
    server = Server("no-waiting")

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        """Ask the user's name."""
        answer = await ctx.elicit("Name?", NAME_FORM, key="n")
        return f"hello {(answer.content or {}).get('name')}"

    @server.tool()
    async def ping_client(ctx: Context) -> str:
        """Try to send the client a request of the legacy kind."""
        await ctx.ping()
        return "pong"

    with trio.fail_after(TIMEOUT):
        live = await live_server(server, ServerConfig(client_request_timeout=3600))
        runtime = live.app.runtime
        question = await post(live.url, call_tool("ask_name", id="t-1", capabilities=ELICIT))
        ping = await post(live.url, call_tool("ping_client", id="t-2"))
        # Both exchanges end with their answers: none stays behind to wait for the client.
        await wait_until(lambda: 0 == as_dict(runtime.statistics())["modern_requests_running"])

    # The question is the answer: nothing went to the client to be waited for.
    questions, _ = asked(result_of(question, "t-1"))
    assert ["n"] == list(questions)
    # A request to the client is refused at once, not sent and timed.
    error = in_band_error(ping, "t-2")
    assert -32603 == error["code"]
    assert "servers send no requests" in error["message"]


# -- refused state -------------------------------------------------------------------------------


@pytest.mark.spec(
    "MU-MRTR-3", "MT-SEC-6", "TM-MRTR-ERRORS", "TM-MRTR-STATE", "MJ-ERR-1", "MU-MRTR-14"
)
@pytest.mark.parametrize("how", ["answers changed", "tag flipped", "truncated", "not a string",
                                 "empty", "garbage"])
async def test_a_tampered_request_state_is_refused_in_band(
    live_server: StartServer, how: str
) -> None:
    """A requestState that does not verify: 200 with -32602 and data.reason."""
    tool = "test_input_required_result_tampered_state"
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        first = await post(live.url, call_tool(tool, id="t-1", capabilities=ELICIT))
        _, state = asked(result_of(first, "t-1"))
        bad: Any = {
            "answers changed": tampered(state),
            "tag flipped": state[:-2] + ("AA" if state[-2:] != "AA" else "BB"),
            "truncated": state[: len(state) // 2],
            "not a string": 12345,
            "empty": "",
            "garbage": "not-a-state",
        }[how]
        retry = call_tool(tool, id="t-2", capabilities=ELICIT, requestState=bad,
                          inputResponses={"confirm": accept(ok=True)})
        response = await post(live.url, retry)

    error = in_band_error(response, "t-2")
    assert -32602 == error["code"]
    assert "invalid_request_state" == error["data"]["reason"]


@pytest.mark.spec("MU-MRTR-7", "MU-MRTR-3", "TM-MRTR-STATE", "TM-MRTR-ERRORS")
@pytest.mark.parametrize("where", ["other tool", "other arguments", "other method"])
async def test_a_state_is_refused_on_any_request_but_a_retry_of_its_own(
    live_server: StartServer, where: str
) -> None:
    """A state is refused on another tool, other arguments or another method."""
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        origin = call_tool("test_elicitation", {"message": "first"}, id="o", capabilities=ELICIT)
        _, state = asked(result_of(await post(live.url, origin), "o"))
        extra: dict[str, Any] = {"requestState": state, "inputResponses": {}}
        if where == "other tool":
            retry = call_tool("test_input_required_result_tampered_state", id="x",
                              capabilities=ELICIT, **extra)
        elif where == "other arguments":
            retry = call_tool("test_elicitation", {"message": "second"}, id="x",
                              capabilities=ELICIT, **extra)
        else:
            retry = modern_request(
                "prompts/get", {"name": "test_input_required_result_prompt", **extra},
                id="x", capabilities=ELICIT,
            )
        response = await post(live.url, retry)
        # The same state on its own request is still good.
        own = await post(live.url, dict(origin, id="o-2", params={
            **origin["params"], "requestState": state,
            "inputResponses": {"elicitation-1": accept(username="ada", email="a@example.com")},
        }))

    error = in_band_error(response, "x")
    assert -32602 == error["code"]
    assert "request_state_mismatch" == error["data"]["reason"]
    assert "complete" == result_of(own, "o-2")["resultType"]


@pytest.mark.slow
@pytest.mark.spec("MU-MRTR-7", "TM-MRTR-STATE", "TM-MRTR-ERRORS")
async def test_an_expired_state_is_refused(live_server: StartServer) -> None:
    """A state older than request_state_ttl is refused in-band with -32602."""
    tool = "test_input_required_result_request_state"
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(request_state_ttl=0.2))
        _, state = asked(result_of(
            await post(live.url, call_tool(tool, id=1, capabilities=ELICIT)), 1
        ))
        answer = {"confirm": accept(ok=True)}
        at_once = await post(live.url, call_tool(tool, id=2, capabilities=ELICIT,
                                                 requestState=state, inputResponses=answer))
        await trio.sleep(1.0)
        late = await post(live.url, call_tool(tool, id=3, capabilities=ELICIT,
                                              requestState=state, inputResponses=answer))

    assert [{"type": "text", "text": "state-ok: confirmed"}] == result_of(at_once, 2)["content"]
    error = in_band_error(late, 3)
    assert -32602 == error["code"]
    assert "request_state_expired" == error["data"]["reason"]


# -- malformed answers ----------------------------------------------------------------------


MALFORMED = [
    ("inputResponses null", None),
    ("inputResponses a number", 12345),
    ("inputResponses a list", [accept(name="Ada")]),
    ("answer a number", {"user_name": 12345}),
    ("answer null", {"user_name": None}),
    ("answer without action", {"user_name": {"content": {"name": "Ada"}}}),
    ("accept without content", {"user_name": {"action": "accept"}}),
    ("content off the schema", {"user_name": accept(nickname="Ada")}),
    ("name not a string", {"user_name": accept(name=12345)}),
]


@pytest.mark.spec("MU-MRTR-4", "TM-MRTR-ERRORS", "TM-MRTR-VALIDATE", "MJ-ERR-1", "MJ-ERR-4")
@pytest.mark.parametrize(("label", "responses"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_malformed_input_responses_are_refused_in_band(
    live_server: StartServer, label: str, responses: Any
) -> None:
    """Malformed inputResponses or answers: 200 with -32602 and data.reason."""
    tool = "test_input_required_result_elicitation"
    with trio.fail_after(TIMEOUT):
        live = await live_server()
        _, state = asked(result_of(
            await post(live.url, call_tool(tool, id="m-1", capabilities=ELICIT)), "m-1"
        ))
        retry = call_tool(tool, id="m-2", capabilities=ELICIT, requestState=state,
                          inputResponses=responses)
        response = await post(live.url, retry)

    error = in_band_error(response, "m-2")
    assert -32602 == error["code"], label
    data = error.get("data")
    assert isinstance(data, dict) and isinstance(data.get("reason"), str), (label, error)
    if isinstance(responses, dict):
        assert {"reason": "invalid_input_response", "key": "user_name"} == data


@pytest.mark.spec("ML-STATE-2", "TM-MRTR-STATE")
@pytest.mark.parametrize("shared", [True, False], ids=["shared-key", "own-keys"])
async def test_a_retry_may_reach_another_process_that_shares_the_state_key(
    live_server: StartServer, shared: bool
) -> None:
    """Two servers configured with the same request_state_key each accept the other's
    requestState, so a retry need not reach the process that asked; without it, each keeps
    a key of its own and refuses the other's state."""
    tool = "test_input_required_result_multi_round"
    key = bytes(range(32))
    config = ServerConfig(request_state_key=key) if shared else ServerConfig()
    with trio.fail_after(TIMEOUT):
        first = await live_server(config=config)
        second = await live_server(config=config)
        r1 = await post(first.url, call_tool(tool, id="a1", capabilities=ELICIT))
        _, state = asked(result_of(r1, "a1"))
        retry = call_tool(
            tool, id="a2", capabilities=ELICIT,
            inputResponses={"step1": accept(name="Ada")}, requestState=state,
        )
        r2 = await post(second.url, retry)

    if shared:
        assert ["step2"] == list(asked(result_of(r2, "a2"))[0])
    else:
        assert "invalid_request_state" == in_band_error(r2, "a2")["data"]["reason"]


def test_a_request_state_key_shorter_than_32_bytes_is_refused() -> None:
    """A requestState key is an HMAC-SHA256 key of at least 32 bytes."""
    with pytest.raises(ValueError, match="32 bytes"):
        ServerConfig(request_state_key=b"short")


# -- caching ----------------------------------------------------------------------------------


PUBLIC_MINUTE = CacheHint(ttl_ms=60_000, scope=CacheScope.PUBLIC)


def _noted_server() -> Server:
    """A resource whose text depends on who the client says it is (by elicitation), and
    one that depends on nothing."""
    server = Server("cache-tests")

    @server.resource("test://note", mime_type="text/plain")
    async def note(ctx: Context) -> str:
        answer = await ctx.elicit("Who are you?", NAME_FORM, key="who")
        return f"private note of {(answer.content or {}).get('name')}"

    @server.resource("test://motd", mime_type="text/plain")
    async def motd() -> str:
        return "hello, everyone"

    return server


def _read(uri: str, rid: str, **params: Any) -> dict[str, Any]:
    return modern_request("resources/read", {"uri": uri, **params}, id=rid, capabilities=ELICIT)


def _hints(result: dict[str, Any]) -> tuple[Any, Any]:
    return result.get("ttlMs"), result.get("cacheScope")


@pytest.mark.spec("MU-CACHE-6", "MU-CACHE-1", "TM-CACHE-DEFAULT")
async def test_the_result_of_an_mrtr_retry_is_never_cacheable(live_server: StartServer) -> None:
    """With a public hint of a minute configured, a plain read carries it, but a read that
    completes by retrying with inputResponses, with or without the requestState, carries
    ttlMs 0 and private: it depends on answers no cache key holds."""
    config = ServerConfig(cache_hint=PUBLIC_MINUTE)
    with trio.fail_after(TIMEOUT):
        live = await live_server(_noted_server(), config)
        plain = result_of(await post(live.url, _read("test://motd", "p")), "p")
        _, state = asked(result_of(await post(live.url, _read("test://note", "r1")), "r1"))
        answer = {"who": accept(name="Alice")}
        both = result_of(await post(live.url, _read(
            "test://note", "r2", inputResponses=answer, requestState=state)), "r2")
        answers_only = result_of(await post(live.url, _read(
            "test://note", "r3", inputResponses=answer)), "r3")

    assert (60_000, "public") == _hints(plain)
    assert "private note of Alice" == both["contents"][0]["text"]
    assert "private note of Alice" == answers_only["contents"][0]["text"]
    for retried in (both, answers_only):
        assert (0, "private") == _hints(retried), retried


@pytest.mark.spec("TM-CACHE-DEFAULT", "MU-CACHE-3")
async def test_each_cacheable_method_may_have_hints_of_its_own(live_server: StartServer) -> None:
    """cache_hints gives tools/list a public hint while resources/read keeps the default
    (0, private) and server/discover the server-wide one; a method that is not cacheable is
    refused when the configuration is made."""
    config = ServerConfig(
        cache_hint=CacheHint(ttl_ms=5),
        cache_hints={"tools/list": PUBLIC_MINUTE, "resources/read": CacheHint()},
    )
    with trio.fail_after(TIMEOUT):
        live = await live_server(_noted_server(), config)
        tools = result_of(await post(live.url, modern_request("tools/list", id="t")), "t")
        read = result_of(await post(live.url, _read("test://motd", "m")), "m")
        discover = result_of(await post(live.url, modern_request("server/discover", id="d")),
                             "d")

    assert (60_000, "public") == _hints(tools)
    assert (0, "private") == _hints(read)
    assert (5, "private") == _hints(discover)
    with pytest.raises(ValueError, match="tools/call"):
        ServerConfig(cache_hints={"tools/call": PUBLIC_MINUTE})
