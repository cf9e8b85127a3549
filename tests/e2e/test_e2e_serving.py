"""The three ways to serve: embedded with `await server.serve(...)` under `nursery.start`,
over TLS with certificate files, and as an ASGI app under hypercorn's own command line."""

from __future__ import annotations

import inspect
import json
import logging
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


def test_server_serve_has_a_real_signature_and_a_true_docstring() -> None:
    """`Server.serve` takes typed keyword arguments, not (*args, **kwargs), each documented
    in its docstring, which says the own HTTP server is the default and hypercorn a choice."""
    from trio_mcp import Server

    sig = inspect.signature(Server.serve)
    params = [p for name, p in sig.parameters.items() if name != "self"]
    doc = inspect.getdoc(Server.serve) or ""

    assert params and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    assert all(p.annotation is not inspect.Parameter.empty for p in params)
    assert [] == [p.name for p in params if f"{p.name}:" not in doc]
    assert '"trio-mcp"`` (the default)' in doc
    assert "hypercorn" in doc.split("http_server:")[1].split("certfile:")[0]


SERVE_FROM_PYTHON = """
from functools import partial

import trio
from trio_mcp import Server

server = Server("hello")


async def main():
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(partial(server.serve, host="127.0.0.1", port=0))
        print("URLS", urls, flush=True)
        nursery.cancel_scope.cancel()

trio.run(main)
"""


@pytest.mark.parametrize("http_server", ["trio-mcp", "hypercorn"])
async def test_serving_from_python_reports_the_endpoint_with_its_path_and_says_it(
    tmp_path: Path, http_server: str
) -> None:
    """`await nursery.start(server.serve, port=0)` in a program that configured no logging
    reports the endpoint's URL, /mcp included, and writes it to stderr at start-up; on
    hypercorn too."""
    script = tmp_path / "hello.py"
    script.write_text(SERVE_FROM_PYTHON.replace(
        "port=0))", f"port=0, http_server={http_server!r}))"
    ))
    done = await trio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT,
        cwd=tmp_path,
    ))

    [reported] = re.findall(r"URLS \['(http://\S+)'\]", done.stdout)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", reported)
    assert f"trio-mcp: serving hello at {reported}\n" in done.stderr


async def test_serve_logs_its_urls_where_logging_is_configured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Where the program configured logging, the URLs go to the `trio_mcp.serve` logger at
    INFO (the endpoint, then the counters); with announce=False nothing is said."""
    caplog.set_level(logging.INFO, logger="trio_mcp.serve")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(partial(demo.serve, port=0, stats_port=0))
            quiet = await nursery.start(partial(demo.serve, port=0, announce=False))
            nursery.cancel_scope.cancel()

    said = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.serve"]
    assert [f"serving {demo.name} at {urls[0]}", f"serving counters at {urls[1]}"] == said
    assert quiet[0] not in " ".join(said)
