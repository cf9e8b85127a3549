"""The socket fuzzer's harness (tests/e2e/test_e2e_socket_fuzz.py, and the longer run of
benchmarks/fuzz_edge.py): servers in processes of their own (support/fuzz_server.py), one per
HTTP server and parser, each with its stats port and inspector; a neighbour per server, a
legitimate client pinging on its own session throughout; fuzzed connections sent with
blocking sockets; and the invariants checked: every process stays up, every neighbour is
answered, every fuzzed connection ends (a close, after its answers) with no 5xx but 501, 503
and 505, and nothing unexpected reaches a server's log."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from .wire import responses

__all__ = ["KINDS", "FuzzServer", "Outcome", "fuzz_servers", "send"]

HERE = Path(__file__).resolve().parent
#: The servers fuzzed: trio-mcp's own with each parser, and hypercorn.
KINDS = (("trio-mcp", "httptools"), ("trio-mcp", "h11"), ("hypercorn", "auto"))
#: Statuses a fuzzed request may get: anything below 500, and these.
ALLOWED_5XX = frozenset({501, 503, 505})
#: The log lines allowed: a failure hypercorn's isolation caught (TM-SEC-ISOLATE: its
#: issue #203), logged as a warning, with its traceback the first time.
ALLOWED_LOG = ("WARNING trio_mcp.hypercorn: a connection failed inside hypercorn",)


@attrs.define
class Neighbour:
    """A legitimate client on one server: a session, pinged again and again on one kept
    connection (a new one when the server closes it)."""

    port: int
    latencies: list[float] = attrs.Factory(list)
    failures: list[str] = attrs.Factory(list)
    _stop: threading.Event = attrs.Factory(threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0

    def _post(self, conn: http.client.HTTPConnection, body: bytes, sid: str | None) -> str:
        headers = {"accept": "application/json, text/event-stream",
                   "content-type": "application/json"}
        if sid is not None:
            headers |= {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        conn.request("POST", "/mcp", body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.status not in (200, 202):
            raise AssertionError(f"{response.status} {data[:200]!r}")
        return response.headers.get("mcp-session-id") or ""

    def _run(self) -> None:
        init = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "neighbour", "version": "0"}}}).encode()
        ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            sid = self._post(conn, init, None)
            self._post(conn, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', sid)
        except Exception as exc:
            self.failures.append(f"initialize: {exc!r}")
            return
        while not self._stop.is_set():
            began = time.perf_counter()
            try:
                self._post(conn, ping, sid)
            except (http.client.HTTPException, OSError) as exc:
                conn.close()  # a kept connection the server closed (idle): a fresh one
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                try:
                    self._post(conn, ping, sid)
                except Exception as again:
                    self.failures.append(f"ping: {exc!r}, then {again!r}")
                    continue
            except AssertionError as exc:
                self.failures.append(f"ping: {exc}")
                continue
            self.latencies.append(time.perf_counter() - began)
            self._stop.wait(0.02)
        conn.close()


@attrs.define
class FuzzServer:
    """One server process under fuzzing: its ports, its log, its neighbour."""

    name: str
    proc: subprocess.Popen[str]
    ports: dict[str, int]
    neighbour: Neighbour
    log: list[str] = attrs.Factory(list)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def unexpected_log(self) -> list[str]:
        """Log records other than the allowed ones (a traceback belongs to the record
        before it)."""
        out: list[str] = []
        allowed = False
        for line in self.log:
            if line.startswith(("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")):
                allowed = line.startswith(ALLOWED_LOG) or line.startswith(("DEBUG", "INFO"))
            if not allowed:
                out.append(line)
        return out

    def allowed_log_records(self) -> int:
        return sum(1 for line in self.log if line.startswith(ALLOWED_LOG))


def _start(server: str, parser: str) -> FuzzServer:
    cmd = [sys.executable, str(HERE / "fuzz_server.py"), "--server", server, "--http", parser]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, env={**os.environ, "PYTHONPATH": str(HERE.parents[1])},
    )
    assert proc.stdout is not None
    log: list[str] = []
    for line in proc.stdout:
        if line.startswith("READY "):
            ports = json.loads(line[6:])
            break
        log.append(line.rstrip("\n"))
    else:
        raise AssertionError(f"{cmd} did not start:\n" + "\n".join(log))
    fuzz = FuzzServer(f"{server}/{parser}", proc, ports, Neighbour(ports["mcp"]), log)

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            fuzz.log.append(line.rstrip("\n"))

    threading.Thread(target=drain, daemon=True).start()
    return fuzz


@contextlib.contextmanager
def fuzz_servers(kinds: Sequence[tuple[str, str]] = KINDS) -> Iterator[list[FuzzServer]]:
    """Start a server process of each kind, with its neighbour; stop them all after."""
    servers: list[FuzzServer] = []
    try:
        for server, parser in kinds:
            servers.append(_start(server, parser))
        for fuzz in servers:
            fuzz.neighbour.start()
        yield servers
    finally:
        for fuzz in servers:
            fuzz.neighbour.stop()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(fuzz.proc.pid, signal.SIGTERM)
        for fuzz in servers:
            try:
                fuzz.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(fuzz.proc.pid, signal.SIGKILL)
                fuzz.proc.wait(timeout=10)


@attrs.frozen
class Outcome:
    """How one fuzzed connection went."""

    data: bytes
    closed: bool
    reset: bool
    seconds: float

    def problems(self, sent: bytes = b"") -> list[str]:
        """What breaks the invariants: no end within the time allowed (but for an event
        stream that was asked for and still runs), an answer that is not HTTP/1.x (but
        HTTP/2's frames to ``sent`` HTTP/2's preface, from a port hypercorn serves: its
        answers are 505 too, TM-SEC-H2), a 5xx other than 501, 503 and 505."""
        found = []
        if not self.closed and not _live_stream(self.data):
            found.append(f"not ended after {self.seconds:.1f} s")
        http2 = sent.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        if self.data and not self.data.startswith(b"HTTP/1.") and not http2:
            found.append(f"an answer that is not HTTP/1.x: {self.data[:80]!r}")
        for answer in responses(self.data):
            if answer.status >= 500 and answer.status not in ALLOWED_5XX:
                found.append(f"status {answer.status}: {answer.body[:200]!r}")
        return found


def _live_stream(data: bytes) -> bool:
    """Whether ``data`` holds the head of a 200 event stream (the inspector's ``/events``,
    a GET or listen stream of the endpoint): a response that lasts as long as its client
    reads it, which a client that only shut its writing side still does (and ahead of which
    HTTP/1.1 cannot answer what it pipelined after it)."""
    at = data.find(b"HTTP/1.1 200 ")
    while at >= 0:
        end = data.find(b"\r\n\r\n", at)
        head = data[at : end if end >= 0 else len(data)].lower()
        if b"content-type: text/event-stream" in head:
            return True
        at = data.find(b"HTTP/1.1 200 ", at + 1)
    return False


def send(port: int, pieces: Sequence[bytes], *, timeout: float = 8.0) -> Outcome:
    """Write ``pieces`` to 127.0.0.1:``port``, shut the writing side, and read until the
    server closes the connection (or resets it), or ``timeout`` passes."""
    began = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got = bytearray()
    closed = reset = False
    try:
        sock.settimeout(timeout)
        with contextlib.suppress(OSError):
            for piece in pieces:
                sock.sendall(piece)
            sock.shutdown(socket.SHUT_WR)
        deadline = began + timeout
        while True:
            sock.settimeout(max(0.01, deadline - time.perf_counter()))
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = reset = True
                break
            if not data:
                closed = True
                break
            got += data
    finally:
        sock.close()
    return Outcome(bytes(got), closed, reset, time.perf_counter() - began)


def summary(servers: Sequence[FuzzServer]) -> dict[str, dict[str, float]]:
    """Each neighbour's pings: how many, their median and p99 latency, its failures."""
    return {
        fuzz.name: {
            "pings": len(fuzz.neighbour.latencies),
            "median_ms": 1000 * statistics.median(fuzz.neighbour.latencies or [0.0]),
            "p99_ms": 1000 * fuzz.neighbour.p99(),
            "failures": len(fuzz.neighbour.failures),
            "hypercorn_isolated": fuzz.allowed_log_records(),
        }
        for fuzz in servers
    }
