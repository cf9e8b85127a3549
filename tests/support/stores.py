# The shared stores the store tests run against (tests/store/, and the two-worker resumption
# schedules): a real redis-server (tests/support/redis.py) and the in-process store
# (trio_mcp.runtime.store._memstore). Each is one StoreBackend: what a test gives
# ServerConfig.store,
# a connection of its own for the contract tests that drive the store directly, and the few
# looks into the store and faults a test needs (a record deleted behind the workers' backs,
# the store stopped, its writes paused), each done the store's own way.
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from trio_mcp import ServerConfig
from trio_mcp.runtime.store._memstore import InProcessStore, SharedMemory
from trio_mcp.runtime.store._redis import RedisStore

from .redis import RedisServer

__all__ = [
    "STORES",
    "InProcessBackend",
    "RedisBackend",
    "StoreBackend",
    "own_store",
    "shared_store",
    "task_status",
]

#: Every store the contract tests run against.
STORES = ("redis", "in-process")


class StoreBackend:
    """A shared store, for one test."""

    name: str

    @property
    def config_store(self) -> Any:
        """What ``ServerConfig.store`` is given: a URL or a store factory."""
        raise NotImplementedError

    def config(self, **settings: Any) -> ServerConfig:
        """The test's server settings with this store. Each call to the store may take 5 s,
        not the default 1 s: beside five other test workers, a Redis subscribe of an 8 KB URI
        once took longer, and the test saw the store as down (a test of the timeout itself
        sets its own)."""
        settings.setdefault("store_timeout", 5.0)
        return ServerConfig(store=self.config_store, **settings)

    def connect(self, *, timeout: float = 1.0) -> RedisStore | InProcessStore:
        """A connection of the test's own (run it: ``nursery.start(store.run, ...)``)."""
        raise NotImplementedError

    def records(self) -> int:
        """How many sessions the store holds (expired ones left out)."""
        raise NotImplementedError

    def unit_records(self, unit: str) -> int:
        raise NotImplementedError

    def holds_session(self, session_id: str) -> bool:
        raise NotImplementedError

    def subscription_count(self, session_id: str) -> int:
        raise NotImplementedError

    def end_silently(self, session_id: str) -> bool:
        """Delete a session's record with no word on the control bus (a message lost)."""
        raise NotImplementedError

    def holds_relay(self, origin: str) -> bool:
        raise NotImplementedError

    def forget_relay(self, origin: str) -> None:
        """Drop a worker's relay address, as its expiry would."""
        raise NotImplementedError

    def task(self, task_id: str) -> bytes:
        """A task as the store keeps it (its JSON; b"" when none)."""
        raise NotImplementedError

    def break_task(self, task_id: str) -> None:
        """Keep under ``task_id`` what the store cannot read back (a key of another type)."""
        raise NotImplementedError

    def copy_lengths(self) -> list[int]:
        """How many events each request stream's copy holds."""
        raise NotImplementedError

    def pause_writes(self, seconds: float) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """The store goes down, losing what it held."""
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def footprint(self) -> int:
        """What the store holds, in bytes (Redis: its used memory)."""
        raise NotImplementedError


