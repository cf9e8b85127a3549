# A real redis-server for the tests of the shared session store (tests/store/): Debian's
# package, started on a free loopback port with no persistence, one per test session (and
# one of its own for a test that stops and starts it). Missing, it fails the tests loudly:
# a store test that skips would pass without running.
from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

__all__ = ["RedisServer", "redis_server", "redis_url", "shared_redis"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process on 127.0.0.1: ``stop()`` kills it (SIGKILL: a crash, its
    data gone), ``start()`` starts it again on the same port."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError(
                "redis-server is not installed (apt-get install -y redis-server; the test "
                "run installs it where it may: tests/support/system.py); the store tests "
                "need a real one"
            )
        self.exe = exe
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="trio-mcp-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                assert self.proc.stderr is not None
                raise RuntimeError(f"redis-server exited: {self.proc.stderr.read().decode()}")
            if self.command(b"PING").startswith(b"+PONG"):
                return
            time.sleep(0.01)
        raise RuntimeError("redis-server did not answer PING within 10 s")

    def command(self, *words: bytes) -> bytes:
        """One command over a raw socket (RESP), its raw reply; b"" when unreachable."""
        payload = b"*%d\r\n" % len(words) + b"".join(
            b"$%d\r\n%s\r\n" % (len(w), w) for w in words
        )
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(payload)
                return s.recv(1 << 20)
        except OSError:
            return b""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def redis_url(shared_redis: RedisServer) -> str:
    """The URL of the test session's Redis, emptied for this test."""
    shared_redis.command(b"FLUSHALL")
    return shared_redis.url


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A Redis of this test's own, to stop and start."""
    server = RedisServer()
    server.start()
    yield server
    server.close()
