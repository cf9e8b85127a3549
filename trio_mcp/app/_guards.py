# Middleware users reach for first (spec/handlers.md TM-HAND-RATE, TM-HAND-AUDIT): a rate
# limit per caller, by token bucket, answering a JSON-RPC error that says when to retry; and
# an audit log of every request, its caller and its outcome. Both are plain middleware
# (``Server(middleware=[RateLimit(...), AuditLog()])``); timing needs none, since the
# runtime's handler_seconds histogram already times each request, middleware included.
from __future__ import annotations

import functools
import ipaddress
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from typing import Any

import trio

from ..protocol import ErrorCode
from ._context import Context
from ._middleware import CallNext, McpError

__all__ = ["AuditLog", "RateLimit", "caller_of"]


def caller_of(ctx: Context) -> str:
    """Who is asking (TM-HAND-RATE-KEY): the token's subject with authorization; else the
    client's address (an IPv6 client's /64, the network one host is given), in both eras and
    on both HTTP servers; else, where there is no address (stdio), the legacy session; else
    one key."""
    principal = ctx.principal
    if principal is not None:
        return f"subject:{principal.subject}"
    peer = ctx.peer
    if peer is not None:
        return _address_key(peer)
    if ctx.session_id is not None:
        return f"session:{ctx.session_id}"
    return "anonymous"


@functools.lru_cache(maxsize=4096)
def _address_key(peer: str) -> str:
    ip = ipaddress.ip_address(peer.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"ip:{ip.ipv4_mapped}"
        return f"ip:{ipaddress.IPv6Network((ip, 64), strict=False)}"
    return f"ip:{ip}"


class RateLimit:
    """A token bucket per caller: ``rate`` requests a second on average, ``burst`` at once.

    A request past the limit is answered -31005 (``ErrorCode.RATE_LIMITED``) with
    ``data.retryAfterMs``, the wait until one token is back, and its handler does not run.
    ``key`` says who a request counts against (``caller_of`` by default); ``methods``
    limits only those methods (all by default).

    Memory is bounded (TM-HAND-RATE-BOUND): a bucket that has refilled (its caller idle for
    ``burst / rate`` seconds) is the same as none and is dropped, and at most ``max_callers``
    buckets are kept, the least recently used going first; so the buckets are those of the
    callers of the last ``burst / rate`` seconds, at most ``max_callers`` of them (about
    200 bytes each).
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        key: Callable[[Context], str] = caller_of,
        methods: Collection[str] | None = None,
        max_callers: int = 10_000,
    ) -> None:
        if not (rate > 0 and math.isfinite(rate)) or burst < 1 or max_callers < 1:
            raise ValueError("RateLimit needs rate > 0, burst >= 1 and max_callers >= 1")
        self._rate = rate
        self._burst = float(burst)
        self._key = key
        self._methods = None if methods is None else frozenset(methods)
        self._max = max_callers
        #: caller -> (tokens, when they were counted), least recently used first.
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    async def __call__(self, ctx: Context, call_next: CallNext) -> Mapping[str, Any]:
        if self._methods is None or ctx.method in self._methods:
            wait = self._take(self._key(ctx), trio.current_time())
            if wait > 0:
                retry_ms = math.ceil(wait * 1000)
                raise McpError(
                    ErrorCode.RATE_LIMITED,
                    f"Rate limit exceeded: retry in {retry_ms} ms.",
                    data={"retryAfterMs": retry_ms},
                )
        return await call_next()

    def _take(self, caller: str, now: float) -> float:
        """Take a token for ``caller``; 0 when taken, else the seconds until one is back."""
        tokens, then = self._buckets.pop(caller, (self._burst, now))
        tokens = min(self._burst, tokens + (now - then) * self._rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self._rate
        self._buckets[caller] = (tokens, now)
        buckets = self._buckets
        while len(buckets) > self._max:
            buckets.popitem(last=False)
        # The least recently used first: drop those that have refilled since (a full bucket
        # is what a caller without one gets), stopping at the first still short.
        idle = self._burst / self._rate
        while buckets:
            oldest, (_tokens, seen) = next(iter(buckets.items()))
            if now - seen < idle:
                break
            del buckets[oldest]
        return wait

    def __len__(self) -> int:
        """How many callers' buckets are kept now."""
        return len(self._buckets)


class AuditLog:
    """One log line per request: the method, what it names (tool, prompt or URI), the
    caller, the era, the outcome (``ok``, ``error <code>``, ``cancelled``, ``failed``) and
    how long it took; never the arguments, which may hold secrets. To the
    ``trio_mcp.audit`` logger at INFO unless given another."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger("trio_mcp.audit")

    async def __call__(self, ctx: Context, call_next: CallNext) -> Mapping[str, Any]:
        started = time.monotonic()
        outcome = "failed"
        try:
            result = await call_next()
            outcome = "tool error" if result.get("isError") is True else "ok"
            return result
        except McpError as exc:
            outcome = f"error {exc.code}"
            raise
        except trio.Cancelled:
            outcome = "cancelled"
            raise
        except Exception as exc:
            code = getattr(exc, "code", None)
            outcome = f"error {code}" if isinstance(code, int) else "failed"
            raise
        finally:
            named = ctx.params.get("name", ctx.params.get("uri"))
            self._logger.info(
                "%s%s by %s (%s): %s in %.1f ms", ctx.method,
                f" {str(named)[:200]!r}" if isinstance(named, str) else "",
                caller_of(ctx), ctx.era.value, outcome, (time.monotonic() - started) * 1000,
            )
