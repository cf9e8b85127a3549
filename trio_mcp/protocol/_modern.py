# The 2026-07-28 ("modern") request rules after the envelope (spec/modern.md): which methods
# a modern request may call, the tool parameters mirrored into headers, the client
# capabilities a request needs, and how results are dressed (resultType, serverInfo, caching
# hints). Pure: the runtime hands in what the application declared and gets back a result or
# a RemoteProtocolError.
from __future__ import annotations

import base64
import decimal
import enum
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, overload

import attrs

from ._era import ENCODED_FORM, decode_header_value, header_mismatch, header_text
from ._errors import ErrorCode, ProtocolError, RemoteProtocolError
from ._headers import Headers
from ._jsonrpc import JSON, ErrorResponse, Request, RequestId
from ._methods import (
    CACHEABLE_METHODS,
    LISTEN_FLAGS,
    MODERN_METHODS,
    RUNTIME_METHODS,
    declared,
)
from ._versions import MODERN_VERSIONS

__all__ = [
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "NOT_CACHEABLE",
    "CacheHint",
    "CacheScope",
    "ListenFilter",
    "check_method",
    "check_param_headers",
    "complete_result",
    "discover_result",
    "is_interim",
    "is_retry",
    "method_not_found",
    "mirror_params",
    "missing_capability",
    "param_headers",
]

META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"


class CacheScope(enum.Enum):
    """Who may reuse a cached result (MU-CACHE-1)."""

    #: Any client, and shared caches between them.
    PUBLIC = "public"
    #: Only the client that asked.
    PRIVATE = "private"


@attrs.frozen
class CacheHint:
    """The caching hints a cacheable result carries: how long it stays fresh, and for whom."""

    ttl_ms: int = 0
    scope: CacheScope = CacheScope.PRIVATE

    def __attrs_post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0:
            # MU-CACHE-2 (MUST): ttlMs is a non-negative integer.
            raise ValueError(f"ttl_ms is a non-negative integer, not {self.ttl_ms!r}")


#: MU-CACHE-6: what the result of an MRTR retry carries: fresh for no time, for nobody
#: else, whatever the server is configured to say of its method.
NOT_CACHEABLE: Final = CacheHint()


def is_retry(params: Mapping[str, JSON]) -> bool:
    """MU-CACHE-6: whether a request retries through MRTR: it carries ``inputResponses`` or
    ``requestState``, inputs that are not part of a cache key."""
    return "inputResponses" in params or "requestState" in params


def check_method(request: Request, serves: Callable[[str], bool]) -> None:
    """Whether a modern request names a method served here: a modern method of the table
    (MODERN_METHODS) that the runtime answers, or that the application ``serves`` with its
    capabilities as declared.

    Raises:
        RemoteProtocolError: MT-HDR-4 (MUST): 404 and -32601, for a method of the legacy era
            too (TM-ERA-REMOVED: initialize, ping, logging/setLevel, resources/subscribe).
    """
    method = request.method
    if method not in MODERN_METHODS or (method not in RUNTIME_METHODS and not serves(method)):
        raise method_not_found(request)


def method_not_found(request: Request) -> RemoteProtocolError:
    # MT-HDR-4 (MUST): an unimplemented method gets 404 Not Found and -32601.
    return RemoteProtocolError(
        f"Method not found: {request.method}",
        code=ErrorCode.METHOD_NOT_FOUND,
        http_status=404,
        request_id=request.id,
    )


_E = TypeVar("_E", bound=ProtocolError)


@overload
def missing_capability(
    required: Mapping[str, JSON], request_id: RequestId | None = None
) -> RemoteProtocolError: ...


@overload
def missing_capability(
    required: Mapping[str, JSON], request_id: RequestId | None = None, *, raised_as: type[_E]
) -> _E: ...


def missing_capability(
    required: Mapping[str, JSON],
    request_id: RequestId | None = None,
    *,
    raised_as: type[ProtocolError] = RemoteProtocolError,
) -> ProtocolError:
    """ML-META-3 (MUST): a request that needs client capabilities it did not declare gets
    400 and -32021, naming them as a ClientCapabilities object: the one wording of it,
    whether the runtime finds it before the handler runs (a RemoteProtocolError) or the
    handler's question does (``raised_as`` the port's ClientCapabilityError)."""
    names = ", ".join(sorted(required))
    return raised_as(
        f"Missing required client capability: {names}.",
        code=ErrorCode.MISSING_CLIENT_CAPABILITY,
        http_status=400,
        data={"requiredCapabilities": {k: dict(v) if isinstance(v, Mapping) else v
                                       for k, v in required.items()}},
        request_id=request_id,
    )


