# The Redis session store (TM-STORE-*): session records as hashes with the session's time to
# live as their expiry, and one pub/sub channel on which workers tell each other what must
# reach the worker running a request. The client is coredis (>= 6, on anyio, so it runs under
# trio natively, cancellation included); every call is bounded by our own deadline, and
# coredis's retries are off, so that an unreachable Redis is a prompt 503, not a stall.
from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import trio

from ..protocol._logtext import LogLimiter
from ._store import (
    Claim,
    ClaimKind,
    Control,
    ControlKind,
    MirrorOp,
    SessionRecord,
    SharedState,
    StoredEvent,
    StoredTask,
    StoreUnavailable,
)

__all__ = ["RedisStore"]

logger = logging.getLogger("trio_mcp.store")

#: The hash fields of a session record.
_FIELDS = ("v", "ci", "cc", "sc", "sb", "peer", "pr", "init", "lvl", "subs")

# Reads a record and renews its expiry in one round trip: the idle time to live once
# notifications/initialized has arrived, the shorter one before (TM-SESS-IDLE).
_FETCH = """
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return h end
local ttl = ARGV[2]
for i = 1, #h, 2 do
  if h[i] == 'init' and h[i + 1] == '1' then ttl = ARGV[1] end
end
redis.call('PEXPIRE', KEYS[1], ttl)
return h
"""

# Writes what changed only while the session exists: a save racing a DELETE must not bring
# the session back.
_SAVE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'init', ARGV[1], 'lvl', ARGV[2], 'subs', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""

# Copies one change of a request stream (TM-STORE-STREAMS): the stream's messages in a Redis
# Stream whose entry ids are the messages' seqs, trimmed to what the holder's window keeps;
# beside it a hash of its requests, the seq of each response, the newest seq lost, and
# whether another worker has claimed it (then nothing more is copied: its end is written).
_APPEND = """
if redis.call('HGET', KEYS[2], 'end') == '1' then return 0 end
if ARGV[8] ~= '' then redis.call('HSETNX', KEYS[2], 'req', ARGV[8]) end
if ARGV[1] ~= '' then
  redis.pcall('XADD', KEYS[1], ARGV[1] .. '-1', 'd', ARGV[3])
  if ARGV[2] == 'r' then redis.call('HSET', KEYS[2], 'a:' .. ARGV[4], ARGV[1]) end
  redis.call('XTRIM', KEYS[1], 'MINID', ARGV[5])
end
local lost = tonumber(redis.call('HGET', KEYS[2], 'lost') or '-1')
if tonumber(ARGV[6]) > lost then redis.call('HSET', KEYS[2], 'lost', ARGV[6]) end
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
return 1
"""

# Reads a gone holder's stream after a cursor, ending it first: each request without a
# response gets the error given for it, so that every resume reads the same end.
_CLAIM = """
local h = redis.call('HGETALL', KEYS[2])
if #h == 0 then return {0} end
local m = {}
for i = 1, #h, 2 do m[h[i]] = h[i + 1] end
local after = tonumber(ARGV[1])
if after < tonumber(m['lost'] or '-1') then return {1, h} end
if m['end'] ~= '1' then
  redis.call('HSET', KEYS[2], 'end', '1')
  local seq = after
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if #last > 0 then
    seq = math.max(seq, tonumber(string.match(last[1][1], '^(%d+)')))
  end
  for rid in string.gmatch(m['req'] or '', '[^\\n]+') do
    if not m['a:' .. rid] then
      seq = seq + 1
      redis.call('XADD', KEYS[1], seq .. '-1', 'd', ARGV[3] .. rid .. ARGV[4])
      redis.call('HSET', KEYS[2], 'a:' .. rid, seq)
    end
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  h = redis.call('HGETALL', KEYS[2])
end
return {2, h, redis.call('XRANGE', KEYS[1], '(' .. after .. '-1', '+')}
"""

