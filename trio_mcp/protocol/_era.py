# Which era a request to the one MCP endpoint belongs to, and the envelope a 2026-07-28
# ("modern") request must carry before anything runs (spec/modern.md). Pure: the runtime
# hands in the method, the headers and the decoded body, and gets back a route or a
# RemoteProtocolError whose status and JSON-RPC error are the reply.
#
# The body decides (ML-COMPAT-3, TM-ERA-BODY): a request whose params._meta names a protocol
# version is modern whatever its method or headers; without that claim a request is legacy
# unless its MCP-Protocol-Version header names no legacy revision. A modern request then
# climbs a ladder whose first failed rung answers it:
#
#   1. the envelope: _meta with protocolVersion and clientCapabilities   400 -32602
#   2. the headers agree with the body (version, method, name)            400 -32020
#   3. the version is one this server speaks                              400 -32022
from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ._errors import ErrorCode, RemoteProtocolError
from ._headers import PROTOCOL_VERSION, SESSION_ID, Headers
from ._jsonrpc import JSON, Notification, Request, parse_message
from ._logging import LOG_LEVELS
from ._methods import NAME_PARAM, REQUEST_CLASS, MessageClass
from ._versions import LEGACY_VERSIONS, MODERN_VERSIONS, Era

__all__ = [
    "ENCODED_FORM",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "VERSION_SOURCE",
    "Envelope",
    "Era",
    "ModernCall",
    "ModernNotification",
    "decode_header_value",
    "has_modern_claim",
    "header_mismatch",
    "header_text",
    "route_other",
    "route_post",
]

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"

MCP_METHOD: Final = "mcp-method"
MCP_NAME: Final = "mcp-name"

#: The versions whose clients send a version header but no _meta claim: a request without a
#: claim whose header names one of these is legacy (2024-11-05 included: its clients are
#: legacy clients, which the legacy path answers with its own version error, T-VER-4).
_LEGACY_HEADER_VERSIONS: Final = frozenset({"2024-11-05", *LEGACY_VERSIONS})



@attrs.frozen(kw_only=True)
class Envelope:
    """What a modern request says about its client, from its own ``_meta`` (ML-META-1)."""

    version: str
    client_capabilities: Mapping[str, JSON]
    client_info: Mapping[str, JSON] | None = None
    log_level: str | None = None
    """The per-request level (MU-LOG-3); None: no log messages at all."""


@attrs.frozen(kw_only=True)
class ModernCall:
    """A modern request that passed the envelope ladder."""

    request: Request
    envelope: Envelope


@attrs.frozen(kw_only=True)
class ModernNotification:
    """A modern notification: accepted with 202 and not dispatched (TM-ERA-NOTIFY)."""

    notification: Notification


def _meta_of(obj: JSON) -> Mapping[str, JSON] | None:
    if not isinstance(obj, Mapping):
        return None
    params = obj.get("params")
    if not isinstance(params, Mapping):
        return None
    meta = params.get("_meta")
    return meta if isinstance(meta, Mapping) else None


def has_modern_claim(obj: JSON) -> bool:
    """Whether a JSON-RPC message claims the modern era: its ``params._meta`` names a
    protocol version (ML-COMPAT-3)."""
    meta = _meta_of(obj)
    return meta is not None and META_PROTOCOL_VERSION in meta


def _header_is_modern(value: str | None) -> bool:
    return value is not None and value.strip() not in _LEGACY_HEADER_VERSIONS


def route_other(method: str, headers: Headers) -> None:
    """A GET or DELETE (or any other method): legacy, unless its version header is not and
    it names no session (TM-ERA-SESSION).

    Raises:
        RemoteProtocolError: 405 with ``Allow: POST`` for a modern client (MT-POST-1: the
            modern era has only POST; TM-ERA-GET).
    """
    if headers.get(SESSION_ID) is None and _header_is_modern(headers.get(PROTOCOL_VERSION)):
        raise RemoteProtocolError(
            f"Method Not Allowed: protocol version {headers.get(PROTOCOL_VERSION)!r} takes "
            "POST only.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=405,
            headers=(("allow", "POST"),),
        )


