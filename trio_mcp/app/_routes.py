# The application's own HTTP routes beside the MCP endpoint (spec/handlers.md TM-HAND-ROUTE):
# ``@server.route("/health")`` answers a GET of that path on either HTTP server, for the
# probes and pages a deployment needs; every other path stays 404 (TM-HTTP-PATH).
from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs

from ..protocol._transport import Reply, json_reply

__all__ = ["RouteDef", "Routes"]

logger = logging.getLogger("trio_mcp.server")

RouteHandler = Callable[[], Awaitable[Any]]


@attrs.frozen(kw_only=True)
class RouteDef:
    path: str
    methods: frozenset[str]
    fn: RouteHandler


class Routes:
    """The routes of one server, by path."""

    def __init__(self) -> None:
        self._routes: dict[str, RouteDef] = {}

    def add(self, path: str, fn: RouteHandler, methods: Iterable[str]) -> None:
        if not isinstance(path, str) or not path.startswith("/") or "?" in path or "#" in path:
            raise ValueError(f"a route's path is an absolute path without a query: {path!r}")
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"route {path!r}: {fn!r} must be an async function")
        if inspect.signature(fn).parameters:
            raise TypeError(f"route {path!r}: {fn!r} takes no arguments")
        wanted = frozenset(m.upper() for m in methods)
        if not wanted:
            raise ValueError(f"route {path!r} needs at least one method")
        if path in self._routes:
            raise ValueError(f"route {path!r} is already registered")
        self._routes[path] = RouteDef(path=path, methods=wanted, fn=fn)

    async def answer(self, method: str, path: str) -> Reply | None:
        """The reply of the route at ``path``, or None when there is none."""
        route = self._routes.get(path)
        if route is None:
            return None
        if method.upper() not in route.methods:
            allow = ", ".join(sorted(route.methods))
            return Reply(status=405, headers=(("allow", allow), ("content-length", "0")))
        try:
            value = await route.fn()
        except Exception:
            # A failing probe answers 500, and the log has the traceback; the body tells
            # nothing of it.
            logger.exception("route %s failed", path)
            return json_reply(500, {"error": "internal error"})
        return _reply(value)


def _reply(value: Any) -> Reply:
    """A route's return value as a response: ``(status, body)`` or a body alone (200); a str
    is text/plain, bytes application/octet-stream, anything else JSON."""
    status = 200
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], int):
        status, value = value
    if isinstance(value, str):
        return Reply(status=status, headers=(("content-type", "text/plain; charset=utf-8"),),
                     body=value.encode())
    if isinstance(value, bytes | bytearray):
        return Reply(status=status, headers=(("content-type", "application/octet-stream"),),
                     body=bytes(value))
    if isinstance(value, Mapping | list):
        return json_reply(status, value)
    raise TypeError(f"a route returns a str, bytes, a dict or a list, not {type(value).__name__}")
