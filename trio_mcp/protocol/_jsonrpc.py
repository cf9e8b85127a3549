# JSON-RPC 2.0 as MCP uses it (spec/jsonrpc.md): the four message kinds, parsing with the
# MCP restrictions (J-ID-1, J-ID-2: ids are strings or integers, never null), and compact
# serialization. No I/O.
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final, TypeAlias, final

import attrs

from ._errors import ErrorCode, RemoteProtocolError

__all__ = [
    "JSON",
    "ErrorResponse",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "dumps",
    "error_response",
    "loads_body",
    "parse_message",
    "request_id_of",
]

JSON: TypeAlias = Any
RequestId: TypeAlias = "str | int"

JSONRPC_VERSION: Final = "2.0"


@final
@attrs.frozen(kw_only=True)
class Request:
    """A message that expects exactly one response."""

    id: RequestId
    """A string or an integer; never null (J-ID-1, J-ID-2)."""
    method: str
    params: Mapping[str, JSON] | None = None

    def to_dict(self) -> dict[str, JSON]:
        d: dict[str, JSON] = {"jsonrpc": JSONRPC_VERSION, "id": self.id, "method": self.method}
        if self.params is not None:
            d["params"] = dict(self.params)
        return d


@final
@attrs.frozen(kw_only=True)
class Notification:
    """A message that gets no response (J-NOTIF-1); it has no id (J-NOTIF-2)."""

    method: str
    params: Mapping[str, JSON] | None = None

    def to_dict(self) -> dict[str, JSON]:
        d: dict[str, JSON] = {"jsonrpc": JSONRPC_VERSION, "method": self.method}
        if self.params is not None:
            d["params"] = dict(self.params)
        return d


@final
@attrs.frozen(kw_only=True)
class Response:
    """A successful result for the request with the same id (J-RES-1, J-RES-2)."""

    id: RequestId
    result: Mapping[str, JSON]

    def to_dict(self) -> dict[str, JSON]:
        return {"jsonrpc": JSONRPC_VERSION, "id": self.id, "result": dict(self.result)}


@final
@attrs.frozen(kw_only=True)
class ErrorResponse:
    """An error for the request with the same id, or with no id when it could not be read."""

    id: RequestId | None
    code: int
    message: str
    data: JSON = None

    def to_dict(self) -> dict[str, JSON]:
        err: dict[str, JSON] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        d: dict[str, JSON] = {"jsonrpc": JSONRPC_VERSION}
        # J-ERR-1: the id is left out when it could not be read; the 2025-11-25 schema makes
        # it optional rather than null.
        if self.id is not None:
            d["id"] = self.id
        d["error"] = err
        return d


Message: TypeAlias = Request | Notification | Response | ErrorResponse


def error_response(id: RequestId | None, exc: RemoteProtocolError) -> ErrorResponse:
    """The error response that answers ``exc`` for the request ``id``."""
    return ErrorResponse(id=id, code=exc.code, message=exc.message, data=exc.data)


# Built once: json.dumps with options of its own builds an encoder on every call, and dumps
# runs for every message a server sends.
_COMPACT: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_COMPACT_ASCII: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


def dumps(message: Message | Mapping[str, JSON]) -> bytes:
    """Compact UTF-8 JSON (T-GEN-1) for a message or a plain JSON object."""
    return dumps_json(message if isinstance(message, Mapping) else message.to_dict())


def dumps_json(obj: JSON) -> bytes:
    """Compact UTF-8 JSON (T-GEN-1) for any JSON value."""
    try:
        return _COMPACT.encode(obj).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (which a client can send as "\ud800") has no UTF-8 form; escaped
        # as ASCII it still goes out as valid UTF-8, and the id is echoed as it came.
        return _COMPACT_ASCII.encode(obj).encode("ascii")


def non_finite_at(value: object) -> str | None:
    """Where in ``value`` a NaN or an infinity sits (a dotted path; "" for ``value``
    itself), or None when it has none: JSON has no such numbers, and what Python writes
    for them (``NaN``, ``Infinity``) JavaScript clients cannot parse (TM-TOOL-FINITE).
    Every tool result is asked, so the common answer (none) takes one cheap walk; the path
    is looked for only when there is one."""
    if not _any_non_finite(value):
        return None
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return path
        elif isinstance(item, Mapping):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    return None  # pragma: no cover - _any_non_finite found one


def _any_non_finite(value: object) -> bool:
    stack: list[Any] = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict:
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, Mapping):
            extend(item.values())
        elif isinstance(item, list | tuple):
            extend(item)
    return False


