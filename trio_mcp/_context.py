# What a handler sees of its request and session, and what it may send back while it runs:
# progress, log messages, notifications, and requests to the client (spec/utilities.md).
#
# SessionContext is one session seen from the server, outside any request: what it sends goes
# on the session's standalone (GET) stream (T-GET-4/T-GET-5). Context is the same for one
# request: what it sends goes on that request's own stream (T-PSSE-8).
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from ._content import message_dict
from .protocol import (
    LocalProtocolError,
    Notification,
    Phase,
    RemoteProtocolError,
    Request,
    RequestId,
)
from .protocol._versions import revision_at_least

if TYPE_CHECKING:
    from ._trio._session import Session

__all__ = [
    "LOG_LEVELS",
    "ClientCapabilityError",
    "ClientTimeoutError",
    "Context",
    "ElicitationResult",
    "Root",
    "SamplingResult",
    "SessionContext",
]

#: RFC 5424 severities in ascending order, as MCP logging uses them (U-LOG-3).
LOG_LEVELS: Final = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
)

#: TM-LOG-DEFAULT: until the client sets a level, messages below this one are not sent.
DEFAULT_LOG_LEVEL: Final = "info"


#: The client capability each server-to-client request needs (ping needs none).
_METHOD_CAPABILITY: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}

class ClientCapabilityError(LocalProtocolError):
    """A server-to-client request needs a capability the client did not declare.

    L-CAP-1 (MUST): only negotiated capabilities are used, so the request is not sent.
    Check first with :meth:`SessionContext.client_supports` to offer a fallback.
    """


class ClientTimeoutError(RemoteProtocolError):
    """The client did not answer a server-to-client request in time (L-TIME-1).

    The request has been cancelled with notifications/cancelled (L-TIME-2).
    """