def undeclared(required: Mapping[str, JSON], declared: Mapping[str, JSON]) -> dict[str, JSON]:
    """The capabilities of ``required`` that ``declared`` lacks (a sub-feature counts:
    ``{"elicitation": {"url": {}}}`` needs ``url`` declared under ``elicitation``)."""
    missing: dict[str, JSON] = {}
    for name, features in required.items():
        have = declared.get(name)
        if not isinstance(have, Mapping):
            missing[name] = features
            continue
        if isinstance(features, Mapping):
            lacking = {k: v for k, v in features.items() if k not in have}
            if lacking:
                missing[name] = lacking
    return missing


# -- tool parameters mirrored into headers (MT-HDR-7 .. MT-HDR-15) -------------------------------

#: RFC 9110 §5.6.2 tchar: what a field name (and so an x-mcp-header value) may hold.
_TCHAR: Final = frozenset(
    "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)
_PARAM_PREFIX: Final = "mcp-param-"
#: MT-HDR-17: the primitive types a mirrored parameter may have (not ``number``).
_MIRRORED_TYPES: Final = frozenset({"string", "integer", "boolean"})
#: MT-HDR-17: integers a header carries are within JavaScript's safe range.
_SAFE_INTEGER: Final = 2**53 - 1
#: The keywords under which a subschema sits: an x-mcp-header below one of them is not
#: reachable by a chain of ``properties`` keys (MT-HDR-18).
_SUBSCHEMA_KEYWORDS: Final = frozenset(
    {
        "items", "prefixItems", "additionalProperties", "patternProperties", "contains",
        "unevaluatedItems", "unevaluatedProperties", "propertyNames", "allOf", "anyOf",
        "oneOf", "not", "if", "then", "else", "dependentSchemas", "$defs", "definitions",
        "contentSchema",
    }
)

#: A parameter's place in the arguments: the chain of ``properties`` keys that leads to it.
ParamPath = tuple[str, ...]


def param_headers(input_schema: Mapping[str, Any]) -> dict[str, ParamPath]:
    """The parameters of a tool's inputSchema mirrored into headers: {header name (lower
    case, without the Mcp-Param- prefix): the parameter's path}.

    Raises:
        ValueError: for an ``x-mcp-header`` the spec forbids (MT-HDR-8, MT-HDR-17,
            MT-HDR-18): empty, not a token, repeated (case-insensitively), on a parameter
            that is not a string, integer or boolean, or anywhere but on a chain of
            ``properties`` keys from the root.
    """
    out: dict[str, ParamPath] = {}

    def visit(schema: Any, path: ParamPath, reachable: bool) -> None:
        if isinstance(schema, list):
            for item in schema:
                visit(item, path, False)
            return
        if not isinstance(schema, Mapping):
            return
        if "x-mcp-header" in schema:
            _add(schema, path, reachable)
        for keyword, value in schema.items():
            if keyword == "properties" and isinstance(value, Mapping):
                for name, sub in value.items():
                    visit(sub, (*path, str(name)), reachable)
            elif keyword in _SUBSCHEMA_KEYWORDS:
                if isinstance(value, Mapping) and keyword in ("$defs", "definitions",
                                                              "patternProperties",
                                                              "dependentSchemas"):
                    for sub in value.values():
                        visit(sub, path, False)
                else:
                    visit(value, path, False)

    def _add(schema: Mapping[str, Any], path: ParamPath, reachable: bool) -> None:
        name = schema["x-mcp-header"]
        where = ".".join(path) or "the root"
        if not reachable or not path:
            raise ValueError(
                f"x-mcp-header on {where} is not reachable by properties keys alone"
            )
        if not isinstance(name, str) or not name or not set(name) <= _TCHAR:
            raise ValueError(
                f"parameter {where!r}: x-mcp-header must be a non-empty HTTP token, "
                f"not {name!r}"
            )
        key = name.lower()
        if key in out:
            raise ValueError(f"x-mcp-header {name!r} is used twice (case-insensitively)")
        kind = schema.get("type")
        if not isinstance(kind, str) or kind not in _MIRRORED_TYPES:
            raise ValueError(
                f"parameter {where!r}: only string, integer and boolean parameters can be "
                "mirrored into a header"
            )
        out[key] = path

    visit(input_schema, (), True)
    return out


#: A number as a header writes it: JSON's number grammar, with a sign and leading zeros allowed.
_NUMBER: Final = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _agrees(header: str, value: Any) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, int | float):
        # MT-HDR-15 (SHOULD): numbers compare numerically ("042" and "42.0" are 42).
        if not _NUMBER.fullmatch(header):
            return False
        try:
            number = decimal.Decimal(header)
            body = decimal.Decimal(value) if isinstance(value, int) else decimal.Decimal(
                repr(value)
            )
        except decimal.InvalidOperation:
            return False
        # MT-HDR-17: an integer a header carries is within JavaScript's safe range.
        return abs(number) <= _SAFE_INTEGER and number == body
    return isinstance(value, str) and header == value