def loads_body(body: bytes) -> JSON:
    """Decode an HTTP body as UTF-8 JSON, or raise a parse error (-32700)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        # T-GEN-1 (MUST): JSON-RPC messages MUST be UTF-8 encoded.
        raise RemoteProtocolError(
            "Parse error: the body is not UTF-8.", code=ErrorCode.PARSE_ERROR
        ) from None
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):
        raise RemoteProtocolError(
            "Parse error: the body is not valid JSON.", code=ErrorCode.PARSE_ERROR
        ) from None


def _reject_constant(name: str) -> JSON:
    # NaN, Infinity and -Infinity are Python's extensions, not JSON (RFC 8259 §6).
    raise ValueError(f"{name} is not JSON")


#: Built once, like the encoders: json.loads with an option builds a decoder, and its scanner,
#: on every call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _read_id(obj: Mapping[str, JSON]) -> RequestId:
    rid = obj["id"]
    # J-ID-1/J-ID-2 (MUST): string or integer; not null, and bool is not an integer here.
    if isinstance(rid, bool) or not isinstance(rid, str | int):
        raise RemoteProtocolError(
            "Invalid Request: the id must be a string or an integer, not null.",
            code=ErrorCode.INVALID_REQUEST,
        )
    return rid


def request_id_of(obj: JSON) -> RequestId | None:
    """The id of a message, malformed or not, when it can be read, for an error response
    decided before the message is parsed (MJ-ERR-1); None for a batch or a notification."""
    if isinstance(obj, Mapping):
        rid = obj.get("id")
        if isinstance(rid, str | int) and not isinstance(rid, bool):
            return rid
    return None


def parse_message(obj: JSON) -> Message:
    """Classify one decoded JSON value as a JSON-RPC message.

    Raises:
        RemoteProtocolError: with code -32600 when ``obj`` is not a valid message; its
            ``request_id`` is set when the id could be read, so the error can answer it.
    """
    try:
        return _parse(obj)
    except RemoteProtocolError as exc:
        exc.request_id = request_id_of(obj)
        raise


def _parse(obj: JSON) -> Message:
    if not isinstance(obj, Mapping):
        raise RemoteProtocolError(
            "Invalid Request: a JSON-RPC message must be a JSON object.",
            code=ErrorCode.INVALID_REQUEST,
        )
    if obj.get("jsonrpc") != JSONRPC_VERSION:
        raise RemoteProtocolError(
            'Invalid Request: "jsonrpc" must be "2.0".', code=ErrorCode.INVALID_REQUEST
        )
    has_id = "id" in obj
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise RemoteProtocolError(
                "Invalid Request: the method must be a non-empty string.",
                code=ErrorCode.INVALID_REQUEST,
            )
        params = obj.get("params")
        if params is not None and not isinstance(params, Mapping):
            # MCP params are always objects (by-name), never arrays.
            raise RemoteProtocolError(
                "Invalid Request: params must be an object.", code=ErrorCode.INVALID_REQUEST
            )
        if "result" in obj or "error" in obj:
            raise RemoteProtocolError(
                "Invalid Request: a message cannot be both a request and a response.",
                code=ErrorCode.INVALID_REQUEST,
            )
        if has_id:
            return Request(id=_read_id(obj), method=method, params=params)
        return Notification(method=method, params=params)
    if "result" in obj and "error" not in obj:
        if not has_id:
            raise RemoteProtocolError(
                "Invalid Request: a response needs an id.", code=ErrorCode.INVALID_REQUEST
            )
        result = obj["result"]
        if not isinstance(result, Mapping):
            raise RemoteProtocolError(
                "Invalid Request: result must be an object.", code=ErrorCode.INVALID_REQUEST
            )
        return Response(id=_read_id(obj), result=result)
    if "error" in obj and "result" not in obj:
        err = obj["error"]
        if (
            not isinstance(err, Mapping)
            or not isinstance(err.get("code"), int)
            or isinstance(err.get("code"), bool)
            or not isinstance(err.get("message"), str)
        ):
            raise RemoteProtocolError(
                "Invalid Request: error must have an integer code and a string message.",
                code=ErrorCode.INVALID_REQUEST,
            )
        rid = _read_id(obj) if has_id and obj["id"] is not None else None
        return ErrorResponse(id=rid, code=err["code"], message=err["message"], data=err.get("data"))
    raise RemoteProtocolError(
        "Invalid Request: not a request, notification or response.",
        code=ErrorCode.INVALID_REQUEST,
    )