def route_post(headers: Headers, body: JSON) -> Era | ModernCall | ModernNotification:
    """The era of a POST whose body has been decoded, and for a modern request its envelope.

    Returns ``Era.LEGACY`` for the legacy path (which parses the body itself), a
    ``ModernCall`` for a request that passed the ladder, or a ``ModernNotification``.

    Raises:
        RemoteProtocolError: the reply for a request refused before anything runs, with the
            request's id whenever it can be read (MJ-ERR-1).
    """
    if isinstance(body, list):
        if any(has_modern_claim(item) for item in body):
            # MT-POST-4: one message per POST in the modern era; a batch is legacy-only.
            raise RemoteProtocolError(
                "Invalid Request: a batch cannot carry 2026-07-28 messages; send one message "
                "per POST.",
                code=ErrorCode.INVALID_REQUEST,
            )
        return Era.LEGACY
    claim = has_modern_claim(body)
    version_header = headers.get(PROTOCOL_VERSION)
    if not isinstance(body, Mapping) or "method" not in body:
        # Responses, and what is no message at all, are legacy: only a session has requests
        # of its own out to the client, and the legacy parser words the error.
        return Era.LEGACY
    if not claim:
        method = body.get("method")
        if isinstance(method, str) and REQUEST_CLASS.get(method) is MessageClass.INITIALIZE:
            if _header_is_modern(version_header):
                # An initialize is a legacy handshake; a header naming a modern version
                # contradicts it (TM-ERA-INIT).
                raise header_mismatch(
                    "an initialize request cannot carry a modern MCP-Protocol-Version "
                    f"header ({version_header!r})",
                    body,
                )
            return Era.LEGACY
        if not _header_is_modern(version_header):
            return Era.LEGACY
        if headers.get(SESSION_ID) is not None:
            # TM-ERA-SESSION: a request that names a session is a legacy request, whatever
            # its header says; the legacy path answers its version header (T-VER-4).
            return Era.LEGACY
    message = parse_message(body)
    if isinstance(message, Notification):
        # MT-POST-5: an accepted notification gets 202; none of the modern era's
        # notifications asks anything of this server (notifications/cancelled is a closed
        # connection now, MU-CANCEL-1).
        return ModernNotification(notification=message)
    assert isinstance(message, Request)
    envelope = _envelope(message)
    _check_routing_headers(headers, message, envelope)
    if envelope.version not in MODERN_VERSIONS:
        # MT-HDR-3 / ML-VER-1 (MUST): 400 with UnsupportedProtocolVersionError, listing what
        # is supported: the modern versions, as server/discover lists them.
        raise RemoteProtocolError(
            f"Unsupported protocol version: {envelope.version!r}.",
            code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            data={"supported": list(MODERN_VERSIONS), "requested": envelope.version},
            request_id=message.id,
        )
    return ModernCall(request=message, envelope=envelope)


def _invalid_envelope(message: str, request: Request) -> RemoteProtocolError:
    # ML-META-2 (MUST): a request missing required _meta fields gets -32602 and 400.
    return RemoteProtocolError(
        f"Invalid params: {message}",
        code=ErrorCode.INVALID_PARAMS,
        http_status=400,
        request_id=request.id,
    )


def _envelope(request: Request) -> Envelope:
    """Rung 1: the envelope's fields are there and of the right types."""
    params = request.params or {}
    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        raise _invalid_envelope(
            "a 2026-07-28 request carries params._meta with "
            f"{META_PROTOCOL_VERSION!r} and {META_CLIENT_CAPABILITIES!r}.",
            request,
        )
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str) or not version:
        raise _invalid_envelope(f"_meta[{META_PROTOCOL_VERSION!r}] must be a string.", request)
    caps = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(caps, Mapping):
        raise _invalid_envelope(
            f"_meta[{META_CLIENT_CAPABILITIES!r}] must be an object.", request
        )
    info = meta.get(META_CLIENT_INFO)
    if info is not None and not isinstance(info, Mapping):
        raise _invalid_envelope(f"_meta[{META_CLIENT_INFO!r}] must be an object.", request)
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVELS:
        # MU-LOG-5 (SHOULD): an unknown per-request log level gets -32602.
        raise _invalid_envelope(
            f"_meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}.", request
        )
    return Envelope(
        version=version,
        client_capabilities=caps,
        client_info=info,
        log_level=level if isinstance(level, str) else None,
    )


def header_mismatch(
    why: str,
    body: Mapping[str, Any] | Request,
    *,
    header: str | None = None,
    source: str | None = None,
    expected: object = None,
) -> RemoteProtocolError:
    """MT-HDR-16 (MUST): a header that fails validation gets 400 and -32020.

    The message says what was wrong in one sentence (J-ERR-4); ``data`` names the header,
    where its value comes from (``source``, a place in the body) and, when the body has it,
    the value expected, so that a client can fix its request without reading this code.
    """
    rid = body.id if isinstance(body, Request) else body.get("id")
    data: dict[str, JSON] | None = None
    if header is not None:
        data = {"header": header}
        if source is not None:
            data["source"] = source
        # Echoed only when short: the client's own value, not a way to double its bytes.
        if isinstance(expected, int | float | bool) or (
            isinstance(expected, str) and len(expected) <= 256
        ):
            data["expected"] = expected
    return RemoteProtocolError(
        f"Header mismatch: {why}.",
        code=ErrorCode.HEADER_MISMATCH,
        http_status=400,
        data=data,
        request_id=rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None,
    )


#: A header value's characters (MT-HDR-11): visible ASCII, spaces and tabs.
_HEADER_TEXT: Final = re.compile(r"[\t -~]*")


