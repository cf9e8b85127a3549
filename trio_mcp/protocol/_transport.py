# The Streamable HTTP request rules of the legacy (session) era (spec/transport.md,
# spec/sessions.md): what makes a POST, GET or DELETE acceptable, and the replies that refuse
# one. Pure: the runtime hands in an HttpRequest and gets back a plan or a RemoteProtocolError
# whose http_status and JSON-RPC error are the reply.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import attrs

from ._auth import Principal
from ._errors import ErrorCode, ProtocolError, RemoteProtocolError
from ._headers import (
    LAST_EVENT_ID,
    PROTOCOL_VERSION,
    SESSION_ID,
    Headers,
    check_content_type,
    check_get_accept,
    check_post_accept,
)
from ._jsonrpc import (
    JSON,
    ErrorResponse,
    Message,
    Request,
    dumps,
    dumps_json,
    loads_body,
    parse_message,
)
from ._lifecycle import MessageClass, classify

__all__ = [
    "DeletePlan",
    "GetPlan",
    "HttpRequest",
    "PostPlan",
    "Reply",
    "check_batch",
    "error_reply",
    "json_reply",
    "plan_delete",
    "plan_get",
    "plan_legacy_post",
    "plan_post",
    "read_post_body",
]

JSON_HEADERS: Final = (("content-type", "application/json"),)
#: MT-SSE-5 (SHOULD, and good practice in every revision): proxies must not buffer SSE.
SSE_HEADERS: Final = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache, no-transform"),
    ("x-accel-buffering", "no"),
)


@attrs.frozen(kw_only=True)
class HttpRequest:
    method: str
    path: str
    headers: Headers
    body: bytes = b""
    local_host: str | None = None
    """The address the request arrived on (ASGI ``scope["server"]``), when known."""
    peer_host: str | None = None
    """The address the request came from (ASGI ``scope["client"]``), when known."""
    peer_port: int | None = None
    """The port it came from, when known (a span's ``client.port``, TM-OTEL-SPAN)."""
    http_version: str | None = None
    """Its HTTP version ("1.1", "2"), when known (``network.protocol.version``)."""
    principal: Principal | None = None
    """Who the request's access token speaks for, once the Runtime has verified it (None
    when the server has no authorization)."""
    relayed: bool = False
    """Whether another worker relayed it here, its relay seal verified (TM-STORE-STREAMS):
    it is never relayed again."""


