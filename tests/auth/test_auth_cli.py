# `trio-mcp serve --auth-*`: the command line turns authorization on, in a process of its own,
# against the test authorization server: 401 without a token, the metadata served, a token
# from the issuer accepted.
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from support.client import dumps, initialize_params, post_headers, request, rpc_request
from support.fixtures import free_port
from support.oauth import start_auth_server
from support.process import start_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spec("T-AUTH-1", "T-AUTH-6")
async def test_serve_with_auth_options_refuses_without_a_token_and_accepts_one(
    nursery: trio.Nursery,
) -> None:
    """`trio-mcp serve --auth-resource URL --auth-issuer URL --auth-jwks-uri URL
    --auth-scope mcp` answers a request without a token 401 with the challenge, serves its
    metadata, and serves an initialize with a token its issuer signed for it."""
    issuer = await start_auth_server(nursery)
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    proc, _match, _lines = await trio.to_thread.run_sync(
        lambda: start_until(
            [sys.executable, "-m", "trio_mcp", "serve", "--port", str(port),
             "--auth-resource", resource, "--auth-issuer", issuer.issuer,
             "--auth-jwks-uri", f"{issuer.issuer}/jwks", "--auth-scope", "mcp"],
            r"serving \S+ at (http://\S+)", cwd=ROOT,
        )
    )
    try:
        with trio.fail_after(20):
            body = dumps(rpc_request("initialize", initialize_params()))
            refused = await request(resource, "POST", post_headers(), body)
            metadata = await request(
                f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp", "GET", []
            )
            token = issuer.mint(audience=resource, scope="mcp")
            accepted = await request(
                resource, "POST",
                post_headers(extra=[("authorization", f"Bearer {token}")]), body,
            )
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)
    assert 401 == refused.status
    assert 'scope="mcp"' in (refused.header("www-authenticate") or "")
    assert [issuer.issuer] == metadata.json()["authorization_servers"]
    assert 200 == accepted.status, accepted.body


def test_serve_refuses_incomplete_auth_options() -> None:
    """--auth-resource without an issuer and a way to verify tokens stops at once with a
    message saying what is missing, rather than serving without authorization."""
    from trio_mcp.cli._cli import main

    with pytest.raises(SystemExit, match="--auth-issuer"):
        main(["serve", "--auth-resource", "https://x.example/mcp"], own_command_line=False)
