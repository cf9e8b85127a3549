# Middleware (issue 40, spec/handlers.md TM-HAND-MIDDLEWARE, TM-HAND-MW-ORDER), in both eras
# (over loopback, and through trio_mcp.Client(server) where only its answer is in question):
# it wraps every request the application answers, first outermost, sees the method, params
# and era, may answer in the handler's place, and is cancelled with its
# request.

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
import trio
from feat_support import Connect, InProcess
from support.client import (
    dumps,
    initialize_params,
    open_session,
    post_headers,
    request,
    rpc_messages,
    rpc_request,
)
from support.eras import ERAS, LEGACY, rpc
from support.fixtures import StartServer, wait_until
from support.modern import call_tool, modern_headers, modern_request, open_raw

from trio_mcp import AuditLog, CallNext, Context, McpError, RateLimit, Server
from trio_mcp.app._guards import _address_key, caller_of

TIMEOUT = 20


def middleware_server(log: list[str]) -> Server:
    async def outer(ctx: Context, call_next: CallNext) -> Mapping[str, Any]:
        log.append(f"outer in {ctx.method} {ctx.era.value}")
        result = await call_next()
        log.append("outer out")
        return result

    server = Server("mw", middleware=[outer])

    @server.middleware
    async def inner(ctx: Context, call_next: CallNext) -> Mapping[str, Any]:
        name = ctx.params.get("name")
        log.append(f"inner in {name}")
        if name == "blocked":
            raise McpError(-31900, "Blocked by policy", data={"retryAfterMs": 250})
        if name == "cached":
            return {"content": [{"type": "text", "text": "from the cache"}]}
        if name == "forgetful":
            return None  # type: ignore[return-value]
        try:
            return await call_next()
        except trio.Cancelled:
            log.append("inner cancelled")
            raise
        finally:
            log.append("inner out")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        log.append("handler")
        return text

    @server.tool()
    async def slow() -> str:
        """Never ends."""
        log.append("slow started")
        await trio.sleep_forever()
        return ""

    @server.tool()
    async def blocked() -> str:
        """Never runs."""
        raise AssertionError("the middleware answers for it")

    @server.tool()
    async def cached() -> str:
        """Never runs."""
        raise AssertionError("the middleware answers for it")

    @server.tool()
    async def forgetful() -> str:
        """Runs; its middleware drops the result."""
        return "lost"

    @server.prompt()
    async def greet(name: str) -> str:
        """A greeting."""
        return f"Hello {name}"

    return server


@pytest.mark.spec("TM-HAND-MIDDLEWARE", "TM-HAND-MW-ORDER")
@pytest.mark.parametrize("era", ERAS)
async def test_middleware_wraps_every_request_first_outermost(
    live_server: StartServer, era: str
) -> None:
    """A tools/call, a tools/list and a prompts/get each pass through both middlewares,
    the constructor's outside the decorated one, which see the method, params and era."""
    log: list[str] = []
    live = await live_server(middleware_server(log))
    with trio.fail_after(TIMEOUT):
        called = await rpc(
            live.url, era, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}
        )
        listed = await rpc(live.url, era, "tools/list")
        prompt = await rpc(
            live.url, era, "prompts/get", {"name": "greet", "arguments": {"name": "A"}}
        )
    assert "hi" == called["result"]["content"][0]["text"]
    assert "tools" in listed["result"] and "messages" in prompt["result"]
    label = "legacy" if era == LEGACY else "modern"
    assert [
        f"outer in tools/call {label}", "inner in echo", "handler", "inner out", "outer out",
        f"outer in tools/list {label}", "inner in None", "inner out", "outer out",
        f"outer in prompts/get {label}", "inner in greet", "inner out", "outer out",
    ] == log