@attrs.frozen(kw_only=True)
class Reply:
    """A complete HTTP response (for everything that is not an SSE stream)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


def json_reply(status: int, obj: Mapping[str, JSON] | Sequence[JSON], **extra: str) -> Reply:
    body = dumps_json(obj)
    headers = JSON_HEADERS + tuple((k.replace("_", "-"), v) for k, v in extra.items())
    return Reply(status=status, headers=headers, body=body)


def error_reply(exc: ProtocolError) -> Reply:
    """The reply for a refused HTTP request: its status and a JSON-RPC error body.

    T-POST-6 / T-SEC-3 (MAY): the body is a JSON-RPC error response; it carries the request's
    id when one could be read, and no id otherwise.
    """
    body = dumps(
        ErrorResponse(id=exc.request_id, code=exc.code, message=exc.message, data=exc.data)
    )
    return Reply(status=exc.http_status, headers=JSON_HEADERS + exc.headers, body=body)


@attrs.frozen(kw_only=True)
class PostPlan:
    session_id: str | None
    version_header: str | None
    messages: tuple[Message, ...]
    batch: bool

    @property
    def requests(self) -> tuple[Request, ...]:
        return tuple(m for m in self.messages if isinstance(m, Request))

    @property
    def is_initialize(self) -> bool:
        return any(classify(m) is MessageClass.INITIALIZE for m in self.messages)


@attrs.frozen(kw_only=True)
class GetPlan:
    session_id: str
    version_header: str | None
    last_event_id: str | None


@attrs.frozen(kw_only=True)
class DeletePlan:
    session_id: str
    version_header: str | None


def _session_id(headers: Headers) -> str | None:
    value = headers.get(SESSION_ID)
    # An empty header names no session: it is missing (400), not unknown (404).
    return value.strip() or None if value is not None else None


def _require_session(headers: Headers, what: str) -> str:
    sid = _session_id(headers)
    if not sid:
        # T-SESS-6 (SHOULD): a request without a session id (other than initialize) gets
        # 400. Nothing is allocated for it.
        raise RemoteProtocolError(
            f"Bad Request: {what} needs an MCP-Session-Id header; start with an initialize "
            "request.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=400,
        )
    return sid


def read_post_body(request: HttpRequest, *, max_body_bytes: int) -> JSON:
    """Check a POST's headers and size, and decode its body: what both eras ask first.

    Raises:
        RemoteProtocolError: carrying the status and JSON-RPC error to answer with.
    """
    headers = request.headers
    check_post_accept(headers.get("accept"))
    check_content_type(headers.get("content-type"))
    if len(request.body) > max_body_bytes:
        raise RemoteProtocolError(
            f"Payload Too Large: the body exceeds {max_body_bytes} bytes.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=413,
        )
    return loads_body(request.body)


def plan_post(request: HttpRequest, *, max_body_bytes: int) -> PostPlan:
    """Validate a legacy POST and parse its body.

    Raises:
        RemoteProtocolError: carrying the status and JSON-RPC error to answer with.
    """
    return plan_legacy_post(
        request.headers, read_post_body(request, max_body_bytes=max_body_bytes)
    )


def plan_legacy_post(headers: Headers, decoded: JSON) -> PostPlan:
    """The plan of a legacy POST whose body ``read_post_body`` decoded.

    Raises:
        RemoteProtocolError: carrying the status and JSON-RPC error to answer with.
    """
    batch = isinstance(decoded, list)
    items: list[JSON] = decoded if batch else [decoded]
    if batch and not items:
        raise RemoteProtocolError(
            "Invalid Request: an empty batch.", code=ErrorCode.INVALID_REQUEST
        )
    messages = tuple(parse_message(item) for item in items)
    plan = PostPlan(
        session_id=_session_id(headers),
        version_header=headers.get(PROTOCOL_VERSION),
        messages=messages,
        batch=batch,
    )
    if plan.is_initialize:
        if batch:
            # L-INIT-7 (2025-03-26 basic/lifecycle § Initialization): initialize MUST NOT be
            # part of a batch.
            raise RemoteProtocolError(
                "Invalid Request: initialize cannot be sent in a batch.",
                code=ErrorCode.INVALID_REQUEST,
            )
        # An initialize that carries a session id is a second initialize: the session answers
        # it (L-INIT-1), so the plan keeps the id.
    elif plan.session_id is None:
        rid = messages[0].id if not batch and isinstance(messages[0], Request) else None
        exc = RemoteProtocolError(
            "Bad Request: this request needs an MCP-Session-Id header; start with an "
            "initialize request.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=400,
            request_id=rid,
        )
        raise exc
    return plan


def check_batch(plan: PostPlan, session_version: str) -> None:
    """J-BATCH-1 / T-POST-3: a JSON array is a valid body only in a 2025-03-26 session."""
    if plan.batch and session_version != "2025-03-26":
        raise RemoteProtocolError(
            "Invalid Request: JSON-RPC batches are not part of protocol version "
            f"{session_version}; send one message per POST.",
            code=ErrorCode.INVALID_REQUEST,
        )


def plan_get(request: HttpRequest) -> GetPlan:
    headers = request.headers
    check_get_accept(headers.get("accept"))
    return GetPlan(
        session_id=_require_session(headers, "a GET"),
        version_header=headers.get(PROTOCOL_VERSION),
        last_event_id=headers.get(LAST_EVENT_ID),
    )


def plan_delete(request: HttpRequest) -> DeletePlan:
    headers = request.headers
    return DeletePlan(
        session_id=_require_session(headers, "a DELETE"),
        version_header=headers.get(PROTOCOL_VERSION),
    )


def modern_reply(status: int, body: bytes) -> Reply:
    """A complete application/json answer to a modern request (no session header)."""
    return Reply(status=status, headers=JSON_HEADERS, body=body)


def method_not_allowed() -> RemoteProtocolError:
    return RemoteProtocolError(
        "Method Not Allowed: the MCP endpoint takes POST, GET and DELETE.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=405,
        headers=(("allow", "GET, POST, DELETE"),),
    )


def session_not_found() -> RemoteProtocolError:
    # T-SESS-7 (MUST): an ended session's id gets 404; never-issued ids are answered alike.
    return RemoteProtocolError(
        "Session not found: it has ended or never existed; start a new session with an "
        "initialize request.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=404,
    )
