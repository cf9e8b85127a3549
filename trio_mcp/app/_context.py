# What a handler sees of its request and its client, and what it may send back while it runs:
# progress, log messages, notifications, and questions for the client (spec/utilities.md,
# spec/modern.md). The same API in both eras: a Context talks to a port (trio_mcp.base._ports),
# which a legacy session's request and a modern request each implement.
#
# SessionContext is one client seen from the server, outside any request: in a legacy
# session what it sends goes on the session's standalone (GET) stream (T-GET-4/T-GET-5).
# Context is the same for one request: what it sends goes on that request's own stream
# (T-PSSE-8, MT-SSE-7).
from __future__ import annotations

import functools
import ipaddress
import itertools
import logging
import math
import secrets
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from ..base._ports import (
    ClientCapabilityError,
    ClientTimeoutError,
    Engine,
    RequestPort,
    SessionPort,
)
from ..protocol import ErrorCode, Notification, RemoteProtocolError, Request, RequestId
from ..protocol._auth import Principal
from ..protocol._logging import LOG_LEVELS, log_allows
from ..protocol._methods import INPUT_CAPABILITY, METHODS, named
from ..protocol._mrtr import InputRequest
from ..protocol._versions import Era, is_modern, revision_at_least
from ._content import message_dict

_log = logging.getLogger("trio_mcp.server")

__all__ = [
    "LOG_LEVELS",
    "ClientCapabilityError",
    "ClientTimeoutError",
    "Context",
    "ElicitationResult",
    "Root",
    "SamplingResult",
    "SessionContext",
    "ThreadContext",
    "UrlElicitationRequired",
]


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

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> SamplingResult:
        content = result.get("content")
        if not isinstance(content, Mapping | list):
            raise RemoteProtocolError("The client's sampling result has no content.")
        return cls(
            role=str(result.get("role", "assistant")),
            content=dict(content) if isinstance(content, Mapping) else content,
            model=str(result.get("model", "")),
            stop_reason=result.get("stopReason"),
            raw=result,
        )


@attrs.frozen(kw_only=True)
class ElicitationResult:
    """The user's answer to ``elicitation/create``: accept (with content), decline or cancel."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None
    elicitation_id: str | None = None
    """A URL-mode elicitation's id (``elicit_url``), for its completion notice."""

    @property
    def accepted(self) -> bool:
        return self.action == "accept"

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> ElicitationResult:
        action = result.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise RemoteProtocolError(
                f"The client's elicitation result has an invalid action {action!r}."
            )
        content = result.get("content")
        return cls(action=action, content=content if isinstance(content, Mapping) else None)


@attrs.frozen(kw_only=True)
class Root:
    """A root the client exposes (``roots/list``)."""

    uri: str
    name: str | None = None

    @classmethod
    def list_from_result(cls, result: Mapping[str, Any]) -> list[Root]:
        roots = result.get("roots")
        if not isinstance(roots, list):
            raise RemoteProtocolError("The client's roots/list result has no roots list.")
        out = []
        for r in roots:
            if not isinstance(r, Mapping) or not isinstance(r.get("uri"), str):
                raise RemoteProtocolError("The client's roots/list result has a root without uri.")
            name = r.get("name")
            out.append(cls(uri=r["uri"], name=name if isinstance(name, str) else None))
        return out


