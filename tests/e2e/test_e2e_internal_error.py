# TM-RPC-INTERNAL outside any handler: a failure of the runtime itself (a bug) is answered on
# both HTTP servers with HTTP 500 and a JSON-RPC internal error that reveals nothing, and the
# server goes on serving.
from __future__ import annotations

import logging

import pytest
import trio
from support.client import dumps, open_session, post_headers, request, rpc_request
from support.fixtures import StartServer

from trio_mcp import ServerConfig
from trio_mcp.protocol import HttpRequest
from trio_mcp.runtime._runtime import Runtime

TIMEOUT = 10


@pytest.mark.spec("TM-RPC-INTERNAL")
async def test_a_failure_outside_any_handler_gets_500_with_nothing_revealed(
    live_server: StartServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception escaping the runtime for one request is logged with its trace, answered
    500 with a -32603 error and no detail, and the next request is served."""
    real_serve = Runtime.serve

    async def serve(
        self: Runtime, http: HttpRequest, responder: object, **options: bool
    ) -> None:
        if b"boom" in http.body:
            raise RuntimeError("a secret detail")
        await real_serve(self, http, responder, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(Runtime, "serve", serve)
    with trio.fail_after(TIMEOUT), caplog.at_level(logging.ERROR, logger="trio_mcp"):
        live = await live_server(config=ServerConfig())
        session = await open_session(live.url)
        failed = await request(
            live.url, "POST", post_headers(session_id=session.id, protocol_version="2025-11-25"),
            dumps(rpc_request("tools/call", {"name": "boom", "arguments": {}})),
        )
        after = await session.call("ping")
    traces = [r for r in caplog.records if r.exc_info and "unexpected error" in r.getMessage()]

    assert failed.status == 500, failed
    body = failed.json()
    assert body["error"]["code"] == -32603 and body["error"]["message"] == "Internal error."
    assert b"secret" not in failed.body
    assert after.get("result") == {}, after
    assert len(traces) == 1 and "a secret detail" in str(traces[0].exc_info[1])