_ABSENT: Final = object()


def _value_at(arguments: Mapping[str, Any], path: ParamPath) -> Any:
    """MT-HDR-19: the argument at ``path``; _ABSENT where there is none."""
    value: Any = arguments
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return _ABSENT
        value = value[key]
    return value


def mirror_params(
    mirrored: Mapping[str, ParamPath], arguments: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """The Mcp-Param headers a client sends for ``arguments`` (MT-HDR-7, MT-HDR-19): for
    each mirrored parameter given and not null, ``("mcp-param-<key>", its header text)``
    (a string as itself or its Base64 form, MT-HDR-21; an integer in decimal; a boolean as
    true or false). A value of another type has no header."""
    out = []
    for key, path in mirrored.items():
        value = _value_at(arguments, path)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, str):
            if header_text(value) and value == value.strip(" \t") and not value.startswith(
                "=?base64?"
            ):
                text = value
            else:
                text = "=?base64?" + base64.b64encode(value.encode("utf-8")).decode() + "?="
        else:
            continue
        out.append((_PARAM_PREFIX + key, text))
    return out


def check_param_headers(
    mirrored: Mapping[str, ParamPath],
    arguments: Mapping[str, Any],
    headers: Headers,
    request: Request,
) -> None:
    """MT-HDR-12 (MUST): every mirrored parameter's header agrees with the body: present with
    the same (decoded) value when the argument is given and not null, absent otherwise
    (MT-HDR-20).

    Raises:
        RemoteProtocolError: 400 and -32020 (HeaderMismatch, MT-HDR-16).
    """
    for key, path in mirrored.items():
        values = headers.get_all(_PARAM_PREFIX + key)
        value = _value_at(arguments, path)
        label = f"Mcp-Param-{key}"
        param = ".".join(path)
        # The header's value comes from the argument that the tool's inputSchema marks with
        # x-mcp-header: the message and data say which, for the client that got it wrong.
        about = {
            "header": label, "source": f"arguments.{param}",
            "expected": None if value is _ABSENT else value,
        }
        if len(values) > 1:
            raise header_mismatch(f"the {label} header is repeated", request, **about)
        if value is None or value is _ABSENT:
            if values:
                raise header_mismatch(
                    f"{label} is sent but argument {param!r} is not; the header goes only "
                    "with it",
                    request, **about,
                )
            continue
        if not values:
            raise header_mismatch(
                f"{label} is missing; it repeats argument {param!r}, which the tool's "
                "inputSchema marks with x-mcp-header",
                request, **about,
            )
        raw = values[0].strip(" \t")
        if not header_text(raw):
            # MT-HDR-11 (MUST): a recognized Mcp-Param header with invalid characters.
            raise header_mismatch(
                f"{label} holds characters a header may not; send {ENCODED_FORM}",
                request, **about,
            )
        decoded = decode_header_value(raw)
        if decoded is None:
            raise header_mismatch(f"{label} is not valid {ENCODED_FORM}", request, **about)
        if not _agrees(decoded, value):
            raise header_mismatch(
                f"{label} does not repeat argument {param!r}, which the tool's inputSchema "
                "marks with x-mcp-header",
                request, **about,
            )


# -- results ---------------------------------------------------------------------------------------


def is_interim(result: Mapping[str, JSON]) -> bool:
    """Whether a result is an interim one (MJ-RES-4): a question (input_required) or a task
    (TK-CREATE), not the complete answer of its method."""
    return result.get("resultType") in ("input_required", "task")