class RedisBackend(StoreBackend):
    name = "redis"

    def __init__(self, redis: RedisServer, prefix: str = "trio-mcp") -> None:
        self.redis = redis
        self.prefix = prefix

    @property
    def config_store(self) -> str:
        return self.redis.url

    def connect(self, *, timeout: float = 1.0) -> RedisStore:
        return RedisStore(self.redis.url, timeout=timeout, prefix=self.prefix)

    def _int(self, *words: bytes) -> int:
        raw = self.redis.command(*words)
        assert raw.startswith(b":"), raw
        return int(raw[1:].strip())

    def records(self) -> int:
        return self._int(b"ZCARD", f"{self.prefix}:sessions".encode())

    def unit_records(self, unit: str) -> int:
        return self._int(b"ZCARD", f"{self.prefix}:unit:{unit}".encode())

    def holds_session(self, session_id: str) -> bool:
        return self._int(b"EXISTS", f"{self.prefix}:session:{session_id}".encode()) == 1

    def subscription_count(self, session_id: str) -> int:
        return self._int(b"SCARD", f"{self.prefix}:subs:{session_id}".encode())

    def end_silently(self, session_id: str) -> bool:
        return self._int(b"DEL", f"{self.prefix}:session:{session_id}".encode()) == 1

    def holds_relay(self, origin: str) -> bool:
        return self._int(b"EXISTS", f"{self.prefix}:relay:{origin}".encode()) == 1

    def forget_relay(self, origin: str) -> None:
        self.redis.command(b"DEL", f"{self.prefix}:relay:{origin}".encode())

    def task(self, task_id: str) -> bytes:
        return self.redis.command(b"GET", f"{self.prefix}:task:{task_id}".encode())

    def break_task(self, task_id: str) -> None:
        self.redis.command(b"HSET", f"{self.prefix}:task:{task_id}".encode(), b"f", b"v")

    def copy_lengths(self) -> list[int]:
        raw = self.redis.command(b"KEYS", f"{self.prefix}:ev:*".encode())
        keys = re.findall(rb"\$\d+\r\n([^\r]*)\r\n", raw)
        return [self._int(b"XLEN", key) for key in keys]

    def pause_writes(self, seconds: float) -> None:
        self.redis.command(b"CLIENT", b"PAUSE", str(int(seconds * 1000)).encode(), b"WRITE")

    def stop(self) -> None:
        self.redis.stop()

    def start(self) -> None:
        self.redis.start()

    def footprint(self) -> int:
        raw = self.redis.command(b"INFO", b"memory").decode()
        found = re.search(r"^used_memory:(\d+)", raw, re.MULTILINE)
        assert found, raw
        return int(found.group(1))


class InProcessBackend(StoreBackend):
    name = "in-process"

    def __init__(self) -> None:
        self.memory = SharedMemory()

    @property
    def config_store(self) -> Any:
        return self.memory.connect

    def connect(self, *, timeout: float = 1.0) -> InProcessStore:
        return self.memory.connect(timeout=timeout)

    def _now(self) -> float:
        import trio

        return trio.current_time()

    def records(self) -> int:
        return self.memory.data.counts("", self._now())[0]

    def unit_records(self, unit: str) -> int:
        return self.memory.data.counts(unit, self._now())[1]

    def holds_session(self, session_id: str) -> bool:
        return self.memory.data.holds_session(session_id, self._now())

    def subscription_count(self, session_id: str) -> int:
        return len(self.memory.data.subscriptions_of(session_id, self._now()))

    def end_silently(self, session_id: str) -> bool:
        return self.memory.end_silently(session_id)

    def holds_relay(self, origin: str) -> bool:
        return self.memory.data.locate(origin, self._now()) is not None

    def forget_relay(self, origin: str) -> None:
        self.memory.data.forget_relay(origin)

    def task(self, task_id: str) -> bytes:
        held = self.memory.data.task_json(task_id, self._now())
        return b"" if held is None else held.encode()

    def break_task(self, task_id: str) -> None:
        self.memory.break_task(task_id)

    def copy_lengths(self) -> list[int]:
        return self.memory.data.copy_lengths(self._now())

    def pause_writes(self, seconds: float) -> None:
        self.memory.pause_writes(seconds)

    def stop(self) -> None:
        self.memory.stop()

    def start(self) -> None:
        self.memory.start()

    def footprint(self) -> int:
        return self.memory.data.footprint()


def task_status(backend: StoreBackend, task_id: str) -> str | None:
    """The status of a task as the store keeps it (None: not kept, or unreadable)."""
    raw = backend.task(task_id)
    try:
        status: str = json.loads(raw.split(b"\r\n", 2)[1] if raw.startswith(b"$") else raw)[
            "t"]["status"]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return status


@pytest.fixture(params=STORES)
def shared_store(request: pytest.FixtureRequest) -> StoreBackend:
    """The shared store of this run of the test: the test session's Redis (emptied for the
    test), or an in-process store of the test's own."""
    if request.param == "redis":
        redis: RedisServer = request.getfixturevalue("shared_redis")
        redis.command(b"FLUSHALL")
        return RedisBackend(redis)
    return InProcessBackend()


@pytest.fixture(params=STORES)
def own_store(request: pytest.FixtureRequest) -> Iterator[StoreBackend]:
    """A shared store of this test's own, to stop and start: a Redis of its own, or an
    in-process store."""
    if request.param == "redis":
        server = RedisServer()
        server.start()
        try:
            yield RedisBackend(server)
        finally:
            server.close()
        return
    yield InProcessBackend()
