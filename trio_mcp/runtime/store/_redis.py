# The Redis store (TM-STORE-*), one implementation of the store contract
# (trio_mcp.runtime.store._store): session records as hashes with the session's time to live as
# their
# expiry, one pub/sub channel for the control bus, request streams' copies as Redis Streams.
# Each step that must be atomic is a Lua script (trio_mcp.runtime.store._redis_lua, which also lists
# the keys). The client is coredis (>= 6, on anyio, so it runs under trio natively,
# cancellation included); every call is bounded by our own deadline, and coredis's retries
# are off, so that an unreachable Redis is a prompt 503, not a stall.
from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import anyio
import trio

from ...protocol import RequestId
from ...protocol._logtext import LogLimiter
from . import _redis_lua as lua
from ._store import (
    Claim,
    ClaimKind,
    Control,
    ControlKind,
    CreateKind,
    CreateOutcome,
    SessionRecord,
    SharedState,
    StoredEvent,
    StoredTask,
    StoreFactory,
    StoreLimits,
    StoreUnavailable,
    StreamChange,
    SubscriptionChange,
)

if TYPE_CHECKING:
    from ...base._config import ServerConfig

__all__ = ["RedisStore", "redis_store"]

logger = logging.getLogger("trio_mcp.store")

#: How long the control listener waits before connecting again after losing Redis.
_RECONNECT = (0.1, 5.0)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def redis_store(url: str) -> StoreFactory:
    """The store factory of the Redis at ``url`` (what ``--store redis://...`` names): each
    runtime gets a connection of its own, with the configuration's timeout and prefix."""

    def connect(config: ServerConfig) -> RedisStore:
        return RedisStore(url, timeout=config.store_timeout, prefix=config.store_prefix)

    return connect


def _rid(value: object) -> RequestId:
    """A request id as the store keeps it: JSON of a string or an integer."""
    rid = json.loads(value if isinstance(value, str | bytes) else str(value))
    if isinstance(rid, bool) or not isinstance(rid, str | int):
        raise ValueError(f"not a request id: {rid!r}")
    return rid


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
        self._create = self._client.register_script(lua.CREATE)
        self._fetch = self._client.register_script(lua.FETCH)
        self._save = self._client.register_script(lua.SAVE)
        self._subscribe = self._client.register_script(lua.SUBSCRIBE)
        self._unsubscribe = self._client.register_script(lua.UNSUBSCRIBE)
        self._keep = self._client.register_script(lua.KEEP)
        self._delete = self._client.register_script(lua.DELETE)
        self._count = self._client.register_script(lua.COUNT)
        self._evict = self._client.register_script(lua.EVICT)
        self._append = self._client.register_script(lua.APPEND)
        self._claim = self._client.register_script(lua.CLAIM)
        self._save_task = self._client.register_script(lua.SAVE_TASK)
        self._running = False
        self._down_log = LogLimiter(interval=10.0)

    # -- SharedStore ----------------------------------------------------------------------

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
            "version": record.version,
            "client_info": json.dumps(record.client_info),
            "client_capabilities": json.dumps(record.client_capabilities),
            "server_capabilities": json.dumps(record.server_capabilities),
            "state_bytes": str(record.client_state_bytes),
            "peer": record.peer or "",
            "principal": record.principal,
            "initialized": "1" if record.initialized else "0",
            "log_level": record.log_level or "",
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
        for name in lua.RECORD_FIELDS:
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
                version=h["version"],
                client_info=json.loads(h["client_info"]),
                client_capabilities=json.loads(h["client_capabilities"]),
                server_capabilities=json.loads(h["server_capabilities"]),
                client_state_bytes=int(h["state_bytes"]),
                peer=h["peer"] or None,
                principal=h["principal"],
                unit=h.get("unit", ""),
                initialized=h["initialized"] == "1",
                log_level=h["log_level"] or None,
                subscriptions=subscriptions,
                subscriptions_version=int(h.get("subs_version", "0")),
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

    async def copy(self, changes: Sequence[StreamChange], ttl: float) -> list[bool]:
        if not changes:
            return []
        ms = _ms(ttl)

        async def go() -> list[Any]:
            async with self._client.pipeline(transaction=False) as pipe:
                results: list[Any] = [
                    self._append(
                        keys=self._copy_keys(change.session_id, change.stream),
                        args=[
                            "" if change.seq is None else change.seq,
                            "m" if change.answers is None else "r",
                            change.data,
                            "" if change.answers is None else json.dumps(change.answers),
                            change.first_kept,
                            change.lost,
                            ms,
                            "\n".join(json.dumps(r) for r in change.requests),
                        ],
                        client=pipe,
                    )
                    for change in changes
                ]
            return [await r for r in results]

        done = await self._call("copy", go)
        return [bool(r) for r in done]

    async def claim(
        self, session_id: str, origin: str, stream: int, after: int, *, ttl: float
    ) -> Claim:
        raw = await self._call("claim", lambda: self._claim(
            keys=self._stream_keys(session_id, origin, stream), args=[after, _ms(ttl)]
        ))
        kind = ClaimKind(_text(raw[0]))
        if kind is ClaimKind.UNKNOWN:
            return Claim(kind)
        flat = [_text(x) for x in raw[1]]
        meta = dict(zip(flat[::2], flat[1::2], strict=True))
        try:
            requests = tuple(_rid(r) for r in meta.get("req", "").split("\n") if r)
            answered = {_rid(k[2:]): int(v) for k, v in meta.items() if k.startswith("a:")}
            lost = int(meta.get("lost", "-1"))
            if kind is ClaimKind.GAP:
                return Claim(kind, requests=requests, answered=answered, lost=lost)
            events = tuple(_event(entry_id, fields) for entry_id, fields in raw[2])
        except (ValueError, TypeError):
            logger.warning("stream %s.%s is unreadable: ignored", session_id[:8], stream)
            return Claim(ClaimKind.UNKNOWN)
        return Claim(kind, requests=requests, answered=answered, events=events, lost=lost)


def _event(entry_id: object, fields: Sequence[Any]) -> StoredEvent:
    """One entry of a copy's Redis Stream: a message ("d"), or a request the claim ended
    ("u")."""
    seq = int(_text(entry_id).split("-", 1)[0])
    values = {_text(k): v for k, v in zip(fields[::2], fields[1::2], strict=True)}
    if "u" in values:
        return StoredEvent(seq=seq, unanswered=_rid(values["u"]))
    data = values.get("d", b"")
    return StoredEvent(seq=seq, data=data if isinstance(data, bytes) else str(data).encode())
