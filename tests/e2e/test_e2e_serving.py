"""The three ways to serve: embedded with `await server.serve(...)` under `nursery.start`,
over TLS with certificate files, and as an ASGI app under hypercorn's own command line."""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
from support.client import open_session
from support.process import start_until

from trio_mcp import ServerConfig
from trio_mcp.demo import server as demo

TIMEOUT = 15
ROOT = Path(__file__).resolve().parents[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "tls-test", "version": "0"},
    },
}


async def test_serve_embeds_in_a_nursery_and_reports_its_url() -> None:
    """`await nursery.start(server.serve, port=0)` binds a free loopback port, reports the
    URL through task_status, serves sessions, and stops when its scope is cancelled."""
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(partial(demo.serve, port=0, config=ServerConfig()))
            [url] = urls
            session = await open_session(url)
            pong = await session.result("ping")
            nursery.cancel_scope.cancel()

    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url)
    assert {} == pong


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


def _post_tls(port: int, cert: Path) -> tuple[int, dict[str, str], bytes]:
    import http.client

    ctx = ssl.create_default_context(cafile=str(cert))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    try:
        conn.request(
            "POST", "/mcp", body=json.dumps(INIT),
            headers={"content-type": "application/json",
                     "accept": "application/json, text/event-stream"},
        )
        response = conn.getresponse()
        headers = {k.lower(): v for k, v in response.getheaders()}
        body = response.read(4096) if headers.get("content-type") == "application/json" else (
            response.fp.readline() + response.fp.readline() + response.fp.readline()
            + response.fp.readline() + response.fp.readline()
        )
        return response.status, headers, body
    finally:
        conn.close()


async def test_serve_over_tls_with_certificate_files(tmp_path: Path) -> None:
    """Given a certificate and a key (`--certfile`/`--keyfile` on the command line), the
    server speaks HTTPS only: a client that trusts the certificate initializes a session."""
    assert shutil.which("openssl"), "openssl is needed to make a test certificate"
    cert, key = _self_signed(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            [url] = await nursery.start(
                partial(demo.serve, port=0, certfile=str(cert), keyfile=str(key))
            )
            port = int(urlsplit(url).port or 0)
            status, headers, body = await trio.to_thread.run_sync(_post_tls, port, cert)
            nursery.cancel_scope.cancel()

    assert url.startswith("https://127.0.0.1:")
    assert 200 == status
    assert headers.get("mcp-session-id")
    assert b"data:" in body


def _hypercorn_cli() -> tuple[subprocess.Popen[str], int]:
    proc, match, _ = start_until(
        [sys.executable, "-m", "hypercorn", "--worker-class", "trio", "--bind", "127.0.0.1:0",
         "trio_mcp.demo:server.asgi_app()"],
        r"Running on http://127\.0\.0\.1:(\d+)", cwd=ROOT,
    )
    return proc, int(match.group(1))


@pytest.mark.spec("TM-SEC-HOST")
async def test_asgi_app_runs_under_the_hypercorn_command_line() -> None:
    """`hypercorn --worker-class trio 'trio_mcp.demo:server.asgi_app()'` serves the demo:
    the lifespan protocol starts the session manager, a session works, and the loopback
    Host check applies because the request arrived on loopback."""
    proc, port = await trio.to_thread.run_sync(_hypercorn_cli)
    try:
        with trio.fail_after(TIMEOUT):
            url = f"http://127.0.0.1:{port}/mcp"
            session = await open_session(url)
            tools: Any = await session.result("tools/list")
            foreign = await session.post(
                {"jsonrpc": "2.0", "id": 99, "method": "ping"},
                headers=[("host", "evil.example.com")],
            )
    finally:
        proc.terminate()
        await trio.to_thread.run_sync(proc.wait)

    assert any(t["name"] == "echo" for t in tools["tools"])
    assert 421 == foreign.status
