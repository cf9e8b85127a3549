# Authorization as a resource server sees it (spec/authorization.md, T-AUTH-*): who a request
# comes from, how a bearer token is found in it, and what a refusal says so that a client can
# find the authorization server (RFC 9728 metadata, RFC 6750 challenges). No I/O: verifying a
# token is the runtime's (trio_mcp.runtime._auth).
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from ._errors import ErrorCode, RemoteProtocolError
from ._headers import Headers

__all__ = [
    "PRM_PREFIX",
    "InvalidToken",
    "Principal",
    "bearer_token",
    "forbidden",
    "metadata_document",
    "metadata_paths",
    "unauthorized",
    "www_authenticate",
]

#: RFC 9728 §3: where a resource's metadata is, before the resource's own path.
PRM_PREFIX: Final = "/.well-known/oauth-protected-resource"


class InvalidToken(Exception):
    """A token that does not verify: malformed, badly signed, expired, not yet valid, for
    another audience or issuer, or revoked. Its message is for the server's log and the
    ``error_description`` of the 401."""


@attrs.frozen
class Principal:
    """Who a verified access token speaks for."""

    subject: str
    issuer: str = ""
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    claims: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def key(self) -> str:
        """What sessions, cursors and requestState are bound to: the subject, within its
        issuer (two issuers may use one subject for different users)."""
        return f"{self.issuer}#{self.subject}"


def bearer_token(headers: Headers) -> str | None:
    """The access token of an ``Authorization: Bearer`` header (RFC 6750 §2.1), or None
    when there is none. Only the header counts: a token in the query string is never read
    (T-AUTH, the spec forbids it there).

    Raises:
        RemoteProtocolError: 400 for a malformed header (another scheme is not malformed:
            it is no bearer token, and the request is unauthenticated).
    """
    values = headers.get_all("authorization")
    if not values:
        return None
    if len(values) > 1:
        raise RemoteProtocolError(
            "Bad Request: more than one Authorization header.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=400,
        )
    scheme, _, token = values[0].strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if not token or " " in token:
        raise RemoteProtocolError(
            "Bad Request: malformed bearer token.",
            code=ErrorCode.INVALID_REQUEST,
            http_status=400,
        )
    return token


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def www_authenticate(
    resource_metadata: str,
    *,
    error: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
) -> str:
    """A ``WWW-Authenticate: Bearer`` challenge (RFC 6750 §3) naming the resource's
    metadata (RFC 9728 §5.1) and, when there are any, the scopes to ask for."""
    parts = [f"resource_metadata={_quoted(resource_metadata)}"]
    if error is not None:
        parts.insert(0, f"error={_quoted(error)}")
    if description is not None:
        # Client-supplied text never goes in here: it is a fixed description.
        parts.append(f"error_description={_quoted(description)}")
    scope = " ".join(sorted(set(scopes)))
    if scope:
        parts.append(f"scope={_quoted(scope)}")
    return "Bearer " + ", ".join(parts)


def unauthorized(
    resource_metadata: str,
    scopes: Iterable[str],
    *,
    error: str | None = None,
    description: str | None = None,
) -> RemoteProtocolError:
    """401 with its challenge: no token, or one that does not verify (``invalid_token``)."""
    message = "Unauthorized: " + (description or "this server needs a bearer token.")
    return RemoteProtocolError(
        message,
        code=ErrorCode.INVALID_REQUEST,
        http_status=401,
        headers=(
            (
                "www-authenticate",
                www_authenticate(
                    resource_metadata, error=error, description=description, scopes=scopes
                ),
            ),
        ),
    )


def forbidden(
    resource_metadata: str, needed: Iterable[str], *, request_id: str | int | None = None
) -> RemoteProtocolError:
    """403 ``insufficient_scope``, naming every scope the request needs, so that the client
    can ask for them (step-up); with the id of the request refused, once its body was read
    (MJ-ERR-1)."""
    needed = sorted(set(needed))
    return RemoteProtocolError(
        "Forbidden: the token lacks the scope this request needs: " + " ".join(needed) + ".",
        code=ErrorCode.INVALID_REQUEST,
        http_status=403,
        request_id=request_id,
        headers=(
            (
                "www-authenticate",
                www_authenticate(
                    resource_metadata,
                    error="insufficient_scope",
                    description="The request needs more scope.",
                    scopes=needed,
                ),
            ),
        ),
    )


def metadata_paths(resource: str) -> tuple[str, ...]:
    """The paths the resource's metadata is served at: after the well-known prefix, the
    resource's own path (RFC 9728 §3.1), and the prefix alone for a client that looks
    there first."""
    path = urlsplit(resource).path.rstrip("/")
    return (PRM_PREFIX + path, PRM_PREFIX) if path else (PRM_PREFIX,)


def metadata_url(resource: str) -> str:
    """The URL of the resource's metadata (RFC 9728 §3.1)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{metadata_paths(resource)[0]}"


def metadata_document(
    resource: str,
    authorization_servers: Iterable[str],
    scopes_supported: Iterable[str] = (),
    resource_name: str | None = None,
) -> dict[str, Any]:
    """The Protected Resource Metadata (RFC 9728 §2) of ``resource``."""
    doc: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": list(authorization_servers),
        "bearer_methods_supported": ["header"],
    }
    scopes = list(scopes_supported)
    if scopes:
        doc["scopes_supported"] = scopes
    if resource_name is not None:
        doc["resource_name"] = resource_name
    return doc
