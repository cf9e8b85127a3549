# The HTTP edge's decisions (spec/transport.md TM-HTTP-EDGE, TM-HTTP-SMUGGLE, TM-HTTP-ABSOLUTE;
# spec/security.md T-SEC-1): what both HTTP servers decide about a request from its head
# alone, before the application sees it or its body is read. trio-mcp's own server
# (trio_mcp.edges._http) and the ASGI adapter under hypercorn (trio_mcp.edges._asgi) hand in what
# they
# read and carry out the plan; neither decides. Every refusal an edge sends is written here
# once. Pure: no I/O.
from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import unquote

import attrs

from ._errors import ErrorCode, RemoteProtocolError
from ._headers import Headers, OriginPolicy
from ._transport import Reply, error_reply

__all__ = [
    "CONTENT_LENGTH_MAX_DIGITS",
    "LINGER_IDLE",
    "Elsewhere",
    "Plan",
    "ReadBody",
    "Refuse",
    "bad_request",
    "body_too_slow",
    "connections_busy",
    "declared_length",
    "header_too_large",
    "not_found",
    "not_implemented",
    "plan_head",
    "request_path",
    "too_large",
    "unserved",
    "version_not_supported",
]

#: The longest Content-Length read, in digits (h11's own bound: 20 digits hold any 64-bit
#: size). A longer one is refused before anything turns it into a number: CPython refuses
#: int() of more than 4,300 digits with an exception, and one request must not raise one.
CONTENT_LENGTH_MAX_DIGITS: Final = 20
_DIGITS: Final = frozenset(b"0123456789")
#: A lingering close (TM-HTTP-LINGER) ends early once nothing has arrived for this long: a
#: client still sending sends on; one that has stopped waits for the close.
LINGER_IDLE: Final = 1.0
#: The HTTP versions served; anything else is 505 (TM-SEC-H2: HTTP/2's preface reads as 2.0).
_VERSIONS: Final = frozenset({"1.0", "1.1"})


# -- the refusals --------------------------------------------------------------------------


def bad_request(reason: str) -> RemoteProtocolError:
    """400 for a request that could not be read (``reason``: what was wrong with it)."""
    return RemoteProtocolError(
        f"Bad Request: {reason.rstrip('.')}.", code=ErrorCode.INVALID_REQUEST, http_status=400
    )


def unserved() -> RemoteProtocolError:
    """400 from a connection guard (TM-SEC-ISOLATE), for a request whose handling failed
    before anything was sent."""
    return bad_request("this request could not be served")


def header_too_large() -> RemoteProtocolError:
    """431 for a request line and header block over ``http_max_header_bytes``."""
    return RemoteProtocolError(
        "Request Header Fields Too Large.", code=ErrorCode.INVALID_REQUEST, http_status=431
    )


def not_implemented() -> RemoteProtocolError:
    """501 for a transfer coding other than chunked (RFC 9112 §6.1; as h11 answers)."""
    return RemoteProtocolError(
        "Not Implemented: only Transfer-Encoding: chunked is supported.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=501,
    )


def version_not_supported() -> RemoteProtocolError:
    """505 for any HTTP version but 1.0 and 1.1 (TM-SEC-H2)."""
    return RemoteProtocolError(
        "HTTP Version Not Supported: this server speaks MCP over HTTP/1.1.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=505,
    )


def not_found(endpoint: str) -> RemoteProtocolError:
    """404 for a path that is not the MCP endpoint (TM-HTTP-PATH)."""
    return RemoteProtocolError(
        f"Not Found: the MCP endpoint is {endpoint}.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=404,
    )


def too_large(limit: int) -> RemoteProtocolError:
    """413 for a body over ``max_body_bytes``, declared or streamed (TM-HTTP-OWN)."""
    return RemoteProtocolError(
        f"Payload Too Large: the body exceeds {limit} bytes.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=413,
    )


def body_too_slow() -> RemoteProtocolError:
    """408 for a body not complete within ``http_body_timeout`` (TM-SEC-BODIES)."""
    return RemoteProtocolError(
        "Request Timeout: the body did not arrive in time.",
        code=ErrorCode.INVALID_REQUEST,
        http_status=408,
    )


def connections_busy() -> RemoteProtocolError:
    """503 for a connection past ``http_max_connections`` (TM-HTTP-OWN)."""
    return RemoteProtocolError(
        "Service Unavailable: too many open connections; retry later.",
        code=ErrorCode.SERVER_BUSY,
        http_status=503,
        headers=(("retry-after", "1"),),
    )


# -- the plan --------------------------------------------------------------------------------


@attrs.frozen
class Refuse:
    """Answer ``reply`` and serve nothing. ``close``: the connection ends after it whatever
    was read, because what follows on it cannot be framed with certainty (RFC 9112 §6.3);
    otherwise it ends only if the request's body was left unread."""

    reply: Reply
    close: bool = False


@attrs.frozen
class Elsewhere:
    """A path other than the MCP endpoint: the document the runtime serves there (a
    well-known one), else ``not_found``."""

    method: str
    path: str


@attrs.frozen
class ReadBody:
    """For the endpoint: read the body (at most ``limit`` bytes), then serve the request."""

    path: str
    limit: int


Plan = Refuse | Elsewhere | ReadBody