@attrs.frozen(kw_only=True)
class SamplingResult:
    """The client's answer to ``sampling/createMessage``."""

    role: str
    content: Any
    """The content block (a dict), or a list of them."""
    model: str
    stop_reason: str | None
    raw: Mapping[str, Any]

    @property
    def text(self) -> str | None:
        """The text of the answer's text blocks, or None when it has none."""
        blocks = self.content if isinstance(self.content, list) else [self.content]
        texts = [
            b["text"]
            for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        return "".join(texts) if texts else None


@attrs.frozen(kw_only=True)
class ElicitationResult:
    """The user's answer to ``elicitation/create``: accept (with content), decline or cancel."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


@attrs.frozen(kw_only=True)
class Root:
    """A root the client exposes (``roots/list``)."""

    uri: str
    name: str | None = None


def log_params(
    session: Session, level: str, data: Any, logger: str | None
) -> dict[str, Any] | None:
    """The params of a notifications/message for ``session``, or None below its level.

    U-LOG-3: messages at the level the client set and above are sent. U-LOG-1: only a
    server that declares ``logging`` sends any.
    """
    if level not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    if not session.server._capabilities_has("logging"):
        raise LocalProtocolError("the server does not declare the logging capability")
    threshold = session.log_level or DEFAULT_LOG_LEVEL
    if LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
        return None
    params: dict[str, Any] = {"level": level, "data": data}
    if logger is not None:
        params["logger"] = logger
    return params


class SessionContext:
    """One session seen from the server, outside any request.

    Messages sent through it go on the session's standalone stream, the one the client
    opened with GET (T-GET-4, T-GET-5: they relate to no request). Hooks for client
    notifications receive one; :meth:`Server.sessions` lists them.
    """

    def __init__(self, *, session: Session) -> None:
        self._session = session
        self._related: RequestId | None = None

    # -- what the handler may read ------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._session.id

    @property
    def protocol_version(self) -> str:
        return self._session.version

    @property
    def client_info(self) -> Mapping[str, Any]:
        return self._session.client_info

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self._session.client_capabilities

    def client_supports(self, capability: str, feature: str | None = None) -> bool:
        """Whether the client declared ``capability`` (``"sampling"``, ``"elicitation"``,
        ``"roots"``), and within it ``feature`` when given (``"form"``, ``"url"``,
        ``"context"``, ``"tools"``, ``"listChanged"``).

        An empty ``elicitation`` object means form mode (the 2025-11-25 schema keeps it for
        backwards compatibility).
        """
        caps = self._session.client_capabilities.get(capability)
        if not isinstance(caps, Mapping):
            return False
        if feature is None:
            return True
        if capability == "elicitation" and feature == "form":
            return "form" in caps or not ({"form", "url"} & caps.keys())
        value = caps.get(feature)
        return value is not None and value is not False

    # -- what it may send ---------------------------------------------------------------

    async def send_notification(self, method: str, params: Mapping[str, Any] | None = None) -> bool:
        """Send a notification (on this request's stream, or the standalone one).

        Returns False when it could not go out (JSON response mode, request finished).
        """
        # Paced: waits (bounded) while this stream's reader lags far behind (TM-BP-PRODUCER).
        return await self._session.send_paced(
            Notification(method=method, params=params), related=self._related
        )

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> bool:
        """Send a log message if ``level`` is at or above the session's level (U-LOG-3).

        Returns whether it was sent.
        """
        params = log_params(self._session, level, data, logger)
        if params is None:
            return False
        return await self.send_notification("notifications/message", params)

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> Mapping[str, Any]:
        """Send a request to the client and await its result.

        ``timeout`` defaults to ``ServerConfig.client_request_timeout``.

        Raises:
            ClientTimeoutError: no answer within ``timeout`` (the request is then cancelled).
            RemoteProtocolError: the client answered with an error, the session ended, or
                the request has no stream to go out on (JSON response mode).
            LocalProtocolError: the session is not initialized yet (L-INIT-6).
        """
        if method != "ping" and self._session.phase is Phase.AWAITING_INITIALIZED:
            # L-INIT-6 (SHOULD NOT): only pings before the client's initialized notification.
            raise LocalProtocolError(
                f"Cannot send {method} before the client sent notifications/initialized."
            )
        capability = _METHOD_CAPABILITY.get(method)
        if capability is not None:
            # L-CAP-1 (MUST): only negotiated capabilities are used, whichever helper sends.
            self._require(capability)
        t = self._session.config.client_request_timeout if timeout is None else timeout
        return await self._session.request(method, params, related=self._related, timeout=t)

    def _require(self, capability: str, feature: str | None = None) -> None:
        if not self.client_supports(capability, feature):
            what = f"{capability}.{feature}" if feature else capability
            raise ClientCapabilityError(
                f"The client did not declare the {what} capability.",
                data={"missingCapability": what},
            )

    async def sample(
        self,
        messages: str | Sequence[Any],
        max_tokens: int,
        *,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: Sequence[str] | None = None,
        model_preferences: Mapping[str, Any] | None = None,
        include_context: Literal["none", "thisServer", "allServers"] | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> SamplingResult:
        """Ask the client's model for a completion (``sampling/createMessage``).

        ``messages`` is a str (one user message) or a list of ``UserMessage`` /
        ``AssistantMessage`` (or str, or ``{role, content}`` dicts); content is text, image
        or audio. Needs the client's ``sampling`` capability (``sampling.context`` for an
        ``include_context`` other than "none").
        """
        self._require("sampling")
        if include_context not in (None, "none"):
            self._require("sampling", "context")
        items = [messages] if isinstance(messages, str) else list(messages)
        wire = [message_dict(m) for m in items]
        for m in wire:
            if m["content"].get("type") not in ("text", "image", "audio"):
                raise TypeError(
                    "sampling messages carry text, image or audio content, not "
                    f"{m['content'].get('type')!r}"
                )
        params: dict[str, Any] = {"messages": wire, "maxTokens": max_tokens}
        optional = {
            "systemPrompt": system_prompt,
            "temperature": temperature,
            "stopSequences": list(stop_sequences) if stop_sequences is not None else None,
            "modelPreferences": dict(model_preferences) if model_preferences else None,
            "includeContext": include_context,
            "metadata": dict(metadata) if metadata is not None else None,
        }
        params.update({k: v for k, v in optional.items() if v is not None})
        result = await self.request("sampling/createMessage", params, timeout=timeout)
        content = result.get("content")
        if not isinstance(content, Mapping | list):
            raise RemoteProtocolError("The client's sampling result has no content.")
        return SamplingResult(
            role=str(result.get("role", "assistant")),
            content=dict(content) if isinstance(content, Mapping) else content,
            model=str(result.get("model", "")),
            stop_reason=result.get("stopReason"),
            raw=result,
        )

    async def elicit(
        self,
        message: str,
        requested_schema: Mapping[str, Any],
        *,
        timeout: float | None = None,
    ) -> ElicitationResult:
        """Ask the user to fill in a form (``elicitation/create``, form mode).

        ``requested_schema`` is a flat object schema of primitive properties (string,
        number, integer, boolean, enums). Needs the client's ``elicitation`` capability with
        form mode.
        """
        self._require("elicitation", "form")
        if requested_schema.get("type") != "object":
            raise ValueError('an elicitation schema is an object schema ({"type": "object"})')
        params: dict[str, Any] = {"message": message, "requestedSchema": dict(requested_schema)}
        if revision_at_least(self._session.version, "2025-11-25"):
            params = {"mode": "form", **params}
        result = await self.request("elicitation/create", params, timeout=timeout)
        action = result.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise RemoteProtocolError(
                f"The client's elicitation result has an invalid action {action!r}."
            )
        content = result.get("content")
        return ElicitationResult(
            action=action, content=content if isinstance(content, Mapping) else None
        )

    async def list_roots(self, *, timeout: float | None = None) -> list[Root]:
        """The client's roots (``roots/list``). Needs the client's ``roots`` capability."""
        self._require("roots")
        result = await self.request("roots/list", None, timeout=timeout)
        roots = result.get("roots")
        if not isinstance(roots, list):
            raise RemoteProtocolError("The client's roots/list result has no roots list.")
        out = []
        for r in roots:
            if not isinstance(r, Mapping) or not isinstance(r.get("uri"), str):
                raise RemoteProtocolError("The client's roots/list result has a root without uri.")
            name = r.get("name")
            out.append(Root(uri=r["uri"], name=name if isinstance(name, str) else None))
        return out

    async def ping(self, *, timeout: float | None = None) -> None:
        """Ping the client (L-PING-1: it answers with an empty result). Needs no capability."""
        await self.request("ping", None, timeout=timeout)


class Context(SessionContext):
    """Handed to a handler that declares a parameter annotated with ``Context``.

    Everything it sends relates to the handler's request and goes on that request's stream
    (T-PSSE-8).
    """

    def __init__(self, *, session: Session, request: Request) -> None:
        super().__init__(session=session)
        self._request = request
        self._related = request.id
        self._last_progress = -math.inf
        self._finished = False
        meta = (request.params or {}).get("_meta")
        self._meta: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}

    # -- what the handler may read ------------------------------------------------------

    @property
    def request_id(self) -> RequestId:
        return self._request.id

    @property
    def method(self) -> str:
        return self._request.method

    @property
    def meta(self) -> Mapping[str, Any]:
        """The request's ``_meta`` object (J-META-1: reserved keys are not interpreted here)."""
        return self._meta

    @property
    def progress_token(self) -> str | int | None:
        token = self._meta.get("progressToken")
        if isinstance(token, str | int) and not isinstance(token, bool):
            return token
        return None

    # -- what the handler may send ------------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Report progress, if the request asked for it with a progressToken.

        U-PROG-4 (MUST): progress increases with every notification; a value that does not
        is refused with LocalProtocolError. U-PROG-7/U-PROG-11: nothing goes out without a
        token, or after the request finished or was cancelled. Returns whether a
        notification was sent.
        """
        token = self.progress_token
        if token is None or self._finished:
            return False
        if isinstance(progress, bool) or not isinstance(progress, int | float):
            raise TypeError(f"progress must be a number, not {progress!r}")
        if not progress > self._last_progress:
            raise LocalProtocolError(
                f"progress must increase: {progress!r} after {self._last_progress!r}"
            )
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return await self.send_notification("notifications/progress", params)

    def close_sse_stream(self) -> bool:
        """Close this request's SSE connection now; the client resumes it with GET and
        Last-Event-ID and the response arrives there (SEP-1699 polling, T-PSSE-2)."""
        flight = self._session.inflight.get(self.request_id)
        if flight is None or flight.stream is None:
            return False
        return self._session.close_stream_connection(flight.stream)
