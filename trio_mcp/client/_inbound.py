# The server's questions and news, as the application answers and hears them: elicitation,
# sampling and roots by callbacks, whether they come as requests on a session's stream
# (2025-11-25) or as the inputRequests of an input_required result (2026-07-28); log
# messages and other notifications by callbacks. One object for both eras, so an
# application writes each answer once.
from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs

from ._errors import ErrorAnswer

__all__ = [
    "Answerer",
    "Callbacks",
    "ElicitCallback",
    "LogCallback",
    "Notification",
    "NotificationCallback",
    "RootsSource",
    "SampleCallback",
]

JSONObject: TypeAlias = dict[str, Any]
#: ``on_elicit(params) -> result`` (the ElicitResult: ``{"action": "accept", "content": …}``).
ElicitCallback: TypeAlias = Callable[[Mapping[str, Any]], Awaitable[JSONObject]]
#: ``on_sample(params) -> result`` (the CreateMessageResult).
SampleCallback: TypeAlias = Callable[[Mapping[str, Any]], Awaitable[JSONObject]]
#: The roots: a list of Root objects (``{"uri": "file:///…", "name": …}``), or a function
#: returning one.
RootsSource: TypeAlias = (
    "Sequence[Mapping[str, Any]] | Callable[[], Awaitable[Sequence[Mapping[str, Any]]]]"
)
#: ``on_log(params)``: a notifications/message's params (level, logger, data).
LogCallback: TypeAlias = Callable[[Mapping[str, Any]], "Awaitable[None] | None"]

METHOD_NOT_FOUND: Final = -32601


@attrs.frozen
class Notification:
    """A notification from the server."""

    method: str
    params: Mapping[str, Any] = attrs.field(factory=dict)


NotificationCallback: TypeAlias = Callable[[Notification], "Awaitable[None] | None"]


@attrs.frozen(kw_only=True)
class Callbacks:
    """The application's answers to the server's questions, and its ears."""

    on_elicit: ElicitCallback | None = None
    on_sample: SampleCallback | None = None
    roots: RootsSource | None = None
    on_log: LogCallback | None = None
    on_notification: NotificationCallback | None = None
    #: The extensions the client supports, by identifier, with their settings (SEP-2133).
    extensions: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)


class Answerer:
    """Answers server requests with the application's callbacks, and hands notifications
    to them."""

    def __init__(self, callbacks: Callbacks) -> None:
        self._callbacks = callbacks

    def capabilities(self) -> JSONObject:
        """The client capabilities the callbacks make true."""
        caps: JSONObject = {}
        if self._callbacks.on_elicit is not None:
            caps["elicitation"] = {"form": {}}
        if self._callbacks.on_sample is not None:
            caps["sampling"] = {}
        if self._callbacks.roots is not None:
            caps["roots"] = {"listChanged": False}
        if self._callbacks.extensions:
            caps["extensions"] = {name: dict(settings)
                                  for name, settings in self._callbacks.extensions.items()}
        return caps

    async def answer(self, method: str, params: Mapping[str, Any]) -> JSONObject:
        """The result of the server's request; raises ErrorAnswer for one the client cannot
        answer (a capability it did not declare, a method it does not know)."""
        cb = self._callbacks
        if method == "ping":
            return {}
        if method == "elicitation/create" and cb.on_elicit is not None:
            return dict(await cb.on_elicit(params))
        if method == "sampling/createMessage" and cb.on_sample is not None:
            return dict(await cb.on_sample(params))
        if method == "roots/list" and cb.roots is not None:
            roots = cb.roots
            listed = await roots() if callable(roots) else roots
            return {"roots": [dict(root) for root in listed]}
        raise ErrorAnswer(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def answer_message(self, request: Mapping[str, Any]) -> JSONObject:
        """The JSON-RPC response to a server request (a result or an error)."""
        params = request.get("params")
        try:
            result = await self.answer(
                str(request.get("method")), params if isinstance(params, Mapping) else {}
            )
        except ErrorAnswer as error:
            return {"jsonrpc": "2.0", "id": request.get("id"),
                    "error": {"code": error.code, "message": error.message}}
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": result}

    async def input_responses(self, requests: Mapping[str, Any]) -> JSONObject:
        """The inputResponses for an input_required result's inputRequests, by key; a
        request the client cannot answer raises ErrorAnswer."""
        out: JSONObject = {}
        for key, request in requests.items():
            if not isinstance(request, Mapping):
                continue
            params = request.get("params")
            out[key] = await self.answer(
                str(request.get("method")), params if isinstance(params, Mapping) else {}
            )
        return out

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Hand a notification (other than progress) to the application."""
        cb = self._callbacks
        if method == "notifications/message" and cb.on_log is not None:
            await _maybe_await(cb.on_log(params))
        if cb.on_notification is not None:
            await _maybe_await(cb.on_notification(Notification(method, dict(params))))


async def _maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value