def sampling_request(
    messages: str | Sequence[Any],
    max_tokens: int,
    *,
    system_prompt: str | None = None,
    temperature: float | None = None,
    stop_sequences: Sequence[str] | None = None,
    model_preferences: Mapping[str, Any] | None = None,
    include_context: Literal["none", "thisServer", "allServers"] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> InputRequest:
    """A ``sampling/createMessage`` question, for :meth:`SessionContext.ask`.

    ``messages`` is a str (one user message) or a list of ``UserMessage`` /
    ``AssistantMessage`` (or str, or ``{role, content}`` dicts); content is text, image or
    audio.
    """
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
    return InputRequest("sampling/createMessage", params)


def elicitation_request(message: str, requested_schema: Mapping[str, Any]) -> InputRequest:
    """An ``elicitation/create`` question (form mode), for :meth:`SessionContext.ask`.

    ``requested_schema`` is a flat object schema of primitive properties (string, number,
    integer, boolean, enums).
    """
    if requested_schema.get("type") != "object":
        raise ValueError('an elicitation schema is an object schema ({"type": "object"})')
    return InputRequest(
        "elicitation/create", {"message": message, "requestedSchema": dict(requested_schema)}
    )


def url_elicitation(message: str, url: str, elicitation_id: str) -> dict[str, Any]:
    """The params of a URL-mode ``elicitation/create`` (and of one entry of a -32042 error's
    ``elicitations``), checked: an https URL (http only for a loopback host), an id."""
    parts = urllib.parse.urlsplit(url)
    loopback = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise ValueError(f"a URL-mode elicitation sends the user to an https URL, not {url[:60]!r}")
    if not elicitation_id:
        raise ValueError("a URL-mode elicitation needs an elicitation id")
    return {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}


class UrlElicitationRequired(RemoteProtocolError):
    """Raise from a handler to answer -32042 (URLElicitationRequiredError, 2025-11-25): the
    request cannot go on until the user completes these URL-mode elicitations, given as
    ``(message, url, elicitation_id)``; the client retries after their completion notices.
    A 2026-07-28 request cannot be answered so (TM-MOD-URLELICIT): ask with
    ``ctx.elicit_url`` there."""

    def __init__(self, elicitations: Sequence[tuple[str, str, str]], message: str = "") -> None:
        if not elicitations:
            raise ValueError("-32042 lists at least one URL-mode elicitation (J-ERR-7)")
        super().__init__(
            message or "This request requires more information.",
            code=ErrorCode.URL_ELICITATION_REQUIRED,
            data={"elicitations": [url_elicitation(*e) for e in elicitations]},
        )


@functools.lru_cache(maxsize=1024)
def _is_ip(address: str) -> bool:
    """Whether ``address`` is an IP address (stdio's port names "stdio")."""
    try:
        ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return True


def roots_request() -> InputRequest:
    """A ``roots/list`` question, for :meth:`SessionContext.ask`."""
    return InputRequest("roots/list", None)


class SessionContext:
    """One client seen from the server.

    Outside a request (hooks for client notifications, :meth:`Server.sessions`), messages
    sent through it go on a legacy session's standalone stream, the one the client opened
    with GET (T-GET-4, T-GET-5: they relate to no request).
    """

    def __init__(self, port: SessionPort) -> None:
        self._port = port
        # Keys for questions asked without one: the same in every run of a handler that asks
        # the same questions in the same order, which a modern retry relies on.
        self._keys = itertools.count(1)

    # -- what the handler may read ------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """The legacy session's id; None for a 2026-07-28 request (there are no sessions)."""
        return self._port.session_id

    @property
    def protocol_version(self) -> str:
        return self._port.protocol_version

    @property
    def client_info(self) -> Mapping[str, Any]:
        return self._port.client_info

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self._port.client_capabilities

    def client_supports(self, capability: str, feature: str | None = None) -> bool:
        """Whether the client declared ``capability`` (``"sampling"``, ``"elicitation"``,
        ``"roots"``), and within it ``feature`` when given (``"form"``, ``"url"``,
        ``"context"``, ``"tools"``, ``"listChanged"``).

        An empty ``elicitation`` object means form mode (the 2025-11-25 schema keeps it for
        backwards compatibility).
        """
        caps = self._port.client_capabilities.get(capability)
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
        return await self._port.notify(Notification(method=method, params=params))

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> bool:
        """Send a log message if ``level`` is at or above the client's level.

        U-LOG-3: a legacy session's level is the one it set (TM-LOG-DEFAULT until then);
        MU-LOG-3: a modern request's is the one its ``_meta`` names, and without one no
        message goes out. Returns whether it was sent.
        """
        params = log_params(self._port, level, data, logger)
        if params is None:
            return False
        return await self.send_notification("notifications/message", params)

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> Mapping[str, Any]:
        """Send a request to the client and await its result (legacy sessions only: in the
        2026-07-28 era a server sends no requests, MJ-PAT-1; use :meth:`ask`).

        ``timeout`` defaults to ``ServerConfig.client_request_timeout``.

        Raises:
            ClientTimeoutError: no answer within ``timeout`` (the request is then cancelled).
            RemoteProtocolError: the client answered with an error, the session ended, or
                the request has no stream to go out on (JSON response mode).
            LocalProtocolError: the session is not initialized yet (L-INIT-6), or the
                request is a 2026-07-28 one.
        """
        capability = INPUT_CAPABILITY.get(method)
        if capability is not None:
            # L-CAP-1 (MUST): only negotiated capabilities are used, whichever helper sends.
            self._require(capability)
        return await self._port.request(method, params, timeout=self._timeout(timeout))

    def _timeout(self, timeout: float | None) -> float:
        return self._port.client_request_timeout if timeout is None else timeout

    def _require(self, capability: str, feature: str | None = None) -> None:
        if not self.client_supports(capability, feature):
            raise self._port.capability_error({capability: {feature: {}} if feature else {}})

    async def ask(
        self, questions: Mapping[str, InputRequest], *, timeout: float | None = None
    ) -> dict[str, Mapping[str, Any]]:
        """Ask the client several questions at once; their raw answers by key.

        Build the questions with ``elicitation_request``, ``sampling_request`` and
        ``roots_request``. A legacy session sends them as concurrent requests on this
        request's stream. A 2026-07-28 request answers with all of them at once in an
        InputRequiredResult, and its retry brings the answers (TM-MRTR-RERUN: the handler
        runs again from its first line, and questions answered before return at once).
        """
        for question in questions.values():
            # MU-MRTR-2 / MU-ELIC-1 / MU-SAMP-1 / L-CAP-1: only what the client declared,
            # down to the elicitation mode and sampling with tools.
            self._require(question.capability)
            for feature in question.features:
                self._require(question.capability, feature)
        return await self._port.ask(questions, timeout=self._timeout(timeout))

    async def _ask_one(
        self, key: str | None, question: InputRequest, timeout: float | None
    ) -> Mapping[str, Any]:
        name = key if key is not None else f"{question.capability}-{next(self._keys)}"
        return (await self.ask({name: question}, timeout=timeout))[name]

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
        key: str | None = None,
    ) -> SamplingResult:
        """Ask the client's model for a completion (``sampling/createMessage``).

        Needs the client's ``sampling`` capability (``sampling.context`` for an
        ``include_context`` other than "none"). ``key`` names the question in a 2026-07-28
        InputRequiredResult (default: ``sampling-N``, N counting this context's questions).
        """
        if include_context not in (None, "none"):
            self._require("sampling", "context")
        question = sampling_request(
            messages,
            max_tokens,
            system_prompt=system_prompt,
            temperature=temperature,
            stop_sequences=stop_sequences,
            model_preferences=model_preferences,
            include_context=include_context,
            metadata=metadata,
        )
        return SamplingResult.from_result(await self._ask_one(key, question, timeout))

    async def elicit(
        self,
        message: str,
        requested_schema: Mapping[str, Any],
        *,
        timeout: float | None = None,
        key: str | None = None,
    ) -> ElicitationResult:
        """Ask the user to fill in a form (``elicitation/create``, form mode).

        Needs the client's ``elicitation`` capability with form mode. ``key`` names the
        question in a 2026-07-28 InputRequiredResult (default: ``elicitation-N``). The
        answer may be a decline or a cancel (``ElicitationResult.action``): handle it
        (MU-ELIC-4). Never ask for a password, an API key, a token or payment details in a
        form (MU-ELIC-2): send the user to a URL instead, with ``ask`` and an
        ``InputRequest("elicitation/create", {"mode": "url", ...})`` (MU-ELIC-3).
        """
        self._require("elicitation", "form")
        question = elicitation_request(message, requested_schema)
        if revision_at_least(self.protocol_version, "2025-11-25"):
            question = InputRequest(question.method, {"mode": "form", **(question.params or {})})
        return ElicitationResult.from_result(await self._ask_one(key, question, timeout))

    async def elicit_url(
        self,
        message: str,
        url: str,
        *,
        elicitation_id: str | None = None,
        timeout: float | None = None,
        key: str | None = None,
    ) -> ElicitationResult:
        """Send the user to ``url`` (``elicitation/create`` in URL mode): for what must not
        pass through the client, such as credentials or a payment (MU-ELIC-3).

        Needs the client's ``elicitation.url`` capability; ``url`` is an https URL (http
        only for loopback). The answer says whether the user agreed to open it
        (``accepted``); what happens there is out of band, and when it is done the server
        says so with :meth:`elicitation_complete` and the result's ``elicitation_id``
        (made here unless given). TM-HAND-URLELICIT.
        """
        self._require("elicitation", "url")
        eid = elicitation_id if elicitation_id is not None else secrets.token_urlsafe(16)
        question = InputRequest("elicitation/create", url_elicitation(message, url, eid))
        answer = ElicitationResult.from_result(await self._ask_one(key, question, timeout))
        return attrs.evolve(answer, content=None, elicitation_id=eid)

    async def elicitation_complete(self, elicitation_id: str) -> bool:
        """Tell the client that the URL-mode elicitation ``elicitation_id`` is done
        (``notifications/elicitation/complete``), so it may retry what waited for it.
        Returns whether the notice went out."""
        return await self.send_notification(
            "notifications/elicitation/complete", {"elicitationId": elicitation_id}
        )

    async def list_roots(
        self, *, timeout: float | None = None, key: str | None = None
    ) -> list[Root]:
        """The client's roots (``roots/list``). Needs the client's ``roots`` capability."""
        return Root.list_from_result(await self._ask_one(key, roots_request(), timeout))

    async def ping(self, *, timeout: float | None = None) -> None:
        """Ping the client (L-PING-1: it answers with an empty result). Needs no capability;
        legacy sessions only."""
        await self.request("ping", None, timeout=timeout)


