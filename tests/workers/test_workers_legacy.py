# TM-WORK-LEGACY in one process, on both HTTP servers: a server told that several workers
# serve its endpoint, with no store they share, refuses a legacy initialize in-band, naming
# the revision every worker serves (ML-COMPAT-2). (With real worker processes:
# tests/workers/test_workers.py.)
from __future__ import annotations

import json

import pytest
import trio
from support.client import initialize_params, post_headers, request, rpc_request
from support.fixtures import StartServer

from trio_mcp import ServerConfig

TIMEOUT = 10


@pytest.mark.spec("TM-WORK-LEGACY", "ML-COMPAT-2")
async def test_initialize_is_refused_in_band_naming_the_modern_revision(
    live_server: StartServer,
) -> None:
    """With workers=2 and no shared store, a 2025-11-25 initialize gets HTTP 200 (a 4xx
    would send the client to the old transport) with -32022, the modern revision in
    data.supported and in the message, and no session."""
    with trio.fail_after(TIMEOUT):
        live = await live_server(config=ServerConfig(workers=2))
        response = await request(
            live.url, "POST", post_headers(),
            json.dumps(rpc_request("initialize", initialize_params(), id=7)).encode(),
        )
    assert 200 == response.status, response.body
    body = response.json()
    assert 7 == body["id"]
    assert -32022 == body["error"]["code"]
    assert ["2026-07-28"] == body["error"]["data"]["supported"]
    assert "2026-07-28" in body["error"]["message"]
    assert response.header("mcp-session-id") is None
