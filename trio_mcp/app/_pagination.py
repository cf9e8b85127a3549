# Pagination of list results (spec/tools.md U-PAGE-*, spec/modern.md MU-PAGE-1): opaque
# cursors that name the last item of a page, so pages stay stable while items come and go.
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..protocol import ErrorCode, RemoteProtocolError

__all__ = ["decode_cursor", "encode_cursor", "list_result", "paginate"]


def encode_cursor(kind: str, after: str) -> str:
    """An opaque page cursor: the last item's name, so pages stay stable (U-PAGE-2)."""
    raw = json.dumps({"k": kind, "a": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(kind: str, cursor: Any) -> str:
    try:
        if not isinstance(cursor, str):
            raise ValueError
        obj = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        if not isinstance(obj, dict) or obj.get("k") != kind or not isinstance(obj.get("a"), str):
            raise ValueError
        return str(obj["a"])
    except (ValueError, binascii.Error, UnicodeError, RecursionError):
        # U-PAGE-4 (SHOULD): an invalid cursor is -32602. RecursionError: JSON nested deeper
        # than the parser goes (base64 of 100,000 "["), a client's input like any other.
        raise RemoteProtocolError(
            "Invalid params: unknown pagination cursor.", code=ErrorCode.INVALID_PARAMS
        ) from None


def paginate(
    kind: str, items: Sequence[tuple[str, dict[str, Any]]], params: Mapping[str, Any], size: int
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``items`` (sorted by key) after the cursor in ``params``."""
    ordered = sorted(items, key=lambda kv: kv[0])
    start = 0
    if params.get("cursor") is not None:
        after = decode_cursor(kind, params["cursor"])
        start = next((i for i, (k, _) in enumerate(ordered) if k > after), len(ordered))
    page = ordered[start : start + size]
    more = start + size < len(ordered)
    return [v for _, v in page], (encode_cursor(kind, page[-1][0]) if more and page else None)


def list_result(
    field: str,
    kind: str,
    items: Sequence[tuple[str, dict[str, Any]]],
    params: Mapping[str, Any],
    size: int,
) -> dict[str, Any]:
    """A paginated list result: ``{field: page, nextCursor?}`` (U-PAGE-1, U-PAGE-2)."""
    page, next_cursor = paginate(kind, items, params, size)
    result: dict[str, Any] = {field: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result
