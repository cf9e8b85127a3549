# SSE event ids as cursors (spec/resumption.md).
#
# An id names its stream and its position in the session's log, and carries a MAC (keyed
# BLAKE2b) over (session, stream, position) under a key that lives only as long as the
# server process. So:
#   - T-RESUME-2: ids are unique across all streams of a session (positions never repeat);
#   - T-RESUME-3: an id tells which stream it came from;
#   - a cursor from another session, from before a restart, or edited by hand fails the MAC
#     and is rejected as malformed; it can never be misread as a position in this session.
# No I/O: the key is passed in.
from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import Any, Final

import attrs

__all__ = ["Cursor", "CursorCodec"]

_MAC_BYTES: Final = 12  # 96 bits: forging one by guessing is out of reach
_SHAPE: Final = re.compile(
    r"^(?:([a-z0-9]{1,16})~)?(0|[1-9][0-9]{0,15})\.(0|[1-9][0-9]{0,15})\.([A-Za-z0-9_-]{16})$"
)


@attrs.frozen
class Cursor:
    """A position in one stream of one session: the event with this ``seq`` was seen."""

    stream: int
    seq: int
    origin: str = ""
    """The process holding the stream, when several share the sessions (TM-STORE-STREAMS)."""


@attrs.frozen
class CursorCodec:
    """Encodes and verifies event ids for one server process. With an ``origin`` (the
    process's name among workers sharing sessions), ids name it too, under the MAC:
    ``<origin>~<stream>.<seq>.<mac>``, so that another worker can tell a stream held
    elsewhere from a forged cursor."""

    key: bytes = attrs.field(repr=False)
    origin: str = ""
    _keyed: Any = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # Keyed BLAKE2b is a MAC in one hash (HMAC needs two), and keyed once: each id then
        # costs a copy of this state. A server makes an id for every event it sends.
        key = self.key if len(self.key) <= 64 else hashlib.blake2b(self.key).digest()
        object.__setattr__(self, "_keyed", hashlib.blake2b(key=key, digest_size=_MAC_BYTES))

    def _mac(self, session_id: str, stream: int, seq: int, origin: str = "") -> str:
        mac = self._keyed.copy()
        where = f"{session_id}\x00{stream}\x00{seq}"
        mac.update((f"{where}\x00{origin}" if origin else where).encode())
        return base64.urlsafe_b64encode(mac.digest()).decode("ascii")

    def encode(self, session_id: str, cursor: Cursor) -> str:
        """The SSE ``id`` of the event at ``cursor`` in ``session_id``'s log (visible ASCII)."""
        return self.event_id(session_id, cursor.stream, cursor.seq)

    def event_id(
        self, session_id: str, stream: int, seq: int, *, origin: str | None = None
    ) -> str:
        """``encode`` without a Cursor to make: the id of every event sent comes from here.
        ``origin`` names another worker, for events of its stream served from a shared
        store once it is gone."""
        origin = self.origin if origin is None else origin
        if origin:
            mac = self._mac(session_id, stream, seq, origin)
            return f"{origin}~{stream}.{seq}.{mac}"
        return f"{stream}.{seq}.{self._mac(session_id, stream, seq)}"

    def decode(self, session_id: str, event_id: str) -> Cursor | None:
        """The cursor named by ``event_id``, or None when it is malformed, forged or foreign."""
        m = _SHAPE.match(event_id.strip())
        if m is None:
            return None
        origin = m.group(1) or ""
        stream, seq = int(m.group(2)), int(m.group(3))
        if not hmac.compare_digest(m.group(4), self._mac(session_id, stream, seq, origin)):
            return None
        return Cursor(stream, seq, origin)
