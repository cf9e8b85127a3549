# Unit tests for trio_mcp.protocol._eventid: SSE event ids as authenticated cursors.
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import Cursor, CursorCodec

KEY = b"k" * 32
CODEC = CursorCodec(KEY)
SESSION = "sess-AAAA"

_positions = st.integers(min_value=0, max_value=10**15)
_cursors = st.builds(Cursor, _positions, _positions)
_session_ids = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1)


@pytest.mark.spec("T-RESUME-3", "TM-RES-EVENTID")
@given(cursor=_cursors, session=_session_ids)
def test_event_id_round_trips_to_its_cursor(cursor: Cursor, session: str) -> None:
    """Decoding an id this codec issued for the session gives back stream and position."""
    assert cursor == CODEC.decode(session, CODEC.encode(session, cursor))


@pytest.mark.spec("T-SESS-3")
@given(cursor=_cursors, session=_session_ids)
def test_event_ids_are_visible_ascii(cursor: Cursor, session: str) -> None:
    """Event ids use only visible ASCII (0x21..0x7E): safe in an SSE id line and a header."""
    event_id = CODEC.encode(session, cursor)

    assert all(0x21 <= ord(c) <= 0x7E for c in event_id)


@pytest.mark.spec("T-RESUME-2")
@given(a=_cursors, b=_cursors)
def test_distinct_cursors_have_distinct_ids(a: Cursor, b: Cursor) -> None:
    """Two different positions never share an id within a session."""
    assert (a == b) == (CODEC.encode(SESSION, a) == CODEC.encode(SESSION, b))


@pytest.mark.spec("T-RESUME-3", "TM-RES-EVENTID")
def test_id_names_its_stream() -> None:
    """The stream is readable from the id alone."""
    assert Cursor(stream=3, seq=17) == CODEC.decode(SESSION, CODEC.encode(SESSION, Cursor(3, 17)))
    assert CODEC.encode(SESSION, Cursor(3, 17)).startswith("3.17.")


def test_id_survives_surrounding_whitespace() -> None:
    """Whitespace around a Last-Event-ID value is ignored."""
    event_id = CODEC.encode(SESSION, Cursor(0, 5))

    assert Cursor(0, 5) == CODEC.decode(SESSION, f"  {event_id}\t")


@pytest.mark.spec("TM-RES-MALFORMED")
@given(cursor=_cursors)
def test_id_from_another_session_is_rejected(cursor: Cursor) -> None:
    """An id issued for one session is not a cursor in another (no cross-session replay)."""
    assert CODEC.decode("sess-BBBB", CODEC.encode(SESSION, cursor)) is None


@pytest.mark.spec("TM-RES-MALFORMED")
@given(cursor=_cursors)
def test_id_from_before_a_restart_is_rejected(cursor: Cursor) -> None:
    """A new process has a new key: ids issued under the old key do not verify."""
    assert CursorCodec(b"j" * 32).decode(SESSION, CODEC.encode(SESSION, cursor)) is None


def _tamper(event_id: str, part: int, value: str) -> str:
    parts = event_id.split(".")
    parts[part] = value
    return ".".join(parts)


@pytest.mark.spec("TM-RES-MALFORMED")
@pytest.mark.parametrize(("part", "value"), [(0, "4"), (0, "0"), (1, "18"), (1, "0")])
def test_edited_stream_or_position_is_rejected(part: int, value: str) -> None:
    """Changing the stream or the position breaks the MAC."""
    event_id = CODEC.encode(SESSION, Cursor(3, 17))

    assert CODEC.decode(SESSION, _tamper(event_id, part, value)) is None


@pytest.mark.spec("TM-RES-MALFORMED")
@given(index=st.integers(min_value=0, max_value=15), char=st.sampled_from("AQgw_-09"))
def test_edited_mac_is_rejected(index: int, char: str) -> None:
    """Changing any character of the MAC makes the id invalid."""
    event_id = CODEC.encode(SESSION, Cursor(2, 9))
    mac = event_id.split(".")[2]
    edited = mac[:index] + char + mac[index + 1 :]

    if edited != mac:
        assert CODEC.decode(SESSION, _tamper(event_id, 2, edited)) is None


@pytest.mark.spec("TM-RES-MALFORMED")
@pytest.mark.parametrize(
    "event_id",
    [
        "",
        "0",
        "0.1",
        "0.1.",
        "a.b.cccccccccccccccc",
        "-1.2.AAAAAAAAAAAAAAAA",
        "01.2.AAAAAAAAAAAAAAAA",
        "1.02.AAAAAAAAAAAAAAAA",
        "1.2.AAAAAAAAAAAAAAA",
        "1.2.AAAAAAAAAAAAAAAAA",
        "1.2.AAAAAAAAAAAAAAA=",
        "1.2.AAAAAAAAAAAAAAAA.3",
        "12345678901234567.1.AAAAAAAAAAAAAAAA",
        "1 .2.AAAAAAAAAAAAAAAA",
    ],
)
def test_malformed_ids_are_rejected(event_id: str) -> None:
    """Anything not shaped like stream.seq.mac (canonical numbers) is no cursor."""
    assert CODEC.decode(SESSION, event_id) is None


@pytest.mark.spec("TM-RES-MALFORMED")
@given(garbage=st.text(max_size=60))
def test_random_text_is_rejected(garbage: str) -> None:
    """Random text never decodes to a cursor."""
    assert CODEC.decode(SESSION, garbage) is None


def test_key_is_not_in_repr() -> None:
    """The codec's key is kept out of its repr (logs, tracebacks)."""
    assert "kkkk" not in repr(CODEC)