@pytest.mark.spec("TM-HAND-MIDDLEWARE")
@pytest.mark.parametrize("era", ERAS)
async def test_middleware_answers_in_the_handlers_place(
    connect: Connect, era: str
) -> None:
    """A middleware may answer with a result of its own, or with a JSON-RPC error by
    raising McpError (its code, message and data); one that returns no result is -32603."""
    log: list[str] = []
    served = InProcess(connect, middleware_server(log))
    with trio.fail_after(TIMEOUT):
        cached = await served.rpc(era, "tools/call", {"name": "cached", "arguments": {}})
        blocked = await served.rpc(era, "tools/call", {"name": "blocked", "arguments": {}})
        lost = await served.rpc(era, "tools/call", {"name": "forgetful", "arguments": {}})
    assert "from the cache" == cached["result"]["content"][0]["text"]
    assert {"code": -31900, "message": "Blocked by policy", "data": {"retryAfterMs": 250}} == (
        blocked["error"]
    )
    assert -32603 == lost["error"]["code"]


@pytest.mark.spec("TM-HAND-MIDDLEWARE")
async def test_a_requests_cancellation_reaches_its_middleware(live_server: StartServer) -> None:
    """A 2026-07-28 client that drops its connection cancels the request: the middleware
    around it sees trio.Cancelled, and its own clean-up runs."""
    log: list[str] = []
    live = await live_server(middleware_server(log))
    with trio.fail_after(TIMEOUT):
        async with open_raw(live.url, call_tool("slow")):
            await wait_until(lambda: "slow started" in log)
        await wait_until(lambda: "inner out" in log)
    assert ["inner cancelled", "inner out"] == log[-2:]
    assert "outer out" not in log


def test_middleware_must_be_an_async_function_of_two_arguments() -> None:
    """A sync function, or one of the wrong arity, is refused when it is registered."""
    server = Server("mw")

    def sync(ctx: Context, call_next: CallNext) -> Any:
        return None

    async def one(ctx: Context) -> Any:
        return None

    with pytest.raises(TypeError, match="must be an async function"):
        server.middleware(sync)
    with pytest.raises(TypeError, match="two arguments"):
        server.middleware(one)


def guarded_server() -> Server:
    server = Server("guarded", middleware=[
        AuditLog(), RateLimit(rate=0.5, burst=2, methods={"tools/call"}),
    ])

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return server


