"""Load generation for the benchmarks, reusable by any of them and for any MCP server.

- ``start_server(cmd)`` runs a server in a subprocess and waits for the line it prints once it
  listens, ``READY {"url": ..., "stats_url": ..., "pid": ...}``; ``ServerProcess`` then
  reads its resident memory and CPU time from /proc, and its counters when it has a
  counters endpoint (``stats_url``; null for servers without one).
- ``McpClient`` speaks MCP over raw sockets (trio + h11, one connection per request, nothing
  smoothing the wire over): initialize, notifications, and ``open_call``, which returns an
  ``Exchange`` that reads an SSE response as fast or as slowly as asked, with a receive buffer
  as small as asked, and can drop the connection at any point.
- ``abandon`` is a client that starts a streaming call, reads a few events and vanishes;
  ``slow_read`` one that reads at a fixed rate; ``run_many`` runs many clients, so many at a
  time.
- ``CpuMeter`` says how much CPU the load generator itself used, so that a result can be
  told apart from a saturated client.

Loopback only: every helper refuses a host that is not 127.0.0.1, ::1 or localhost.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import h11
import trio

from trio_mcp.protocol import SSEDecoder, SSEEvent

__all__ = [
    "CpuMeter",
    "Exchange",
    "McpClient",
    "ServerProcess",
    "abandon",
    "run_many",
    "slow_read",
    "start_server",
]

PROTOCOL_VERSION = "2025-11-25"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
_ids = itertools.count(1)
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# -- the server process -----------------------------------------------------------------------


@attrs.define
class ServerProcess:
    """A server running in a subprocess of this one."""

    proc: subprocess.Popen[str]
    url: str
    stats_url: str | None
    pid: int
    info: dict[str, Any]
    """Everything the server said in its READY line (its configuration, among others)."""

    def rss(self) -> int:
        """Resident memory in bytes (/proc/PID/statm)."""
        with open(f"/proc/{self.pid}/statm") as f:
            return int(f.read().split()[1]) * _PAGE

    def cpu_seconds(self) -> float:
        """User plus system CPU time used so far (/proc/PID/stat)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    async def stats(self) -> dict[str, Any] | None:
        """The server's counters, when it serves them."""
        if self.stats_url is None:
            return None
        status, _, body = await http_request(self.stats_url, "GET")
        if status != 200:
            return None
        result: dict[str, Any] = json.loads(body)
        return result

    async def wait_stats(
        self, predicate: Callable[[dict[str, Any]], bool], *, timeout: float, poll: float = 0.2
    ) -> dict[str, Any] | None:
        """Poll the counters until ``predicate`` holds (None without a counters endpoint, or
        the last counters when ``timeout`` ran out)."""
        last = None
        with trio.move_on_after(timeout):
            while True:
                last = await self.stats()
                if last is None or predicate(last):
                    return last
                await trio.sleep(poll)
        return last

    def trim(self) -> None:
        """Ask the server to hand its allocator's free memory back (SIGUSR1; the benchmark
        servers of this directory understand it, others may not)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it takes longer than ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_server(cmd: Sequence[str], *, timeout: float = 60.0) -> ServerProcess:
    """Run ``cmd`` and wait for its READY line (its stderr goes to ours)."""
    proc = subprocess.Popen(
        list(cmd), stdout=subprocess.PIPE, stderr=None, text=True, bufsize=1
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("READY "):
            info = json.loads(line[len("READY ") :])
            _check_loopback(info["url"])
            return ServerProcess(
                proc=proc,
                url=info["url"],
                stats_url=info.get("stats_url"),
                pid=int(info.get("pid") or proc.pid),
                info=info,
            )
    proc.kill()
    raise RuntimeError(f"{cmd!r} did not print READY within {timeout} s")


def _check_loopback(url: str) -> tuple[str, int, str]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host not in LOOPBACK:
        raise ValueError(f"benchmarks only talk to loopback, not {host!r}")
    return host, parts.port or 80, parts.path or "/"


# -- HTTP over raw sockets ----------------------------------------------------------------------


class Exchange:
    """One HTTP/1.1 request on its own connection, whose response is read incrementally."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.conn = h11.Connection(our_role=h11.CLIENT)
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.events: list[SSEEvent] = []
        self.received = 0
        self.ended = False
        """The server finished the response (rather than closing the connection)."""
        self.eof = False
        self.reset = False
        self._decoder = SSEDecoder()

    async def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            sent = await self.sock.send(view)
            view = view[sent:]

    async def _recv(self, n: int) -> bytes:
        try:
            data = await self.sock.recv(n)
        except (ConnectionResetError, BrokenPipeError):
            self.reset = True
            data = b""
        if not data:
            self.eof = True
        return data

    def _feed(self, data: bytes) -> list[SSEEvent]:
        self.received += len(data)
        self.conn.receive_data(data)
        new: list[SSEEvent] = []
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError:
                return new
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return new
            if isinstance(event, h11.Response):
                self.status = event.status_code
                self.headers = {
                    k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers
                }
            elif isinstance(event, h11.Data):
                chunk = bytes(event.data)
                if self.headers.get("content-type", "").startswith("text/event-stream"):
                    events = self._decoder.feed(chunk)
                    self.events.extend(events)
                    new.extend(events)
                else:
                    self.body += chunk
            elif isinstance(event, h11.EndOfMessage):
                self.ended = True
                return new
            else:
                return new

    async def read_head(self) -> None:
        while self.status is None and not self.eof:
            self._feed(await self._recv(65536))

    async def read_all(self) -> None:
        while not self.ended and not self.eof:
            self._feed(await self._recv(65536))

    async def read_events(self, count: int) -> int:
        """Read until ``count`` more SSE events (comments included) arrived; how many did."""
        got = 0
        while got < count and not self.ended and not self.eof:
            got += len(self._feed(await self._recv(4096)))
        return got

    async def read_at(
        self, rate: float, *, duration: float, on_event: Callable[[SSEEvent], None] | None = None
    ) -> None:
        """Read at most ``rate`` bytes per second for ``duration`` seconds, or until the
        connection ends."""
        chunk = max(1, min(256, int(rate)))
        with trio.move_on_after(duration):
            while not self.eof:
                data = await self._recv(chunk)
                for event in self._feed(data):
                    if on_event is not None:
                        on_event(event)
                if data:
                    await trio.sleep(len(data) / rate)

    def messages(self) -> list[dict[str, Any]]:
        if self.body and not self.events:
            decoded = json.loads(self.body)
            return decoded if isinstance(decoded, list) else [decoded]
        return [json.loads(e.data) for e in self.events if e.data and e.event is None]

    def close(self) -> None:
        """Drop the connection, wherever the response is."""
        self.sock.close()


