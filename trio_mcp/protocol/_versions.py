# Protocol revisions, version negotiation (spec/lifecycle.md) and the MCP-Protocol-Version
# header (spec/versioning.md). No I/O.
from __future__ import annotations

import enum
from typing import Final

from ._errors import ErrorCode, RemoteProtocolError

__all__ = [
    "DEFAULT_HEADER_VERSION",
    "LATEST_LEGACY_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Era",
    "effective_version",
    "is_modern",
    "negotiate",
    "revision_at_least",
]

class Era(enum.Enum):
    #: 2025-11-25 and before: sessions, initialize, GET streams, resumption.
    LEGACY = "legacy"
    #: 2026-07-28: stateless; every request carries its own envelope.
    MODERN = "modern"


#: The session-based ("legacy") revisions this server speaks, newest first.
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_LEGACY_VERSION: Final = LEGACY_VERSIONS[0]

#: The stateless revisions (no initialize, no sessions).
MODERN_VERSIONS: Final = ("2026-07-28",)

#: T-VER-3: the version to assume when a request carries no header and nothing else tells.
DEFAULT_HEADER_VERSION: Final = "2025-03-26"


def revision_at_least(version: str, floor: str) -> bool:
    """True when ``version`` is ``floor`` or newer (revisions are ISO dates, so they sort)."""
    return version >= floor


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS


def negotiate(requested: object) -> str:
    """The version to answer an ``initialize`` with.

    L-VER-2 (MUST): a supported requested version is answered with the same version.
    L-VER-3 / L-VER-4: otherwise the server answers with another version it supports, its
    latest. This is not an error in the legacy revisions.
    """
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LATEST_LEGACY_VERSION


def effective_version(header: str | None, negotiated: str | None) -> str:
    """The protocol version a legacy request is served under.

    Args:
        header: the ``MCP-Protocol-Version`` header, or None when absent.
        negotiated: the session's negotiated version, or None when there is no session yet.

    Raises:
        RemoteProtocolError: 400 for a header that names no version this server supports.
    """
    if header is None:
        # T-VER-3 (SHOULD): assume 2025-03-26 only when there is "no other way to identify
        # the version"; a session's negotiated version is such a way.
        return negotiated if negotiated is not None else DEFAULT_HEADER_VERSION
    value = header.strip()
    if value not in LEGACY_VERSIONS:
        # T-VER-4 (MUST): an invalid or unsupported MCP-Protocol-Version gets 400.
        raise RemoteProtocolError(
            f"Bad Request: unsupported MCP-Protocol-Version {value!r}.",
            code=ErrorCode.INVALID_REQUEST,
            data={"supported": list(LEGACY_VERSIONS), "requested": value},
        )
    return value
