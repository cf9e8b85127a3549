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
    CreateKind,
    CreateOutcome,
    MirrorOp,
    SessionRecord,
    SharedState,
    StoredEvent,
    StoredTask,
    StoreLimits,
    StoreUnavailable,
    SubscriptionChange,
)

__all__ = ["RedisStore"]

logger = logging.getLogger("trio_mcp.store")

#: The hash fields of a session record written at its creation; besides them, "u" (its
#: unit), "at" (when it was last renewed, Redis's clock, ms) and "sv" (its subscriptions'
#: version). The subscriptions are a set of their own (TM-STORE-SUBS).
_FIELDS = ("v", "ci", "cc", "sc", "sb", "peer", "pr", "init", "lvl")

#: The most records one creation deletes to make room (TM-STORE-BOUND).
_MAX_EVICT = 8

# What every script below shares (TM-STORE-BOUND). A session is its record (a hash), its
# subscriptions (a set), and the set of the keys of its streams' copies. It is counted in two
# sorted sets, one of all sessions (<p>:sessions) and one of its unit's (<p>:unit:<unit>),
# each member scored with the record's expiry (ms, Redis's clock), so that an expired record
# leaves both counts when it expires: `expire` takes it out before anything is counted. Two
# more sorted sets order the same members by their last renewal (<p>:used, <p>:used:<unit>),
# for the choice of whom to evict: the expiry cannot order them, since a session not yet
# initialized lives 60 s and one initialized 30 minutes. The keys a script reaches from a
# record (its unit's sets, its copies) are not all in KEYS: the store supports a single
# Redis, not a cluster.
_LIB = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function keep_for(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local function renew(p, id, rec, ttl, now)
  ttl = tonumber(ttl)
  redis.call('PEXPIRE', rec, ttl)
  redis.call('HSET', rec, 'at', now)
  redis.call('PEXPIRE', p .. ':subs:' .. id, ttl)
  redis.call('ZADD', p .. ':sessions', 'XX', now + ttl, id)
  redis.call('ZADD', p .. ':used', 'XX', now, id)
  local u = redis.call('HGET', rec, 'u')
  if u then
    local uk, used = p .. ':unit:' .. u, p .. ':used:' .. u
    redis.call('ZADD', uk, 'XX', now + ttl, id)
    redis.call('ZADD', used, 'XX', now, id)
    keep_for(uk, ttl)
    keep_for(used, ttl)
  end
end
local function drop(p, id)
  local rec = p .. ':session:' .. id
  local u = redis.call('HGET', rec, 'u')
  local copies = p .. ':copies:' .. id
  local keys = redis.call('SMEMBERS', copies)
  for i = 1, #keys do redis.call('DEL', keys[i]) end
  redis.call('DEL', rec, p .. ':subs:' .. id, copies)
  redis.call('ZREM', p .. ':sessions', id)
  redis.call('ZREM', p .. ':used', id)
  if u then
    redis.call('ZREM', p .. ':unit:' .. u, id)
    redis.call('ZREM', p .. ':used:' .. u, id)
  end
end
local function expire(counted, ordered, now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', counted, '-inf', now)) do
    redis.call('ZREM', ordered, id)
  end
  redis.call('ZREMRANGEBYSCORE', counted, '-inf', now)
end
"""

# Creates a record within the store's bound (TM-STORE-BOUND): at a cap (its unit's, then the
# store's), the least recently renewed record, if it has not been renewed for ARGV[4] ms, is
# deleted to make room; with none such, the creation is refused.
_CREATE = _LIB + """
local p, id, unit = ARGV[5], ARGV[6], ARGV[7]
local now = now_ms()
local all, all_used = p .. ':sessions', p .. ':used'
local uk, unit_used = p .. ':unit:' .. unit, p .. ':used:' .. unit
local idle_before = now - tonumber(ARGV[4])
expire(all, all_used, now)
expire(uk, unit_used, now)
local evicted = {}
local function room(counted, ordered, cap)
  if cap == '' then return true end
  cap = tonumber(cap)
  while redis.call('ZCARD', counted) >= cap do
    if #evicted >= MAX_EVICT then return false end
    local oldest = redis.call('ZRANGEBYSCORE', ordered, '-inf', idle_before, 'LIMIT', 0, 1)
    if #oldest == 0 then return false end
    drop(p, oldest[1])
    evicted[#evicted + 1] = oldest[1]
  end
  return true
end
if not room(uk, unit_used, ARGV[3]) then return {'unit-full', evicted} end
if not room(all, all_used, ARGV[2]) then return {'store-full', evicted} end
local ttl = tonumber(ARGV[1])
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'u', unit, 'at', now, 'sv', 0, unpack(fields))
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', all, now + ttl, id)
redis.call('ZADD', all_used, now, id)
redis.call('ZADD', uk, now + ttl, id)
redis.call('ZADD', unit_used, now, id)
keep_for(uk, ttl)
keep_for(unit_used, ttl)
return {'created', evicted}
""".replace("MAX_EVICT", str(_MAX_EVICT))

# Reads a record and renews it in one round trip: the idle time to live once
# notifications/initialized has arrived, the shorter one before (TM-SESS-IDLE). The
# subscriptions come with it only when their version is not the one the reader has seen.
_FETCH = _LIB + """
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return {h} end
local ttl = ARGV[2]
local sv = '0'
for i = 1, #h, 2 do
  if h[i] == 'init' and h[i + 1] == '1' then ttl = ARGV[1] end
  if h[i] == 'sv' then sv = h[i + 1] end
end
renew(ARGV[3], ARGV[4], KEYS[1], ttl, now_ms())
if ARGV[5] == sv then return {h} end
return {h, redis.call('SMEMBERS', ARGV[3] .. ':subs:' .. ARGV[4])}
"""

# Writes what changed only while the session exists: a save racing a DELETE must not bring
# the session back.
_SAVE = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'init', ARGV[1], 'lvl', ARGV[2])
renew(ARGV[4], ARGV[5], KEYS[1], ARGV[3], now_ms())
return 1
"""

# One subscription more (TM-STORE-SUBS): SADD, unless the session has ARGV[2] already.
# Returns {1 added | 0 already | -1 no session | -2 full, the subscriptions' version}.
_SUBSCRIBE = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local subs = ARGV[4] .. ':subs:' .. ARGV[5]
local sv = tonumber(redis.call('HGET', KEYS[1], 'sv') or '0')
if redis.call('SISMEMBER', subs, ARGV[1]) == 1 then return {0, sv} end
if redis.call('SCARD', subs) >= tonumber(ARGV[2]) then return {-2, sv} end
redis.call('SADD', subs, ARGV[1])
sv = redis.call('HINCRBY', KEYS[1], 'sv', 1)
renew(ARGV[4], ARGV[5], KEYS[1], ARGV[3], now_ms())
return {1, sv}
"""

# One subscription less: SREM. Returns {1 removed | 0 not there | -1 no session, version}.
_UNSUBSCRIBE = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local sv = tonumber(redis.call('HGET', KEYS[1], 'sv') or '0')
if redis.call('SREM', ARGV[3] .. ':subs:' .. ARGV[4], ARGV[1]) == 0 then return {0, sv} end
sv = redis.call('HINCRBY', KEYS[1], 'sv', 1)
renew(ARGV[3], ARGV[4], KEYS[1], ARGV[2], now_ms())
return {1, sv}
"""

# Renews a record that has work running at a worker; 0 when it has ended meanwhile.
_KEEP = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
renew(ARGV[2], ARGV[3], KEYS[1], ARGV[1], now_ms())
return 1
"""

# The counts (TM-STORE-BOUND): what expired leaves them first.
_COUNT = _LIB + """
local now = now_ms()
expire(KEYS[1], KEYS[3], now)
expire(KEYS[2], KEYS[4], now)
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2])}
"""

# Evicts a session a worker evicted (TM-STORE-BOUND), unless it was renewed within ARGV[3] ms:
# another worker runs something of it, or its client used it there.
_EVICT = _LIB + """
local at = redis.call('HGET', KEYS[1], 'at')
if not at then return 0 end
if now_ms() - tonumber(at) < tonumber(ARGV[3]) then return 0 end
drop(ARGV[1], ARGV[2])
return 1
"""

# Deletes everything of a session at once: record, subscriptions, streams' copies, counts.
_DELETE = _LIB + """
drop(ARGV[1], ARGV[2])
return 1
"""

# Copies one change of a request stream (TM-STORE-STREAMS): the stream's messages in a Redis
# Stream whose entry ids are the messages' seqs, trimmed to what the holder's window keeps;
# beside it a hash of its requests, the seq of each response, the newest seq lost, and
# whether another worker has claimed it (then nothing more is copied: its end is written).
_APPEND = """
if redis.call('HGET', KEYS[2], 'end') == '1' then return 0 end
-- TM-STORE-BOUND: nothing is copied of a session that has ended (its copies are deleted
-- with it), and the session keeps the keys of its copies, to delete them.
if redis.call('EXISTS', KEYS[4]) == 0 then return 0 end
if redis.call('SADD', KEYS[3], KEYS[1], KEYS[2]) > 0 then
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
end
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
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[7]) then redis.call('PEXPIRE', KEYS[3], ARGV[7]) end
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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _change(raw: Sequence[Any]) -> SubscriptionChange:
    status, version = int(raw[0]), int(raw[1])
    return SubscriptionChange(
        changed=status == 1, version=version, full=status == -2, gone=status == -1
    )


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
        self._create = self._client.register_script(_CREATE)
        self._fetch = self._client.register_script(_FETCH)
        self._save = self._client.register_script(_SAVE)
        self._subscribe = self._client.register_script(_SUBSCRIBE)
        self._unsubscribe = self._client.register_script(_UNSUBSCRIBE)
        self._keep = self._client.register_script(_KEEP)
        self._delete = self._client.register_script(_DELETE)
        self._count = self._client.register_script(_COUNT)
        self._evict = self._client.register_script(_EVICT)
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

    async def create(
        self, record: SessionRecord, ttl: float, limits: StoreLimits
    ) -> CreateOutcome:
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
        }
        args: list[Any] = [
            _ms(ttl),
            "" if limits.max_sessions is None else limits.max_sessions,
            "" if limits.max_per_unit is None else limits.max_per_unit,
            _ms(limits.idle_after),
            self.prefix,
            record.id,
            record.unit,
        ]
        for name in _FIELDS:
            args += [name, fields[name]]
        raw = await self._call(
            "create", lambda: self._create(keys=[self._key(record.id)], args=args)
        )
        kind, evicted = _text(raw[0]), tuple(_text(e) for e in raw[1])
        outcome = CreateOutcome(CreateKind(kind), evicted)
        for gone in evicted:
            # Their holders end them, as after a DELETE (TM-STORE-CONTROL).
            await self.publish(Control(ControlKind.END, gone, "evicted"))
        return outcome

    async def fetch(
        self, session_id: str, *, idle_ttl: float, uninitialized_ttl: float,
        subscriptions_seen: int | None = None,
    ) -> SessionRecord | None:
        seen = "" if subscriptions_seen is None else str(subscriptions_seen)
        raw = await self._call("fetch", lambda: self._fetch(
            keys=[self._key(session_id)],
            args=[_ms(idle_ttl), _ms(uninitialized_ttl), self.prefix, session_id, seen],
        ))
        items = list(raw[0]) if raw else []
        if not items:
            return None
        h = {_text(k): _text(v) for k, v in zip(items[::2], items[1::2], strict=True)}
        subscriptions = frozenset(_text(u) for u in raw[1]) if len(raw) > 1 else None
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
                unit=h.get("u", ""),
                initialized=h["init"] == "1",
                log_level=h["lvl"] or None,
                subscriptions=subscriptions,
                subscriptions_version=int(h.get("sv", "0")),
            )
        except (KeyError, ValueError) as exc:
            # Not a record this code wrote: treated as no session at all.
            logger.warning("session record %s is unreadable (%r): ignored", session_id[:8], exc)
            return None

    async def save(self, session_id: str, state: SharedState, ttl: float) -> bool:
        args = [
            "1" if state.initialized else "0",
            state.log_level or "",
            _ms(ttl),
            self.prefix,
            session_id,
        ]
        saved = await self._call(
            "save", lambda: self._save(keys=[self._key(session_id)], args=args)
        )
        return bool(saved)

    async def subscribe(
        self, session_id: str, uri: str, *, max_subscriptions: int, ttl: float
    ) -> SubscriptionChange:
        args: list[Any] = [uri, max_subscriptions, _ms(ttl), self.prefix, session_id]
        raw = await self._call(
            "subscribe", lambda: self._subscribe(keys=[self._key(session_id)], args=args)
        )
        return _change(raw)

    async def unsubscribe(self, session_id: str, uri: str, *, ttl: float) -> SubscriptionChange:
        args: list[Any] = [uri, _ms(ttl), self.prefix, session_id]
        raw = await self._call(
            "unsubscribe", lambda: self._unsubscribe(keys=[self._key(session_id)], args=args)
        )
        return _change(raw)

    async def delete(self, session_id: str, reason: str) -> None:
        await self._call("delete", lambda: self._delete(
            keys=[self._key(session_id)], args=[self.prefix, session_id]
        ))
        await self.publish(Control(ControlKind.END, session_id, reason))

    async def evict(self, session_id: str, idle_after: float) -> bool:
        args: list[Any] = [self.prefix, session_id, _ms(idle_after)]
        evicted = await self._call(
            "evict", lambda: self._evict(keys=[self._key(session_id)], args=args)
        )
        if evicted:
            await self.publish(Control(ControlKind.END, session_id, "evicted"))
        return bool(evicted)

    async def counts(self, unit: str) -> tuple[int, int]:
        """The sessions the store holds now (TM-STORE-BOUND): in all, and of ``unit``."""

        p = self.prefix
        keys = [f"{p}:sessions", f"{p}:unit:{unit}", f"{p}:used", f"{p}:used:{unit}"]
        raw = await self._call("counts", lambda: self._count(keys=keys, args=[]))
        return int(raw[0]), int(raw[1])

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
        ms = _ms(ttl)

        async def go() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                results: list[Any] = [
                    self._keep(
                        keys=[self._key(sid)], args=[ms, self.prefix, sid], client=pipe
                    )
                    for sid in ids
                ]
            return [await r for r in results]

        renewed = await self._call("keep_alive", go)
        return {sid for sid, ok in zip(ids, renewed, strict=True) if not ok}

    # -- request streams (TM-STORE-STREAMS) -----------------------------------------------

    def _stream_keys(self, session_id: str, origin: str, stream: int) -> list[str]:
        where = f"{session_id}:{origin}:{stream}"
        return [f"{self.prefix}:ev:{where}", f"{self.prefix}:evm:{where}"]

    def _copy_keys(self, session_id: str, stream: int) -> list[str]:
        """What a copy's script touches: the stream and its hash, the session's set of its
        copies' keys, and its record (TM-STORE-BOUND)."""
        return [
            *self._stream_keys(session_id, self._origin, stream),
            f"{self.prefix}:copies:{session_id}",
            self._key(session_id),
        ]

    async def mirror(self, ops: Sequence[MirrorOp], ttl: float) -> list[bool]:
        if not ops:
            return []
        ms = _ms(ttl)

        async def go() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                results: list[Any] = [
                    self._append(
                        keys=self._copy_keys(op.session_id, op.stream),
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
