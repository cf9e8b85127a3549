# What one worker relays to another (TM-STORE-STREAMS, TM-STORE-TASKS) with authorization on:
# the relay may cross a network in the clear, so it carries no bearer token (T-AUTH-17), only
# a seal, MAC'd with a key derived from the workers' shared secret, of the principal the
# relaying worker verified; the holder binds the request to that principal, and its relay
# port serves nothing without a seal that verifies. The bytes that cross are read by a proxy
# put between the workers, in place of the holder's advertised address.
from __future__ import annotations

import base64
import json
import time
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
from support.client import open_stream, post_headers, request, rpc_request
from support.fixtures import LiveServer, StartServer, free_port
from support.modern import call_tool, messages_of, modern_headers, modern_request, post
from support.oauth import USER, AuthServer, start_auth_server
from support.stores import StoreBackend
from support.task_tools import tasks_server

from trio_mcp import AuthConfig, Context, JWTVerifier, Server, ServerConfig
from trio_mcp.protocol import HttpRequest
from trio_mcp.protocol._auth import Principal
from trio_mcp.protocol._headers import Headers
from trio_mcp.runtime.store._relay import RELAY_HEADER, RelaySeal

TIMEOUT = 20
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}}
SECRET = bytes(range(32))
OTHER_SECRET = bytes(range(1, 33))


