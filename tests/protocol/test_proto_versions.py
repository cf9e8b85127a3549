# Unit tests for trio_mcp.protocol._versions: legacy version negotiation in initialize and
# the MCP-Protocol-Version header.

from __future__ import annotations

import pytest

from trio_mcp.protocol import (
    LATEST_LEGACY_VERSION,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    ErrorCode,
    RemoteProtocolError,
)
from trio_mcp.protocol._versions import (
    DEFAULT_HEADER_VERSION,
    effective_version,
    is_modern,
    negotiate,
    revision_at_least,
)


@pytest.mark.spec("TM-VER-SET")
def test_latest_legacy_version_is_the_newest_legacy_revision() -> None:
    """The latest legacy version is 2025-11-25, first of the newest-first list."""
    assert "2025-11-25" == LATEST_LEGACY_VERSION
    assert sorted(LEGACY_VERSIONS, reverse=True) == list(LEGACY_VERSIONS)


@pytest.mark.spec("L-VER-2", "TM-VER-SET")
@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_supported_requested_version_is_answered_with_itself(version: str) -> None:
    """A supported version in initialize is answered with the same version."""
    assert version == negotiate(version)


@pytest.mark.spec("L-VER-3", "L-VER-4", "TM-VER-SET")
@pytest.mark.parametrize(
    "requested", ["2024-11-05", "1999-01-01", "2099-12-31", "", "latest", None, 20251125, ["x"]]
)
def test_unsupported_requested_version_gets_our_latest(requested: object) -> None:
    """An unsupported (or ill-typed) version is answered with our latest, not an error."""
    assert LATEST_LEGACY_VERSION == negotiate(requested)


@pytest.mark.spec("L-VER-3")
def test_modern_version_in_initialize_gets_a_legacy_version() -> None:
    """initialize opens a legacy session, so a modern version is answered with a legacy one."""
    assert LATEST_LEGACY_VERSION == negotiate(MODERN_VERSIONS[0])


@pytest.mark.spec("T-VER-3")
def test_absent_header_without_session_assumes_2025_03_26() -> None:
    """With no header and nothing else to go on, the server assumes 2025-03-26."""
    assert "2025-03-26" == DEFAULT_HEADER_VERSION
    assert "2025-03-26" == effective_version(None, None)


@pytest.mark.spec("T-VER-3", "TM-VER-SESSION")
@pytest.mark.parametrize("negotiated", LEGACY_VERSIONS)
def test_absent_header_in_session_uses_negotiated_version(negotiated: str) -> None:
    """A session's negotiated version is 'another way to identify the version'."""
    assert negotiated == effective_version(None, negotiated)


@pytest.mark.parametrize("header", LEGACY_VERSIONS)
def test_supported_header_is_used(header: str) -> None:
    """A supported header value is the version the request is served under."""
    assert header == effective_version(header, "2025-11-25")


def test_header_whitespace_is_ignored() -> None:
    """Surrounding whitespace in the header value does not matter."""
    assert "2025-06-18" == effective_version("  2025-06-18 ", None)


@pytest.mark.spec("T-VER-4")
@pytest.mark.parametrize(
    "header", ["2024-11-05", "2025-13-01", "garbage", "", " ", "2025-11-25,2025-06-18"]
)
@pytest.mark.parametrize("negotiated", [None, "2025-11-25"])
def test_unsupported_header_is_400_with_supported_list(
    header: str, negotiated: str | None
) -> None:
    """An invalid or unsupported MCP-Protocol-Version gets 400, listing the versions a
    legacy request may name."""
    with pytest.raises(RemoteProtocolError) as info:
        effective_version(header, negotiated)

    exc = info.value
    assert 400 == exc.http_status
    assert ErrorCode.INVALID_REQUEST == exc.code
    assert list(LEGACY_VERSIONS) == exc.data["supported"]
    assert header.strip() == exc.data["requested"]


@pytest.mark.spec("T-VER-4")
def test_modern_header_on_legacy_request_is_400() -> None:
    """A modern revision is not served through the legacy session path."""
    with pytest.raises(RemoteProtocolError) as info:
        effective_version(MODERN_VERSIONS[0], "2025-11-25")

    assert 400 == info.value.http_status


def test_is_modern_only_for_modern_revisions() -> None:
    """Only the stateless revisions count as modern."""
    assert [True] == [is_modern(v) for v in MODERN_VERSIONS]
    assert [False, False, False] == [is_modern(v) for v in LEGACY_VERSIONS]


@pytest.mark.parametrize(
    ("version", "floor", "expected"),
    [
        ("2025-11-25", "2025-11-25", True),
        ("2026-07-28", "2025-11-25", True),
        ("2025-06-18", "2025-11-25", False),
        ("2025-03-26", "2025-06-18", False),
    ],
)
def test_revision_at_least_compares_dates(version: str, floor: str, expected: bool) -> None:
    """Revisions are ISO dates, so 'at least' is date order."""
    assert expected == revision_at_least(version, floor)