def log_params(
    port: SessionPort, level: str, data: Any, logger: str | None
) -> dict[str, Any] | None:
    """The params of a notifications/message for ``port``'s client, or None below its level.

    U-LOG-1: only a server that declares ``logging`` sends any (it always does).
    """
    if not log_allows(level, port.log_threshold):
        return None
    params: dict[str, Any] = {"level": level, "data": data}
    if logger is not None:
        params["logger"] = logger
    return params


class Context(SessionContext):
    """Handed to a handler that declares a parameter annotated with ``Context``.

    Everything it sends relates to the handler's request and goes on that request's stream
    (T-PSSE-8, MT-SSE-7).
    """

    def __init__(self, port: RequestPort, request: Request, state: Any = None) -> None:
        super().__init__(port)
        self._request_port = port
        self._request = request
        # The server's ServerState (_invoke.py): its lifespan's value and thread limiter.
        self._state = state
        self._last_progress = -math.inf
        self._warned_progress = False
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
    def params(self) -> Mapping[str, Any]:
        """The request's params (empty when it has none)."""
        return self._request.params or {}

    @property
    def era(self) -> Era:
        """``Era.MODERN`` for a 2026-07-28 request, ``Era.LEGACY`` in a session."""
        return Era.MODERN if is_modern(self.protocol_version) else Era.LEGACY

    @property
    def lifespan(self) -> Any:
        """What the server's lifespan yielded (``Server(lifespan=...)``, TM-HAND-LIFESPAN);
        None when it has none."""
        return None if self._state is None else self._state.lifespan

    @property
    def sync(self) -> ThreadContext:
        """This context for a plain ``def`` handler running in a worker thread: the same
        methods, called without ``await`` (each runs in trio's thread through
        ``trio.from_thread.run``, TM-HAND-THREAD)."""
        return ThreadContext(self)

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

    @property
    def page_size(self) -> int:
        """Items per page of a list result (U-PAGE-1)."""
        return self._request_port.page_size

    @property
    def principal(self) -> Principal | None:
        """Who the request's access token speaks for: subject, issuer, client and scopes
        (None when the server has no authorization). The token itself never reaches a
        handler (T-AUTH-27)."""
        return self._request_port.principal

    def engine(self, identifier: str) -> Engine | None:
        """The runtime's engine for the extension ``identifier``, for an extension's method
        handler (TM-EXT-ENGINE): the tasks extension's tasks; None where the runtime keeps
        nothing for it."""
        return self._request_port.engine(identifier)

    @property
    def peer(self) -> str | None:
        """The client's IP address (for a connection from a trusted proxy, the address it
        forwarded, TM-SEC-UNIT); None where there is none, as on stdio (TM-HAND-PEER)."""
        peer = self._request_port.peer
        return peer if peer is not None and _is_ip(peer) else None

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """The ``contents`` of this server's resource ``uri``, read as ``resources/read``
        would, without the middleware (raises ``ResourceNotFound``, as -32002)."""
        if self._state is None:
            raise RuntimeError("ctx.read_resource needs the context of a server's request")
        contents: list[dict[str, Any]] = await self._state.read_resource(uri, self)
        return contents

    # -- what the handler may send ------------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Report progress, if the request asked for it with a progressToken.

        U-PROG-4 / MU-PROG-2 (MUST): progress increases with every notification; a value
        that does not is dropped (the call goes on), and the first such report of a request
        is logged as a warning. U-PROG-7/U-PROG-11: nothing goes out without a token, or
        after the request finished or was cancelled. Returns whether a notification was
        sent.
        """
        token = self.progress_token
        if token is None or self._request_port.finished:
            return False
        if isinstance(progress, bool) or not isinstance(progress, int | float):
            raise TypeError(f"progress must be a number, not {progress!r}")
        if not progress > self._last_progress:
            # The rule binds the server, and the mistake is the handler's: the client must
            # not see it, and the call's result is worth more than one progress report.
            if not self._warned_progress:
                self._warned_progress = True
                _log.warning(
                    "%s reported progress %r after %r: progress must increase (U-PROG-4), so "
                    "that notification was dropped (and any more like it in this request)",
                    self._handler_name(), progress, self._last_progress,
                )
            return False
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return await self.send_notification("notifications/progress", params)

    def _handler_name(self) -> str:
        """The handler, for log lines: ``tool 'greet'``, ``prompt 'x'``, or the method."""
        spec = METHODS.get(self._request.method)
        kind = spec.scope if spec is not None else None
        value = named(self._request.method, self._request.params, kind) if kind else None
        if kind is None or value is None:
            return self._request.method
        return f"{kind.value} {value[:100]!r}"

    def close_sse_stream(self) -> bool:
        """Close this request's SSE connection now; the client resumes it with GET and
        Last-Event-ID and the response arrives there (SEP-1699 polling, T-PSSE-2). Legacy
        sessions only: a 2026-07-28 stream cannot be resumed (MT-SSE-6), so it stays open.
        Returns whether it closed one: False while none with an event id is attached, or
        the attached one is already closing."""
        return self._request_port.close_stream()


class ThreadContext:
    """A Context seen from a worker thread (``ctx.sync``): its properties as they are, and
    each of its async methods as a plain call that runs the coroutine in trio's thread
    (``trio.from_thread.run``), so a ``def`` handler can log, report progress or ask the
    client. Calls raise ``trio.Cancelled`` once the request is cancelled; calling one from
    trio's own thread is a RuntimeError (use the Context there)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        import inspect

        value = getattr(self._ctx, name)
        if not inspect.iscoroutinefunction(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            import functools

            import trio

            return trio.from_thread.run(functools.partial(value, *args, **kwargs))

        return call
