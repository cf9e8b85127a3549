# Unit tests for trio_mcp.protocol._sse: the text/event-stream encoder and the incremental
# decoder, including round trips and arbitrary chunk splits.

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import SSEDecoder, SSEEvent, encode_comment, encode_event

#: Field values that may appear on an id or event line: no CR, LF or NUL.
_field_text = st.text(
    st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), max_size=30
)
_data_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


def _decode(raw: bytes) -> list[SSEEvent]:
    return SSEDecoder().feed(raw)


def _normalized(data: str) -> str:
    return data.replace("\r\n", "\n").replace("\r", "\n")


# -- encoding ------------------------------------------------------------------------------


def test_message_event_is_id_then_data() -> None:
    """An event with an id and JSON data is two lines and a blank line."""
    assert b'id: 0.1.x\ndata: {"a":1}\n\n' == encode_event(id="0.1.x", data='{"a":1}')


@pytest.mark.spec("T-PSSE-1")
def test_priming_event_is_id_and_empty_data() -> None:
    """A priming event is an id and an empty data field, nothing else."""
    raw = encode_event(id="0.4.abc", data="")

    assert b"id: 0.4.abc\ndata:\n\n" == raw
    assert [SSEEvent(id="0.4.abc", data="")] == _decode(raw)


def test_multiline_data_becomes_several_data_lines() -> None:
    """Data with line breaks is sent as one data line per line."""
    assert b"data: a\ndata:\ndata: b\n\n" == encode_event(data="a\n\nb")


@pytest.mark.parametrize("data", ["a\r\nb", "a\rb", "a\nb"])
def test_every_line_break_style_is_split(data: str) -> None:
    """CRLF, CR and LF all end a data line; the client sees LF."""
    assert [SSEEvent(data="a\nb")] == _decode(encode_event(data=data))


@pytest.mark.spec("T-PSSE-4")
def test_retry_event() -> None:
    """A retry field is written as a number of milliseconds."""
    raw = encode_event(retry=2500)

    assert b"retry: 2500\n\n" == raw
    assert [SSEEvent(retry=2500)] == _decode(raw)


def test_negative_retry_is_refused() -> None:
    """retry is a non-negative number of milliseconds."""
    with pytest.raises(ValueError, match="retry"):
        encode_event(retry=-1)


def test_named_event_round_trips() -> None:
    """An event: line names the event type."""
    raw = encode_event(event="resumption-failed", data="{}")

    assert b"event: resumption-failed\ndata: {}\n\n" == raw
    assert [SSEEvent(event="resumption-failed", data="{}")] == _decode(raw)


def test_comment_with_text() -> None:
    """A comment is a line starting with a colon."""
    raw = encode_comment("keep-alive")

    assert b": keep-alive\n\n" == raw
    assert [SSEEvent(comment="keep-alive")] == _decode(raw)


def test_empty_comment() -> None:
    """An empty comment is a bare colon."""
    assert b":\n\n" == encode_comment()
    assert [SSEEvent(comment="")] == _decode(encode_comment())


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b", "\n"])
@pytest.mark.parametrize("field", ["id", "event"])
def test_line_breaks_and_nul_in_id_or_event_are_refused(field: str, bad: str) -> None:
    """An id or event value cannot hold CR, LF or NUL: it would end or corrupt the line."""
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        encode_event(**{field: bad}, data="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b"])
def test_line_breaks_and_nul_in_comment_are_refused(bad: str) -> None:
    """A comment with a line break would smuggle fields onto the stream."""
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        encode_comment(bad)


def test_event_is_utf8() -> None:
    """Events are UTF-8 on the wire."""
    assert "data: ü€😀\n\n".encode() == encode_event(data="ü€😀")


# -- decoding ------------------------------------------------------------------------------


def test_decoder_waits_for_the_blank_line() -> None:
    """Nothing is dispatched until the blank line that ends an event."""
    dec = SSEDecoder()

    assert [] == dec.feed(b"id: 1\ndata: x\n")
    assert [SSEEvent(id="1", data="x")] == dec.feed(b"\n")


def test_decoder_accepts_crlf_line_ends() -> None:
    """CRLF line ends decode like LF."""
    assert [SSEEvent(id="7", data="x")] == _decode(b"id: 7\r\ndata: x\r\n\r\n")


def test_decoder_reads_several_events_in_one_chunk() -> None:
    """A chunk holding several events yields them all, in order."""
    raw = encode_event(id="1", data="a") + encode_comment("c") + encode_event(id="2", data="b")

    assert [
        SSEEvent(id="1", data="a"),
        SSEEvent(comment="c"),
        SSEEvent(id="2", data="b"),
    ] == _decode(raw)


def test_decoder_keeps_only_one_leading_space_of_a_value() -> None:
    """Only the single space after the colon is syntax; further spaces are data."""
    assert [SSEEvent(data="  x")] == _decode(b"data:   x\n\n")


def test_decoder_field_without_colon_has_empty_value() -> None:
    """A bare "data" line is a data field with an empty value."""
    assert [SSEEvent(data="")] == _decode(b"data\n\n")


def test_decoder_ignores_non_numeric_retry() -> None:
    """A retry value that is not all digits is ignored."""
    assert [SSEEvent(data="x", retry=None)] == _decode(b"retry: soon\ndata: x\n\n")


def test_blank_lines_alone_dispatch_nothing() -> None:
    """Blank lines with no fields before them are not events."""
    assert [] == _decode(b"\n\n\n")


# -- properties ----------------------------------------------------------------------------


@given(data=_data_text, id=st.none() | _field_text, event=st.none() | _field_text)
def test_encode_decode_round_trip(data: str, id: str | None, event: str | None) -> None:
    """Decoding an encoded event gives back its data (line breaks as LF), id and event."""
    assert [SSEEvent(data=_normalized(data), id=id, event=event)] == _decode(
        encode_event(data=data, id=id, event=event)
    )


@given(retry=st.integers(min_value=0, max_value=10**9))
def test_retry_round_trip(retry: int) -> None:
    """Any non-negative retry survives encoding and decoding."""
    assert [SSEEvent(retry=retry)] == _decode(encode_event(retry=retry))


@given(text=st.text(st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",))))
def test_comment_round_trip(text: str) -> None:
    """A comment's text comes back (leading spaces are syntax and are dropped)."""
    assert [SSEEvent(comment=text.lstrip(" "))] == _decode(encode_comment(text))


_events = st.lists(
    st.one_of(
        st.builds(
            lambda d, i: ("event", d, i), _data_text, st.none() | _field_text
        ),
        st.builds(lambda c: ("comment", c, None), _field_text.map(lambda t: t.lstrip(" "))),
    ),
    max_size=6,
)


@given(events=_events, cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_decoder_is_independent_of_chunk_boundaries(
    events: list[tuple[str, str, str | None]], cuts: list[int]
) -> None:
    """However the byte stream is split (even inside a UTF-8 character), the decoder yields
    the same events as for the stream in one piece."""
    raw = b"".join(
        encode_event(data=a, id=b) if kind == "event" else encode_comment(a)
        for kind, a, b in events
    )
    expected = [
        SSEEvent(data=_normalized(a), id=b) if kind == "event" else SSEEvent(comment=a)
        for kind, a, b in events
    ]
    points = sorted({c % (len(raw) + 1) for c in cuts} | {0, len(raw)})

    dec = SSEDecoder()
    got: list[SSEEvent] = []
    for start, end in itertools.pairwise(points):
        got.extend(dec.feed(raw[start:end]))

    assert expected == got
    assert expected == _decode(raw)