def plan_head(
    *,
    http_version: str,
    method: str,
    target: str,
    headers: Headers,
    policy: OriginPolicy,
    endpoint: str,
    max_body: int,
) -> Plan:
    """What an edge does with a request whose head it has read, in this order: the HTTP
    version; the framing (RFC 9112 §6.3: a request with both Content-Length and
    Transfer-Encoding is refused and its connection closed); Origin and Host before anything
    else is answered (T-SEC-1), a target in absolute form naming its host too; the path; a
    declared body over ``max_body``. ``target`` is the request-target as sent."""
    if http_version not in _VERSIONS:
        return Refuse(error_reply(version_not_supported()), close=True)
    framing = _framing_problem(http_version, headers)
    if framing is not None:
        return Refuse(error_reply(framing), close=True)
    path, authority = request_path(target)
    try:
        policy.check(headers)
        if authority is not None:
            # RFC 9112 §3.2.2: the target's authority names the host meant; it must be one
            # this server answers to, as the Host header must (TM-SEC-HOST).
            policy.check(Headers([(b"host", authority.encode("latin-1"))]))
    except RemoteProtocolError as exc:
        return Refuse(error_reply(exc))
    if path is None or path.rstrip("/") != endpoint.rstrip("/"):
        return Elsewhere(method.upper(), path if path is not None else target)
    declared = declared_length(headers)
    if declared is not None and declared > max_body:
        # Refused before its body: no 100 Continue, and nothing of it is read.
        return Refuse(error_reply(too_large(max_body)))
    return ReadBody(path=path, limit=max_body)


def request_path(target: str) -> tuple[str | None, str | None]:
    """The path a request-target names, percent-decoded (as hypercorn decodes it for
    ASGI), and the authority of one in absolute form: (path, None) for the origin form
    (``/mcp?x=1``); (path, authority) for the absolute form (``http://host:port/mcp``,
    which RFC 9112 §3.2.2 says a server MUST accept); (None, None) for the others (``*``,
    ``host:port``), which name no path."""
    if target.startswith("/"):
        path = target.split("?", 1)[0]
        return (unquote(path) if "%" in path else path), None
    scheme, sep, rest = target.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return None, None
    rest = rest.split("#", 1)[0].split("?", 1)[0]
    authority, slash, path = rest.partition("/")
    if not authority or "@" in authority:
        # No host, or userinfo (RFC 9110 §4.2.4: a sender MUST NOT generate it): refused
        # as a target naming no path of this server.
        return None, None
    return unquote(slash + path) or "/", authority


def declared_length(headers: Headers) -> int | None:
    """The body size a request declares in Content-Length, or None when it declares none
    (or one that ``plan_head`` refuses: its framing check comes first)."""
    lengths = headers.raw_values(b"content-length")
    if len(lengths) == 1:
        value = lengths[0]
        if value.isdigit() and len(value) <= CONTENT_LENGTH_MAX_DIGITS:
            return int(value)  # the common head, the short way
    size = _one_length([v.decode("latin-1") for v in lengths]) if lengths else None
    return None if size is None else int(size)


def _framing_problem(http_version: str, headers: Headers) -> RemoteProtocolError | None:
    """Why a request's head cannot be trusted to frame it, if it cannot: the checks h11
    makes (which hypercorn's h11 has made already, and trio-mcp's own server makes whatever
    parser read the head), and the one RFC 9112 §6.3 adds for a request with both framings.
    """
    lengths = headers.raw_values(b"content-length")
    codings = headers.raw_values(b"transfer-encoding")
    hosts = len(headers.raw_values(b"host"))
    if hosts == 1 and not codings:
        if not lengths:
            return None  # the common head, the short way
        if len(lengths) == 1:
            value = lengths[0]
            if value.isdigit() and len(value) <= CONTENT_LENGTH_MAX_DIGITS:
                return None
    if lengths and codings:
        # RFC 9112 §6.3: "a server MAY reject a request that contains both Content-Length
        # and Transfer-Encoding or process such a request in accordance with the
        # Transfer-Encoding alone. Regardless, the server MUST close the connection after
        # responding to such a request": a front end that framed it by Content-Length would
        # take what follows the chunked body for the next request (request smuggling).
        return bad_request(
            "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 §6.3)"
        )
    if lengths and _one_length([v.decode("latin-1") for v in lengths]) is None:
        return bad_request("bad Content-Length")
    if codings and (len(codings) > 1 or codings[0].strip().lower() != b"chunked"):
        # RFC 9112 §6.1: a server that receives a transfer coding it does not understand
        # SHOULD respond 501; chunked alone is understood (as h11 says).
        return not_implemented()
    if hosts > 1 or (hosts == 0 and http_version == "1.1"):
        # RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
        # HTTP/1.1 request message that lacks a Host header field and to any request
        # message that contains more than one Host header field line".
        return bad_request("one Host header is required")
    return None


def _one_length(values: Sequence[str]) -> bytes | None:
    """The one size Content-Length values name, as digits (h11 takes ``5, 5`` and repeated
    lines of one value as that value), when they name one of at most
    CONTENT_LENGTH_MAX_DIGITS digits; else None."""
    sizes = {part.strip() for value in values for part in value.split(",")}
    if len(sizes) != 1:
        return None
    digits = sizes.pop().encode("latin-1")
    if 0 < len(digits) <= CONTENT_LENGTH_MAX_DIGITS and set(digits) <= _DIGITS:
        return digits
    return None