@pytest.mark.spec("TM-HAND-RATE", "TM-HAND-AUDIT", "U-TOOL-8", "MU-TOOL-6")
@pytest.mark.parametrize("era", ERAS)
async def test_a_caller_past_its_rate_is_told_when_to_retry_and_audited(
    live_server: StartServer, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With a burst of 2, a caller's third quick tools/call is refused with -31005 and
    data.retryAfterMs (its handler never runs); tools/list, not limited, still passes; the
    audit log has a line per request with its outcome and never the arguments."""
    live = await live_server(guarded_server())
    with caplog.at_level(logging.INFO, logger="trio_mcp.audit"), trio.fail_after(TIMEOUT):
        if era == LEGACY:
            session = await open_session(live.url)
            answers = [await session.call("tools/call", {"name": "echo",
                                                         "arguments": {"text": "secret"}})
                       for _ in range(3)]
            listed = await session.call("tools/list")
        else:
            answers = [await rpc(live.url, era, "tools/call",
                                 {"name": "echo", "arguments": {"text": "secret"}})
                       for _ in range(3)]
            listed = await rpc(live.url, era, "tools/list")
    assert ["secret", "secret"] == [a["result"]["content"][0]["text"] for a in answers[:2]]
    error = answers[2]["error"]
    assert -31005 == error["code"] and 0 < error["data"]["retryAfterMs"] <= 2000
    assert "tools" in listed["result"]
    lines = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.audit"]
    assert 4 == len(lines), lines
    assert lines[0].startswith("tools/call 'echo' by ") and ": ok in " in lines[0]
    assert ": error -31005 in " in lines[2] and ": ok in " in lines[3]
    assert not any("secret" in line for line in lines)


@pytest.mark.spec("TM-HAND-RATE")
def test_the_rate_limit_keeps_at_most_max_callers_buckets() -> None:
    """A client inventing callers fills no memory: past max_callers, the least recently
    used bucket is dropped (and its caller starts afresh)."""
    limit = RateLimit(rate=1, burst=1, max_callers=3)
    for n in range(1000):
        assert 0 == limit._take(f"caller {n}", 0.0)
    assert 3 == len(limit._buckets)
    assert 1.0 == limit._take("caller 999", 0.0)
    assert 0 == limit._take("caller 0", 0.0)


async def _call_from(url: str, era: str, source: str, name: str) -> dict[str, Any]:
    """One tools/call of ``name`` on connections bound to ``source`` (a loopback address): in
    a new session in the legacy era. The JSON-RPC answer."""
    if era == LEGACY:
        init = await request(url, "POST", post_headers(), dumps(rpc_request(
            "initialize", initialize_params(LEGACY, None))), local=source)
        headers = post_headers(extra=[("mcp-session-id", init.header("mcp-session-id") or ""),
                                      ("mcp-protocol-version", LEGACY)])
        await request(url, "POST", headers, dumps(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}), local=source)
        message = rpc_request("tools/call", {"name": name, "arguments": {}})
    else:
        message = modern_request("tools/call", {"name": name, "arguments": {}})
        headers = modern_headers(message)
    response = await request(url, "POST", headers, dumps(message), local=source)
    [answer] = [m for m in rpc_messages(response) if m.get("id") == message["id"]]
    return answer


@pytest.mark.spec("TM-HAND-PEER", "TM-HAND-RATE-KEY")
@pytest.mark.parametrize("era", ERAS)
async def test_anonymous_callers_are_rate_limited_by_their_address(
    live_server: StartServer, era: str
) -> None:
    """Two anonymous clients on 127.0.0.1 and 127.0.0.2: the first spends its burst and is
    refused -31005, the second is still served; the middleware sees each one's address (in
    the legacy era, a new session does not buy a new bucket)."""
    server = Server("peers", middleware=[RateLimit(rate=0.01, burst=2, methods={"tools/call"})])

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """The caller's address and rate-limit key."""
        return f"{ctx.peer} {caller_of(ctx)}"

    live = await live_server(server)
    with trio.fail_after(TIMEOUT):
        first = [await _call_from(live.url, era, "127.0.0.1", "whoami") for _ in range(3)]
        second = await _call_from(live.url, era, "127.0.0.2", "whoami")
    assert ["127.0.0.1 ip:127.0.0.1"] * 2 == [a["result"]["content"][0]["text"]
                                              for a in first[:2]], first
    assert -31005 == first[2]["error"]["code"]
    assert "127.0.0.2 ip:127.0.0.2" == second["result"]["content"][0]["text"], second


@pytest.mark.spec("TM-HAND-RATE-KEY")
def test_an_ipv6_client_is_limited_by_its_64() -> None:
    """The addresses of one IPv6 /64 share a bucket (one host is given a whole /64); an
    IPv4-mapped address is its IPv4 address."""
    assert _address_key("2001:db8:1:2::5") == _address_key("2001:db8:1:2:ffff::9")
    assert _address_key("2001:db8:1:2::5") != _address_key("2001:db8:1:3::5")
    assert "ip:192.0.2.7" == _address_key("::ffff:192.0.2.7")


@pytest.mark.spec("TM-HAND-RATE-BOUND")
def test_the_rate_limit_drops_idle_buckets_and_holds_10000_addresses_at_most() -> None:
    """10,000 addresses (then 10,000 more) each spending a token keep at most max_callers
    buckets; once they have been idle burst / rate seconds, the next caller finds only its own
    bucket left; a caller still short of tokens keeps its bucket."""
    limit = RateLimit(rate=2, burst=4, max_callers=5_000)
    for n in range(20_000):
        assert 0 == limit._take(f"ip:10.{n >> 16}.{(n >> 8) & 255}.{n & 255}", n * 1e-5)
        assert len(limit) <= 5_000
    assert 5_000 == len(limit)
    for _ in range(5):
        limit._take("ip:192.0.2.1", 0.3)  # spent: 4 tokens, then short
    assert 0 < limit._take("ip:192.0.2.1", 0.3)
    limit._take("ip:192.0.2.2", 2.2)  # over 2 s (burst / rate) after the others' last call
    assert 2 == len(limit)  # 192.0.2.1 was seen 1.9 s ago: not yet refilled
    limit._take("ip:192.0.2.3", 2.4)
    assert 2 == len(limit)  # 192.0.2.1 (2.1 s) dropped; .2 and .3 kept