def complete_result(
    method: str,
    result: Mapping[str, JSON],
    *,
    server_info: Mapping[str, JSON],
    cache: CacheHint | None,
) -> dict[str, JSON]:
    """A handler's result as a modern complete result (MJ-RES-3, ML-META-4, MU-CACHE-1)."""
    out: dict[str, JSON] = dict(result)
    out["resultType"] = "complete"
    if cache is not None and method in CACHEABLE_METHODS:
        out["ttlMs"] = cache.ttl_ms
        out["cacheScope"] = cache.scope.value
    # with_server_info's, on the copy made here (every answer takes this way).
    meta = out.get("_meta")
    out["_meta"] = {
        **(meta if isinstance(meta, Mapping) else {}), META_SERVER_INFO: dict(server_info)
    }
    return out


def with_server_info(
    result: Mapping[str, JSON], server_info: Mapping[str, JSON]
) -> dict[str, JSON]:
    """ML-META-4 (SHOULD): a result names the server in ``_meta``, beside what is there."""
    out = dict(result)
    meta = out.get("_meta")
    base = meta if isinstance(meta, Mapping) else {}
    out["_meta"] = {**base, META_SERVER_INFO: dict(server_info)}
    return out


def discover_result(
    *,
    capabilities: Mapping[str, JSON],
    server_info: Mapping[str, JSON],
    instructions: str | None,
    cache: CacheHint,
) -> dict[str, JSON]:
    """ML-VER-2: what server/discover answers: the versions, capabilities and instructions."""
    result: dict[str, JSON] = {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": dict(capabilities),
    }
    if instructions is not None:
        result["instructions"] = instructions
    return complete_result("server/discover", result, server_info=server_info, cache=cache)


# -- subscriptions/listen (MU-SUB-1 .. MU-SUB-5) ---------------------------------------------------

# The listen filter's booleans and the notification each asks for are the method table's
# (LISTEN_FLAGS), with what a server must have declared to send it. The two notifications
# about one thing followed are read with the filter's lists of them.
_RESOURCE_UPDATED: Final = "notifications/resources/updated"
_TASK_STATUS: Final = "notifications/tasks"


@attrs.frozen(kw_only=True)
class ListenFilter:
    """What a subscriptions/listen request asked for, reduced to what this server honours."""

    list_changed: frozenset[str]
    """The notification methods of the list_changed kinds asked for and offered."""
    resources: frozenset[str]
    """The resource URIs whose notifications/resources/updated were asked for."""
    acknowledged: Mapping[str, JSON]
    """The ``notifications`` object of notifications/subscriptions/acknowledged: the honoured
    subset of the request's (MU-SUB-2)."""
    task_ids: frozenset[str] = frozenset()
    """The tasks whose status notifications/tasks reports (TK-NOTIFY)."""

    @classmethod
    def parse(
        cls,
        request: Request,
        capabilities: Mapping[str, JSON],
        *,
        max_resources: int,
        max_uri_bytes: int | None = None,
        accept_task: Callable[[str], bool] | None = None,
    ) -> ListenFilter:
        """Read a listen request's ``notifications`` against the server's capabilities.
        ``accept_task`` says which task ids this client may follow; None: the request did
        not declare the tasks extension.

        Raises:
            RemoteProtocolError: -32602 for a malformed filter; 400 -32021 for ``taskIds``
                from a client without the tasks extension (TK-NOTIFY).
        """
        params = request.params or {}
        wanted = params.get("notifications")
        if not isinstance(wanted, Mapping):
            raise _invalid_listen("params.notifications must be an object", request)
        honoured: dict[str, JSON] = {}
        methods: set[str] = set()
        for flag, method in LISTEN_FLAGS.items():
            value = wanted.get(flag)
            if value is None:
                continue
            if not isinstance(value, bool):
                raise _invalid_listen(f"notifications.{flag} must be a boolean", request)
            if value and declared(capabilities, method):
                honoured[flag] = True
                methods.add(method)
        uris: set[str] = set()
        subs = wanted.get("resourceSubscriptions")
        if subs is not None:
            if not isinstance(subs, list) or not all(isinstance(u, str) for u in subs):
                raise _invalid_listen(
                    "notifications.resourceSubscriptions must be a list of URIs", request
                )
            if len(subs) > max_resources:
                raise _invalid_listen(
                    f"at most {max_resources} resource subscriptions per listen request",
                    request,
                )
            if max_uri_bytes is not None and any(
                len(u.encode("utf-8")) > max_uri_bytes for u in subs
            ):
                # TM-SEC-STATE: a URI kept for the stream's life is bounded, as a legacy
                # session's subscription is.
                raise _invalid_listen(
                    f"a resource URI is longer than {max_uri_bytes} bytes", request
                )
            if declared(capabilities, _RESOURCE_UPDATED):
                uris = set(subs)
                honoured["resourceSubscriptions"] = sorted(uris)
        tasks: frozenset[str] = frozenset()
        task_ids = wanted.get("taskIds")
        if task_ids is not None:
            if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
                raise _invalid_listen("notifications.taskIds must be a list of task ids", request)
            if len(task_ids) > max_resources:
                raise _invalid_listen(
                    f"at most {max_resources} task ids per listen request", request
                )
            if accept_task is None:
                raise missing_capability(
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}}, request.id
                )
            # TK-NOTIFY: the ack names the tasks that will be reported: this client's own.
            tasks = frozenset(t for t in task_ids if accept_task(t))
            honoured["taskIds"] = sorted(tasks)
        return cls(
            list_changed=frozenset(methods),
            resources=frozenset(uris),
            acknowledged=honoured,
            task_ids=tasks,
        )

    def wants(self, method: str, params: Mapping[str, JSON] | None) -> bool:
        """Whether a notification passes this filter (MU-SUB-1)."""
        if method == _RESOURCE_UPDATED:
            uri = (params or {}).get("uri")
            return isinstance(uri, str) and uri in self.resources
        if method == _TASK_STATUS:
            task_id = (params or {}).get("taskId")
            return isinstance(task_id, str) and task_id in self.task_ids
        return method in self.list_changed