@attrs.define
class Tap:
    """A TCP proxy on loopback to ``target``, keeping every byte its clients sent."""

    target: tuple[str, int]
    sent: bytearray = attrs.field(factory=bytearray)
    port: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            task_status.started()
            await trio.serve_listeners(self._carry, listeners, handler_nursery=nursery)

    async def _carry(self, client: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream(*self.target)
        async with client, upstream, trio.open_nursery() as nursery:
            nursery.start_soon(self._pipe, client, upstream, True, nursery)
            nursery.start_soon(self._pipe, upstream, client, False, nursery)

    async def _pipe(
        self, src: trio.SocketStream, dst: trio.SocketStream, record: bool,
        nursery: trio.Nursery,
    ) -> None:
        try:
            while data := await src.receive_some(65536):
                if record:
                    self.sent += data
                await dst.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        nursery.cancel_scope.cancel()


def _app() -> Server:
    """The tasks' tools, and a legacy tool that logs lines, for a resume."""
    server = tasks_server()

    @server.tool()
    async def count(ctx: Context, n: int = 4, pause: float = 0.05) -> str:
        """Logs n numbered lines, ``pause`` seconds apart, then answers."""
        for i in range(n):
            await ctx.log("info", f"line {i}")
            await trio.sleep(pause)
        return f"counted {n}"

    return server


async def _protected_workers(
    live_server: StartServer, nursery: trio.Nursery, store: StoreBackend
) -> tuple[LiveServer, LiveServer, AuthServer, str]:
    """Two workers sharing ``store`` and a secret, behind one authorization server, both
    the resource named by the URL of the first: the workers of one endpoint."""
    issuer = await start_auth_server(nursery)
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    auth = AuthConfig(
        resource=resource,
        authorization_servers=[issuer.issuer],
        verifier=JWTVerifier(issuer=issuer.issuer, audience=resource,
                             jwks_uri=f"{issuer.issuer}/jwks", min_refresh=0.0),
        scopes_supported=["mcp"],
        required_scopes={"mcp"},
    )
    config = store.config(secret=SECRET, workers=2, auth=auth)
    a = await live_server(_app(), config, port=port)
    b = await live_server(_app(), config)
    return a, b, issuer, resource


async def _tap(nursery: trio.Nursery, worker: LiveServer) -> Tap:
    """Put a Tap in front of ``worker``'s relay port, as the store tells the others."""
    origin = worker.cluster.store.origin
    address = await worker.cluster.store.locate(origin)
    assert address is not None
    host, _, port = address.rpartition(":")
    tap = Tap((host, int(port)))
    await nursery.start(tap.serve)
    await worker.cluster.store.advertise(tap.address, 30.0)
    return tap


def _bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def _task_get(task_id: str) -> dict[str, Any]:
    return modern_request("tasks/get", {"taskId": task_id}, capabilities=WITH_TASKS)


def _only(response: Any) -> dict[str, Any]:
    (message,) = messages_of(response)
    assert isinstance(message, dict)
    return message


def _assert_no_credentials(tap: Tap, *tokens: str) -> None:
    sent = bytes(tap.sent)
    assert sent, "nothing was relayed"
    assert b"authorization:" not in sent.lower()
    for token in tokens:
        assert token.encode() not in sent
    assert f"{RELAY_HEADER}:".encode() in sent.lower()


@pytest.mark.spec("T-AUTH-17", "TM-STORE-TASKS", "TK-BIND")
async def test_a_relayed_task_request_carries_a_seal_and_no_token(
    live_server: StartServer, nursery: trio.Nursery, shared_store: StoreBackend
) -> None:
    """Alice's tasks/get for her task, sent to worker B, is relayed to A without her token:
    the bytes that cross carry the relay seal instead, and A answers for Alice. Bob's, for
    the same task, is relayed the same way and A answers it as for an unknown task: the
    seal carries who the request is from, so the binding holds across workers."""
    a, b, issuer, resource = await _protected_workers(live_server, nursery, shared_store)
    alice = issuer.mint(audience=resource, scope="mcp")
    bob = issuer.mint(audience=resource, scope="mcp", subject="bob")
    with trio.fail_after(TIMEOUT):
        created = _only(await post(a.url, call_tool("job", {"seconds": 30},
                                                    capabilities=WITH_TASKS),
                                   extra=_bearer(alice)))
        task_id = created["result"]["taskId"]
        tap = await _tap(nursery, a)
        mine = _only(await post(b.url, _task_get(task_id), extra=_bearer(alice)))
        theirs = _only(await post(b.url, _task_get(task_id), extra=_bearer(bob)))
    assert "working" == mine["result"]["status"]
    assert -32602 == theirs["error"]["code"]
    assert 2 == bytes(tap.sent).count(b"POST /mcp ")
    _assert_no_credentials(tap, alice, bob)


@pytest.mark.spec("T-AUTH-17", "TM-STORE-STREAMS", "TM-AUTH-BIND")
async def test_a_relayed_resume_carries_a_seal_and_no_token(
    live_server: StartServer, nursery: trio.Nursery, shared_store: StoreBackend
) -> None:
    """Alice's legacy stream at worker A, dropped and resumed at worker B, is relayed to A
    without her token and continues there to its response; the same resume with Bob's
    token is relayed too, and A answers it 404 (the session is Alice's)."""
    a, b, issuer, resource = await _protected_workers(live_server, nursery, shared_store)
    alice = issuer.mint(audience=resource, scope="mcp")
    bob = issuer.mint(audience=resource, scope="mcp", subject="bob")
    with trio.fail_after(TIMEOUT):
        init = await request(a.url, "POST", post_headers(extra=_bearer(alice)), json.dumps(
            rpc_request("initialize", {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}, id=1)).encode())
        session_id = init.header("mcp-session-id")
        assert session_id is not None
        headers = post_headers(session_id=session_id, protocol_version="2025-11-25",
                               extra=_bearer(alice))
        await request(a.url, "POST", headers, json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        call = json.dumps(rpc_request("tools/call", {"name": "count"}, id=2)).encode()
        cursor, lines = None, 0
        async with open_stream(a.url, "POST", headers, call) as stream:
            while lines < 2:
                event = await stream.next_event(comments=False)
                assert event is not None
                cursor = event.id or cursor
                lines += bool(event.data)
        assert cursor is not None
        tap = await _tap(nursery, a)
        resume = [h for h in headers if h[0] != "content-type"] + [("last-event-id", cursor)]
        seen = []
        async with open_stream(b.url, "GET", resume) as resumed:
            assert 200 == resumed.status
            while not seen or "result" not in seen[-1]:
                event = await resumed.next_event(comments=False)
                assert event is not None
                if event.data:
                    seen.append(json.loads(event.data))
        stranger = [(k, v) for k, v in resume if k != "authorization"] + _bearer(bob)
        refused = await request(b.url, "GET", stranger)
    assert "counted 4" == seen[-1]["result"]["content"][0]["text"]
    assert 404 == refused.status
    assert 1 == b.stats()["resumes_relayed"]
    _assert_no_credentials(tap, alice, bob)


def _raw(method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes) -> bytes:
    head = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers),
            f"content-length: {len(body)}", "connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _send(address: str, raw: bytes) -> tuple[int, bytes]:
    """One raw request to ``address``: the status and the body (the connection closes)."""
    host, _, port = address.rpartition(":")
    async with await trio.open_tcp_stream(host, int(port)) as stream:
        await stream.send_all(raw)
        data = bytearray()
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _sealed(
    key: bytes, message: dict[str, Any], at: float, headers: list[tuple[str, str]],
    principal: Principal | None,
) -> tuple[list[tuple[str, str]], bytes]:
    """``message`` as a relaying worker would send it for ``principal``, sealed with
    ``key`` at ``at``."""
    body = json.dumps(message).encode()
    req = HttpRequest(
        method="POST", path="/mcp",
        headers=Headers([(k.encode(), v.encode()) for k, v in headers]), body=body,
        principal=principal,
    )
    seal = RelaySeal(key).seal(req, at)
    return [*headers, (RELAY_HEADER, seal)], body


@pytest.mark.spec("T-AUTH-17", "TM-STORE-STREAMS")
async def test_the_relay_port_serves_only_requests_sealed_by_a_worker(
    live_server: StartServer, nursery: trio.Nursery, shared_store: StoreBackend
) -> None:
    """A's relay port answers 403 to a request without a seal (a valid token does not
    stand in for one), with a seal made under another secret, with a seal made for another
    body, with one made a minute ago, and with one that names nobody; it serves one sealed
    now by a worker for Alice. On the public port a relay header means nothing: the
    request is authenticated by its token, and relayed as any other."""
    a, b, issuer, resource = await _protected_workers(live_server, nursery, shared_store)
    alice = issuer.mint(audience=resource, scope="mcp")
    with trio.fail_after(TIMEOUT):
        created = _only(await post(a.url, call_tool("job", {"seconds": 30},
                                                    capabilities=WITH_TASKS),
                                   extra=_bearer(alice)))
        task_id = created["result"]["taskId"]
        relay_at = await a.cluster.store.locate(a.cluster.store.origin)
        assert relay_at is not None
        message = _task_get(task_id)
        plain = [(k, v) for k, v in modern_headers(message)] + [("host", "127.0.0.1")]
        body = json.dumps(message).encode()
        key = a.runtime.relay_seal.key
        other_key = ServerConfig(secret=OTHER_SECRET).derived_key("relay")
        who = Principal(subject=USER, issuer=issuer.issuer, scopes=frozenset({"mcp"}))
        now = time.time()
        unsealed = await _send(relay_at, _raw("POST", "/mcp", plain + _bearer(alice), body))
        foreign = await _send(relay_at, _raw("POST", "/mcp", *_sealed(
            other_key, message, now, plain, who)))
        headers, _ = _sealed(key, message, now, plain, who)
        other = dict(message, id=999)
        moved = await _send(relay_at, _raw("POST", "/mcp", headers, json.dumps(other).encode()))
        stale = await _send(relay_at, _raw("POST", "/mcp", *_sealed(
            key, message, now - 60, plain, who)))
        nobody = await _send(relay_at, _raw("POST", "/mcp", *_sealed(
            key, message, now, plain, None)))
        good = await _send(relay_at, _raw("POST", "/mcp", *_sealed(
            key, message, now, plain, who)))
        forged = await post(b.url, message, extra=[(RELAY_HEADER, "1.e30.AAAA"),
                                                   *_bearer(alice)])
        anonymous = await post(b.url, message, extra=[(RELAY_HEADER, "1.e30.AAAA")])
    for status, text in (unsealed, foreign, moved, stale, nobody):
        assert 403 == status, text
        assert b"relayed" in text
    assert 200 == good[0], good
    assert "working" == json.loads(good[1])["result"]["status"]
    assert "working" == _only(forged)["result"]["status"]
    assert 401 == anonymous.status


def _peer_app() -> Server:
    """The tasks' tools, and a tool that answers the client address its context names."""
    server = tasks_server()

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """The caller's address, as ``ctx.peer`` reads it."""
        return str(ctx.peer)

    return server


def _length(data: bytearray) -> int:
    """The length of a whole response whose head ``data`` holds (by its Content-Length)."""
    head, _, _ = bytes(data).partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    raise AssertionError(f"no content-length in {head!r}")


def _seal_of(sent: bytes) -> dict[str, Any]:
    """The blob of the first relay seal among ``sent`` bytes."""
    marker = f"{RELAY_HEADER}: ".encode()
    start = sent.lower().index(marker) + len(marker)
    value = sent[start:sent.index(b"\r\n", start)].decode()
    blob = value.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4)))
    return decoded