@contextlib.asynccontextmanager
async def open_exchange(
    url: str,
    method: str,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    *,
    rcvbuf: int | None = None,
    local: str | None = None,
) -> AsyncIterator[Exchange]:
    """Connect (with SO_RCVBUF ``rcvbuf`` set before connecting, when given; from the
    address ``local``, when given: 127.0.0.x is another client on loopback), send one
    request, and yield the exchange; the connection is closed on exit."""
    host, port, path = _check_loopback(url)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = trio.socket.socket(family, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            # Before connect(): the window scale is fixed at the handshake.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if local is not None:
            await sock.bind((local, 0))
        await sock.connect((host, port))
        exchange = Exchange(sock)
        names = {k.lower() for k, _ in headers}
        all_headers = [("host", f"{host}:{port}"), *headers]
        if "content-length" not in names and (body or method == "POST"):
            all_headers.append(("content-length", str(len(body))))
        raw = exchange.conn.send(
            h11.Request(
                method=method,
                target=path,
                headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in all_headers],
            )
        ) or b""
        if body:
            raw += exchange.conn.send(h11.Data(data=body)) or b""
        raw += exchange.conn.send(h11.EndOfMessage()) or b""
        await exchange._send(raw)
        yield exchange
    finally:
        sock.close()


async def http_request(
    url: str,
    method: str,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    *,
    local: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One complete request: (status, headers, body)."""
    async with open_exchange(url, method, headers, body, local=local) as exchange:
        await exchange.read_head()
        await exchange.read_all()
        assert exchange.status is not None
        raw = bytes(exchange.body) if exchange.body else b""
        if exchange.events:
            raw = b"".join(
                f"data: {e.data}\n\n".encode() for e in exchange.events if e.data is not None
            )
        return exchange.status, exchange.headers, raw


# -- MCP ----------------------------------------------------------------------------------------


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids), "method": method}
    if params is not None:
        message["params"] = params
    return message


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@attrs.define
class McpClient:
    """One MCP session over raw sockets."""

    url: str
    session_id: str | None = None
    protocol_version: str = PROTOCOL_VERSION
    local: str | None = None
    """The address to connect from (127.0.0.x: another client on loopback)."""

    def headers(self) -> list[tuple[str, str]]:
        headers = [
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
        ]
        if self.session_id is not None:
            headers += [
                ("mcp-session-id", self.session_id),
                ("mcp-protocol-version", self.protocol_version),
            ]
        return headers

    async def initialize(self) -> None:
        """initialize, then notifications/initialized."""
        params = {
            "protocolVersion": self.protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "trio-mcp-loadgen", "version": "0"},
        }
        async with open_exchange(
            self.url, "POST", self.headers(), _dumps(rpc("initialize", params)),
            local=self.local,
        ) as exchange:
            await exchange.read_head()
            await exchange.read_all()
        if exchange.status != 200:
            raise RuntimeError(f"initialize answered {exchange.status}")
        self.session_id = exchange.headers.get("mcp-session-id")
        result = exchange.messages()[-1].get("result", {})
        self.protocol_version = result.get("protocolVersion", self.protocol_version)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        status, _, _ = await http_request(
            self.url, "POST", self.headers(), _dumps(note), local=self.local
        )
        if status != 202:
            raise RuntimeError(f"notifications/initialized answered {status}")

    def open_call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        progress: bool = False,
        rcvbuf: int | None = None,
    ) -> contextlib.AbstractAsyncContextManager[Exchange]:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if progress:
            params["_meta"] = {"progressToken": f"p{next(_ids)}"}
        return open_exchange(
            self.url, "POST", self.headers(), _dumps(rpc("tools/call", params)), rcvbuf=rcvbuf,
            local=self.local,
        )

    async def delete(self) -> int:
        status, _, _ = await http_request(self.url, "DELETE", self.headers(), local=self.local)
        return status


# -- clients ------------------------------------------------------------------------------------


async def abandon(
    url: str, *, n: int, size: int, read_events: int = 10, progress: bool = True
) -> int:
    """A client that initializes, starts ``stream(n, size)``, reads ``read_events`` events
    (the priming event counts) and closes the TCP connection for good: no DELETE, no resume.
    Returns how many events it read."""
    client = McpClient(url)
    await client.initialize()
    async with client.open_call("stream", {"n": n, "size": size}, progress=progress) as call:
        await call.read_head()
        got = await call.read_events(read_events)
        call.close()
    return got


@attrs.define
class SlowRead:
    """What a slow reader saw."""

    started: float
    events: list[tuple[float, SSEEvent]] = attrs.Factory(list)
    ended_at: float | None = None
    """When the connection ended (EOF or reset), relative to ``started``."""
    reset: bool = False
    received: int = 0

    def named(self, name: str) -> list[SSEEvent]:
        return [e for _, e in self.events if e.event == name]


async def slow_read(
    client: McpClient,
    *,
    n: int,
    size: int,
    rate: float,
    duration: float,
    rcvbuf: int = 4096,
    progress: bool = False,
    drain_for: float = 0.0,
) -> SlowRead:
    """Start ``stream(n, size)`` on a socket with a small receive buffer and read it at
    ``rate`` bytes per second for ``duration`` seconds (or until the server ends it); then,
    with ``drain_for``, read on as fast as it comes for at most that long, to see how the
    connection ended."""
    async with client.open_call(
        "stream", {"n": n, "size": size}, progress=progress, rcvbuf=rcvbuf
    ) as call:
        start = trio.current_time()
        result = SlowRead(started=start)
        await call.read_head()

        def seen(event: SSEEvent) -> None:
            result.events.append((trio.current_time() - start, event))

        await call.read_at(rate, duration=duration, on_event=seen)
        if drain_for > 0 and not call.eof:
            await call.read_at(1 << 30, duration=drain_for, on_event=seen)
        if call.eof:
            result.ended_at = trio.current_time() - start
        result.reset = call.reset
        result.received = call.received
    return result


async def run_many(
    count: int, concurrency: int, fn: Callable[[int], Awaitable[Any]]
) -> tuple[list[Any], list[BaseException]]:
    """Run ``fn(0)`` ... ``fn(count - 1)``, at most ``concurrency`` at a time; their results
    (in order) and the errors of those that failed."""
    results: list[Any] = [None] * count
    errors: list[BaseException] = []
    limiter = trio.CapacityLimiter(concurrency)

    async def one(k: int) -> None:
        async with limiter:
            try:
                results[k] = await fn(k)
            except Exception as exc:
                errors.append(exc)

    async with trio.open_nursery() as nursery:
        for k in range(count):
            nursery.start_soon(one, k)
    return results, errors


class CpuMeter:
    """CPU time this process (the load generator) used over a block, and its wall time."""

    def __enter__(self) -> CpuMeter:
        self._cpu = _self_cpu()
        self._wall = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu = _self_cpu() - self._cpu
        self.wall = time.monotonic() - self._wall

    @property
    def share(self) -> float:
        """CPU time over wall time: 1.0 is one core busy the whole time."""
        return self.cpu / self.wall if self.wall > 0 else 0.0


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def python() -> str:
    """The interpreter to run servers with (this one)."""
    return sys.executable