def _invalid_listen(why: str, request: Request) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"Invalid params: {why}.", code=ErrorCode.INVALID_PARAMS, request_id=request.id
    )


def stamp_subscription(
    params: Mapping[str, JSON] | None, subscription_id: str | int
) -> dict[str, JSON]:
    """MU-SUB-3 (MUST): a listen stream's notification names its subscription in _meta."""
    out = dict(params or {})
    meta = out.get("_meta")
    out["_meta"] = {
        **(meta if isinstance(meta, Mapping) else {}),
        META_SUBSCRIPTION_ID: subscription_id,
    }
    return out


#: MJ-ERR-6: the codes of -32020…-32099 that 2026-07-28 defines, each sent with its meaning.
_DEFINED_CODES: Final = frozenset({
    ErrorCode.HEADER_MISMATCH, ErrorCode.MISSING_CLIENT_CAPABILITY,
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
})


def _reserved(code: int) -> bool:
    """MJ-ERR-5 / MJ-ERR-6: a code a modern answer must not carry: one of the legacy
    implementation range -32000…-32019, or of -32020…-32099 that the spec does not define."""
    return -32019 <= code <= -32000 or (-32099 <= code <= -32020 and code not in _DEFINED_CODES)


def modern_error(error: ErrorResponse) -> ErrorResponse:
    """An error as a modern request gets it (MJ-ERR-7: never -32002 or -32042).

    MU-RES-2 (MUST): a resource that does not exist is -32602, its URI in ``data``.
    """
    if error.code == ErrorCode.RESOURCE_NOT_FOUND:
        return ErrorResponse(
            id=error.id, code=ErrorCode.INVALID_PARAMS, message=error.message, data=error.data
        )
    if _reserved(error.code):
        # TM-MOD-URLELICIT: the legacy era's "URL elicitation required" has no modern form
        # (a modern server asks with input_required), and MJ-ERR-5 / MJ-ERR-6: no other
        # code of the reserved sub-ranges either: a handler that raised one is a server
        # fault.
        return ErrorResponse(
            id=error.id, code=ErrorCode.INTERNAL_ERROR, message=error.message, data=error.data
        )
    return error


def error_status(error: ErrorResponse, *, started: bool) -> int:
    """The HTTP status of a modern request answered with ``error`` by its handler.

    Handler errors are answered in-band with 200 (MT-POST-7); a missing client capability
    found while the handler ran, before a byte of the answer went out, is a 400 as it is
    when found before (ML-META-3, TM-ERA-CAPS).
    """
    if not started and error.code == ErrorCode.MISSING_CLIENT_CAPABILITY:
        return 400
    if not started and error.code == ErrorCode.SERVER_BUSY:
        return 503
    return 200