# Keeps a task's latest state (TM-STORE-TASKS), unless the state kept is an end: a
# terminal state never moves (TK-STATES), whichever worker wrote it. Returns nothing once
# written, else the end that stays.
_SAVE_TASK = """
local old = redis.call('GET', KEYS[1])
if old then
  local ok, kept = pcall(cjson.decode, old)
  if ok and type(kept) == 'table' and type(kept['t']) == 'table' then
    local status = kept['t']['status']
    if status == 'completed' or status == 'failed' or status == 'cancelled' then
      return old
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""

#: How long the control listener waits before connecting again after losing Redis.
_RECONNECT = (0.1, 5.0)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class RedisStore:
    """Sessions in the Redis at ``url`` (``redis://host:port/db``, or ``unix:///path``),
    under keys that start with ``prefix``; each call waits at most ``timeout`` seconds."""

    def __init__(self, url: str, *, timeout: float = 1.0, prefix: str = "trio-mcp") -> None:
        import coredis
        from coredis.retry import NoRetryPolicy

        parts = urlsplit(url)
        common: dict[str, Any] = {
            "retry_policy": NoRetryPolicy(),
            "connect_timeout": timeout,
            "password": unquote(parts.password) if parts.password else None,
            "username": unquote(parts.username) if parts.username else None,
        }
        if parts.scheme == "unix":
            self._client: coredis.Redis[bytes] = coredis.Redis(
                unix_socket_path=parts.path, **common
            )
        elif parts.scheme in ("redis", "rediss"):
            db = int(parts.path.strip("/") or 0)
            self._client = coredis.Redis(
                parts.hostname or "127.0.0.1", parts.port or 6379, db,
                ssl=parts.scheme == "rediss", **common,
            )
        else:
            raise ValueError(f"a Redis store URL is redis://, rediss:// or unix://, not {url!r}")
        self._errors: tuple[type[BaseException], ...] = (
            coredis.exceptions.RedisError, OSError, TimeoutError, trio.TooSlowError,
        )
        self.url = url
        self.timeout = timeout
        self.prefix = prefix
        self._channel = f"{prefix}:control"
        self._origin = secrets.token_hex(4)
        # Server request ids of this process start at a random multiple of 2**32: two
        # processes' ids meet only after four billion requests, and then one in a million.
        self._outbound_base = (secrets.randbelow(2**20) << 32) + 1
        self._fetch = self._client.register_script(_FETCH)
        self._save = self._client.register_script(_SAVE)
        self._append = self._client.register_script(_APPEND)
        self._claim = self._client.register_script(_CLAIM)
        self._save_task = self._client.register_script(_SAVE_TASK)
        self._running = False
        self._down_log = LogLimiter(interval=10.0)

    # -- SessionStore ---------------------------------------------------------------------

    @property
    def shared(self) -> bool:
        return True

    @property
    def origin(self) -> str:
        return self._origin

    @property
    def outbound_base(self) -> int:
        return self._outbound_base

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}:session:{session_id}"

    async def run(
        self,
        on_control: Callable[[Control], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # The client's connection pool lives in a task group: this task owns it, and any
        # task may send commands while it runs.
        async with self._client, trio.open_nursery() as nursery:
            self._running = True
            try:
                nursery.start_soon(self._listen, on_control)
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._running = False

    async def _listen(self, on_control: Callable[[Control], None]) -> None:
        """Deliver what other workers publish; connect again, for ever, when Redis goes.
        What is published while this worker is not subscribed is lost (TM-STORE-CONTROL)."""
        delay = _RECONNECT[0]
        while True:
            try:
                async with self._client.pubsub(
                    channels=[self._channel], ignore_subscribe_messages=True
                ) as pubsub:
                    delay = _RECONNECT[0]
                    async for message in pubsub:
                        control = self._decode(message.get("data"))
                        if control is not None:
                            on_control(control)
            except* self._errors as group:
                tail = self._down_log.tail("Redis failures")
                if tail is not None:
                    logger.warning(
                        "Redis control channel: %r; retrying%s", group.exceptions[0], tail
                    )
            except* (anyio.ClosedResourceError, anyio.BrokenResourceError):
                # coredis's pub/sub may fail this way while it is cancelled (its cleanup
                # writes to a closed connection): the cancellation stands, at the sleep.
                pass
            await trio.sleep(delay)
            delay = min(delay * 2, _RECONNECT[1])

    def _decode(self, data: object) -> Control | None:
        try:
            raw = json.loads(data) if isinstance(data, bytes | str) else None
            if not isinstance(raw, dict) or raw.get("o") == self._origin:
                return None  # our own
            return Control(ControlKind(raw["k"]), str(raw["s"]), raw.get("p"))
        except (ValueError, KeyError, TypeError):
            logger.warning("Redis control channel: an unreadable message was ignored")
            return None

    async def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        if not self._running:
            raise StoreUnavailable("the Redis store is not running")
        try:
            with trio.fail_after(self.timeout):
                return await fn()
        except self._errors as exc:
            tail = self._down_log.tail("Redis failures")
            if tail is not None:
                logger.warning("Redis %s failed: %r%s", what, exc, tail)
            raise StoreUnavailable(f"Redis {what}: {exc!r}") from exc

    async def create(self, record: SessionRecord, ttl: float) -> None:
        fields = {
            "v": record.version,
            "ci": json.dumps(record.client_info),
            "cc": json.dumps(record.client_capabilities),
            "sc": json.dumps(record.server_capabilities),
            "sb": str(record.client_state_bytes),
            "peer": record.peer or "",
            "pr": record.principal,
            "init": "1" if record.initialized else "0",
            "lvl": record.log_level or "",
            "subs": json.dumps(sorted(record.subscriptions)),
        }
        key = self._key(record.id)

        async def go() -> None:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(key, fields)
                pipe.pexpire(key, _ms(ttl))

        await self._call("create", go)

    async def fetch(
        self, session_id: str, *, idle_ttl: float, uninitialized_ttl: float
    ) -> SessionRecord | None:
        raw = await self._call("fetch", lambda: self._fetch(
            keys=[self._key(session_id)], args=[_ms(idle_ttl), _ms(uninitialized_ttl)]
        ))
        if not raw:
            return None
        items = list(raw)
        h = {
            (k.decode() if isinstance(k, bytes) else str(k)):
            (v.decode() if isinstance(v, bytes) else str(v))
            for k, v in zip(items[::2], items[1::2], strict=True)
        }
        try:
            return SessionRecord(
                id=session_id,
                version=h["v"],
                client_info=json.loads(h["ci"]),
                client_capabilities=json.loads(h["cc"]),
                server_capabilities=json.loads(h["sc"]),
                client_state_bytes=int(h["sb"]),
                peer=h["peer"] or None,
                principal=h["pr"],
                initialized=h["init"] == "1",
                log_level=h["lvl"] or None,
                subscriptions=frozenset(json.loads(h["subs"])),
            )
        except (KeyError, ValueError) as exc:
            # Not a record this code wrote: treated as no session at all.
            logger.warning("session record %s is unreadable (%r): ignored", session_id[:8], exc)
            return None

    async def save(self, session_id: str, state: SharedState, ttl: float) -> bool:
        args = [
            "1" if state.initialized else "0",
            state.log_level or "",
            json.dumps(sorted(state.subscriptions)),
            _ms(ttl),
        ]
        saved = await self._call(
            "save", lambda: self._save(keys=[self._key(session_id)], args=args)
        )
        return bool(saved)

    async def delete(self, session_id: str, reason: str) -> None:
        await self._call("delete", lambda: self._client.delete([self._key(session_id)]))
        await self.publish(Control(ControlKind.END, session_id, reason))

    async def publish(self, control: Control) -> None:
        message = json.dumps(
            {"k": control.kind.value, "s": control.session_id, "o": self._origin,
             "p": control.payload}
        )
        await self._call("publish", lambda: self._client.publish(self._channel, message))

    async def advertise(self, address: str, ttl: float) -> bool:
        key = f"{self.prefix}:relay:{self._origin}"
        before = await self._call(
            "advertise", lambda: self._client.set(key, address, px=_ms(ttl), get=True)
        )
        return before is None

    async def save_task(self, task: StoredTask, ttl: float) -> StoredTask | None:
        key = f"{self.prefix}:task:{task.task_id}"
        value = json.dumps({"o": task.owner, "t": task.task})
        kept = await self._call("save_task", lambda: self._save_task(
            keys=[key], args=[value, _ms(ttl)]
        ))
        return None if kept is None else self._task_of(task.task_id, kept)

    async def load_task(self, task_id: str) -> StoredTask | None:
        key = f"{self.prefix}:task:{task_id}"
        value = await self._call("load_task", lambda: self._client.get(key))
        return None if value is None else self._task_of(task_id, value)

    def _task_of(self, task_id: str, value: Any) -> StoredTask | None:
        try:
            raw = json.loads(value)
            return StoredTask(task_id=task_id, owner=str(raw["o"]), task=dict(raw["t"]))
        except (ValueError, KeyError, TypeError):
            logger.warning("task record %s is unreadable: ignored", task_id[:8])
            return None

    async def locate(self, origin: str) -> str | None:
        key = f"{self.prefix}:relay:{origin}"
        value = await self._call("locate", lambda: self._client.get(key))
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    async def keep_alive(self, session_ids: Iterable[str], ttl: float) -> set[str]:
        ids = list(session_ids)
        if not ids:
            return set()

        async def go() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                results = [pipe.pexpire(self._key(sid), _ms(ttl)) for sid in ids]
            return [await r for r in results]

        renewed = await self._call("keep_alive", go)
        return {sid for sid, ok in zip(ids, renewed, strict=True) if not ok}

    # -- request streams (TM-STORE-STREAMS) -----------------------------------------------

    def _stream_keys(self, session_id: str, origin: str, stream: int) -> list[str]:
        where = f"{session_id}:{origin}:{stream}"
        return [f"{self.prefix}:ev:{where}", f"{self.prefix}:evm:{where}"]

    async def mirror(self, ops: Sequence[MirrorOp], ttl: float) -> list[bool]:
        if not ops:
            return []
        ms = _ms(ttl)

        async def go() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                results: list[Any] = [
                    self._append(
                        keys=self._stream_keys(op.session_id, self._origin, op.stream),
                        args=[
                            "" if op.seq is None else op.seq,
                            "r" if op.answers is not None else "m",
                            op.data,
                            op.answers or "",
                            op.first_kept,
                            op.lost,
                            ms,
                            op.requests,
                        ],
                        client=pipe,
                    )
                    for op in ops
                ]
            return [await r for r in results]

        done = await self._call("mirror", go)
        return [bool(r) for r in done]

    async def claim(
        self, session_id: str, origin: str, stream: int, after: int,
        prefix: bytes, suffix: bytes, *, ttl: float,
    ) -> Claim:
        args: list[Any] = [after, _ms(ttl), prefix, suffix]
        raw = await self._call("claim", lambda: self._claim(
            keys=self._stream_keys(session_id, origin, stream), args=args
        ))
        if not raw or int(raw[0]) == 0:
            return Claim(ClaimKind.UNKNOWN)
        flat = [x.decode() if isinstance(x, bytes) else str(x) for x in raw[1]]
        meta = dict(zip(flat[::2], flat[1::2], strict=True))
        try:
            requests = tuple(r for r in meta.get("req", "").split("\n") if r)
            answered = {k[2:]: int(v) for k, v in meta.items() if k.startswith("a:")}
            lost = int(meta.get("lost", "-1"))
        except (ValueError, TypeError):
            logger.warning("stream %s.%s is unreadable: ignored", session_id[:8], stream)
            return Claim(ClaimKind.UNKNOWN)
        if int(raw[0]) == 1:
            return Claim(ClaimKind.GAP, requests=requests, answered=answered, lost=lost)
        events = []
        for entry_id, fields in raw[2]:
            ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            values = dict(zip(fields[::2], fields[1::2], strict=True))
            data = values.get(b"d", values.get("d", b""))
            events.append(StoredEvent(
                seq=int(ident.split("-", 1)[0]),
                data=data if isinstance(data, bytes) else str(data).encode(),
            ))
        return Claim(
            ClaimKind.EVENTS, requests=requests, answered=answered, events=tuple(events),
            lost=lost,
        )