def header_text(value: str) -> bool:
    """Whether a header value holds only visible ASCII, spaces and tabs (MT-HDR-11): no
    control characters, no bytes outside ASCII (those go Base64-encoded, MT-HDR-21)."""
    return _HEADER_TEXT.fullmatch(value) is not None


def _single(headers: Headers, name: str, request: Request) -> str | None:
    values = headers.get_all(name)
    if len(values) > 1:
        # Two values cannot both agree with the body: the request is ambiguous.
        raise header_mismatch(f"the {name} header is repeated", request)
    if not values:
        return None
    # RFC 9110 §5.5: optional whitespace around a field value is not part of it.
    value = values[0].strip(" \t")
    if not header_text(value):
        # MT-HDR-22: a header value with invalid characters fails validation.
        raise header_mismatch(f"the {name} header holds characters a header may not", request)
    return value


#: Where each routing header's value comes from, for the messages and data that refuse it: a
#: client reading the error learns what to send.
VERSION_SOURCE: Final = f"params._meta.{META_PROTOCOL_VERSION}"
#: How a value that is not plain ASCII is written in a header (MT-HDR-21).
ENCODED_FORM: Final = "=?base64?<padded Base64 of its UTF-8>?="


def _check_routing_headers(headers: Headers, request: Request, envelope: Envelope) -> None:
    """Rung 2: MCP-Protocol-Version, Mcp-Method and Mcp-Name agree with the body. (What a
    refusal names, ``about``, is made only for a refusal: this runs on every request.)"""
    version = _single(headers, PROTOCOL_VERSION, request)
    if version is None or version != envelope.version:
        about_version: dict[str, Any] = {
            "header": "MCP-Protocol-Version", "source": VERSION_SOURCE,
            "expected": envelope.version,
        }
        if version is None:
            # MT-HDR-1 / MT-HDR-5: every modern POST carries the header; without it the
            # request is refused per Server Validation (-32020), never sent to the legacy path.
            raise header_mismatch(
                f"the MCP-Protocol-Version header is missing; it repeats {VERSION_SOURCE}",
                request, **about_version,
            )
        # MT-HDR-2 (MUST): the header matches _meta's protocol version.
        raise header_mismatch(
            f"MCP-Protocol-Version does not repeat {VERSION_SOURCE}", request, **about_version
        )
    method = _single(headers, MCP_METHOD, request)
    if method is None or method != request.method:
        about_method = {"header": "Mcp-Method", "source": "method", "expected": request.method}
        if method is None:
            # MT-HDR-6 (MUST): Mcp-Method is required.
            raise header_mismatch(
                "the Mcp-Method header is missing; it repeats the body's method", request,
                **about_method,
            )
        # MT-HDR-14 / MT-HDR-12 (MUST): values are case-sensitive and match the body.
        raise header_mismatch(
            "Mcp-Method does not repeat the body's method exactly", request, **about_method
        )
    field = NAME_PARAM.get(request.method)
    if field is None:
        return
    value = (request.params or {}).get(field)
    name = _single(headers, MCP_NAME, request)
    if name is None:
        # MT-HDR-6 (MUST): Mcp-Name is required for the methods that name something.
        raise header_mismatch(
            f"the Mcp-Name header is missing; a {request.method} request repeats its "
            f"params.{field} there",
            request, **_about_name(field, value),
        )
    decoded = decode_header_value(name)
    if decoded is None:
        raise header_mismatch(
            f"the Mcp-Name header is not valid {ENCODED_FORM}", request,
            **_about_name(field, value),
        )
    if isinstance(value, str) and decoded != value:
        # MT-HDR-10 (MUST): decoded before it is compared.
        raise header_mismatch(
            f"Mcp-Name does not repeat params.{field} (a value that is not ASCII goes as "
            f"{ENCODED_FORM})",
            request, **_about_name(field, value),
        )


def _about_name(field: str, value: JSON) -> dict[str, Any]:
    return {"header": "Mcp-Name", "source": f"params.{field}", "expected": value}


_B64_PREFIX: Final = "=?base64?"
_B64_SUFFIX: Final = "?="


def decode_header_value(value: str) -> str | None:
    """The value an Mcp-Name or Mcp-Param header stands for: the text itself, or for
    ``=?base64?…?=`` the UTF-8 text its standard, padded Base64 encodes (MT-HDR-10).

    Returns None for an encoded value that is not canonical Base64 of UTF-8: padding left
    out, characters outside the alphabet, or bits set past the end.
    """
    if not (
        value.startswith(_B64_PREFIX)
        and value.endswith(_B64_SUFFIX)
        and len(value) >= len(_B64_PREFIX) + len(_B64_SUFFIX)
    ):
        # MT-HDR-21: only the exact, lowercase markers around a payload encode a value;
        # anything else is the text itself.
        return value
    encoded = value[len(_B64_PREFIX) : len(value) - len(_B64_SUFFIX)]
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != encoded:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