@pytest.mark.spec("TM-WORK-PEER", "TM-HAND-PEER")
async def test_a_relayed_request_is_served_as_its_clients_address(
    live_server: StartServer, nursery: trio.Nursery, shared_store: StoreBackend
) -> None:
    """An anonymous tasks/get that reaches worker B from 127.0.0.2, with a forged
    X-Forwarded-For, is relayed to A with a seal naming 127.0.0.2 (B trusts no proxy) and
    without the forwarding header; A serves a sealed request as the sealed address's, never
    as the relaying connection's (here 127.0.0.1), and a seal whose address was changed
    does not verify."""
    config = shared_store.config(secret=SECRET, workers=2)
    a = await live_server(_peer_app(), config)
    b = await live_server(_peer_app(), config)
    with trio.fail_after(TIMEOUT):
        created = _only(await post(a.url, call_tool("job", {"seconds": 30},
                                                    capabilities=WITH_TASKS)))
        task_id = created["result"]["taskId"]
        tap = await _tap(nursery, a)
        message = _task_get(task_id)
        headers = [*modern_headers(message), ("host", "127.0.0.1"),
                   ("x-forwarded-for", "203.0.113.9")]
        host, _, port = b.url.split("//", 1)[1].split("/", 1)[0].rpartition(":")
        async with await trio.open_tcp_stream(
            host, int(port), local_address="127.0.0.2"
        ) as stream:
            await stream.send_all(_raw("POST", "/mcp", headers, json.dumps(message).encode()))
            answer = bytearray()
            while b"\r\n\r\n" not in answer or len(answer) < _length(answer):
                chunk = await stream.receive_some(65536)
                assert chunk, bytes(answer)
                answer += chunk
        relay_at = await a.cluster.store.locate(a.cluster.store.origin)
        assert relay_at is not None
        whoami = call_tool("whoami", {})
        plain = [*modern_headers(whoami), ("host", "127.0.0.1")]
        key = a.runtime.relay_seal.key
        body = json.dumps(whoami).encode()
        req = HttpRequest(method="POST", path="/mcp",
                          headers=Headers([(k.encode(), v.encode()) for k, v in plain]),
                          body=body)
        seal = RelaySeal(key, address_of=lambda r: "198.51.100.7").seal(req, time.time())
        served = await _send(relay_at, _raw("POST", "/mcp", [*plain, (RELAY_HEADER, seal)], body))
        stamp, blob, tag = seal.split(".")
        raw = base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4))
        forged_blob = base64.urlsafe_b64encode(raw.replace(b"198.51.100.7", b"198.51.100.8"))
        forged = f"{stamp}.{forged_blob.rstrip(b'=').decode()}.{tag}"
        refused = await _send(relay_at, _raw("POST", "/mcp", [*plain, (RELAY_HEADER, forged)],
                                             body))
    assert b" 200 " in bytes(answer).split(b"\r\n", 1)[0], bytes(answer)[:200]
    sent = bytes(tap.sent)
    assert "127.0.0.2" == _seal_of(sent)["a"]
    assert b"x-forwarded-for" not in sent.lower()
    assert b"203.0.113.9" not in sent
    assert 200 == served[0], served
    text = json.loads(served[1])["result"]["content"][0]["text"]
    assert "198.51.100.7" == text
    assert 403 == refused[0]
