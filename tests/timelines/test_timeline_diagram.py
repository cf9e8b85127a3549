# The renderer (trio_mcp.cli._diagram): a trace drawn as an SVG sequence diagram, the same bytes
# for the same trace, with the lifelines, bars and marks a reader looks for.
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from trio_mcp.base._trace import TraceKind, TraceRecord, dumps_trace
from trio_mcp.cli._diagram import main, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def rec(kind: TraceKind, *, session: str = "s1", **fields: Any) -> TraceRecord:
    return TraceRecord(kind=kind, session=session, **fields)


#: A POST whose stream drops, a handler that runs on, a resume that gets the rest.
DROP = [
    rec(TraceKind.REQUEST, conn="c1", http="POST", request="r1", detail="tools/call"),
    rec(TraceKind.APPEND, stream=2, seq=2, detail="priming"),
    rec(TraceKind.HANDLER_START, request="r1", method="tools/call"),
    rec(TraceKind.ATTACH, conn="c1", stream=2, seq=-1),
    rec(TraceKind.APPEND, stream=2, seq=3, request="r1", method="notifications/progress"),
    rec(TraceKind.DELIVER, conn="c1", stream=2, seq=3),
    rec(TraceKind.DETACH, conn="c1", stream=2, seq=3, detail="client-gone"),
    rec(TraceKind.APPEND, stream=2, seq=4, request="r1", detail="response"),
    rec(TraceKind.HANDLER_END, request="r1", method="tools/call", detail="returned"),
    rec(TraceKind.REQUEST, conn="c2", http="GET", detail="Last-Event-ID 2.2"),
    rec(TraceKind.ATTACH, conn="c2", stream=2, seq=2),
    rec(TraceKind.DELIVER, conn="c2", stream=2, seq=3),
    rec(TraceKind.DELIVER, conn="c2", stream=2, seq=4),
    rec(TraceKind.DETACH, conn="c2", stream=2, seq=4, detail="complete"),
]


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def test_the_same_trace_gives_the_same_bytes() -> None:
    """Rendering is a pure function of the records and the title."""
    assert render_svg(DROP, title="t") == render_svg(list(DROP), title="t")


def test_the_diagram_is_well_formed_svg_with_the_lifelines_of_the_story() -> None:
    """The output parses as SVG and names the client, the connections, the session's
    supervisor, the handler and the log, each once."""
    names = texts(render_svg(DROP))

    for name in ("client", "c1", "c2", "supervisor s1", "tools/call r1", "log of s1"):
        assert names.count(name) == 1, name


def test_a_handler_gets_one_activation_bar_from_its_start_to_its_end() -> None:
    """Each connection and each handler is drawn with one bar: three here."""
    root = ET.fromstring(render_svg(DROP))
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("fill-opacity") == "0.22"]

    assert len(bars) == 3


def test_a_dropped_and_a_cut_connection_are_marked() -> None:
    """A connection the client dropped, or one cut for stalling, ends with a cross and
    says so; a complete one ends plainly."""
    cut = [
        rec(TraceKind.REQUEST, conn="c1", http="GET"),
        rec(TraceKind.ATTACH, conn="c1", stream=0, seq=5),
        rec(TraceKind.DETACH, conn="c1", stream=0, seq=9, detail="stalled"),
    ]
    dropped = texts(render_svg(DROP))
    stalled = render_svg(cut)

    assert "dropped: the client went away" in dropped
    assert "stream complete: the response ends it" in dropped
    assert any(t.startswith("cut for stalling") for t in texts(stalled))
    assert stalled.count('stroke-width="2.5"') == 2  # the two strokes of one cross


def test_a_cut_connection_that_signals_ends_at_its_signal() -> None:
    """A connection cut for stalling that still finishes its write and takes the
    resumption-required signal is drawn on until the signal, which names the cursor."""
    cut = [
        rec(TraceKind.REQUEST, conn="c1", http="POST", request="r1", detail="tools/call"),
        rec(TraceKind.ATTACH, conn="c1", stream=2, seq=-1),
        rec(TraceKind.APPEND, stream=2, seq=3, request="r1", method="notifications/progress"),
        rec(TraceKind.DETACH, conn="c1", stream=2, seq=2, detail="stalled"),
        rec(TraceKind.DELIVER, conn="c1", stream=2, seq=3),
        rec(TraceKind.SIGNAL, conn="c1", stream=2, seq=3, detail="resumption-required"),
    ]
    svg = render_svg(cut)
    labels = texts(svg)

    assert "cut for stalling: reads the log no more" in labels
    assert "id 2.3 notifications/progress" in labels
    assert "resumption-required: resume after 2.3" in labels
    assert svg.count('stroke-width="2.5"') == 2  # one cross, at the signal
    assert labels.count("c1") == 1


def test_an_event_sent_again_on_a_resume_is_labelled_so() -> None:
    """The resumed connection's copy of an event the first one already wrote says
    "again"; the events the client gets for the first time do not."""
    labels = [t for t in texts(render_svg(DROP)) if t.startswith("id 2.")]

    assert labels == [
        "id 2.3 notifications/progress",
        "id 2.3 again, notifications/progress",
        "id 2.4 response to r1",
    ]


def test_labels_are_escaped_and_cut_to_fit() -> None:
    """A label with markup characters stays text, and a long one ends with an ellipsis."""
    odd = [rec(TraceKind.REQUEST, conn="c1", http="POST", detail="<b>&" + "x" * 200)]
    svg = render_svg(odd, title="a < b")

    [label] = [t for t in texts(svg) if t.startswith("POST")]
    assert label.startswith("POST <b>&x") and label.endswith("…")
    assert "a < b" in texts(svg)


def test_connection_columns_are_reused_once_free() -> None:
    """Three connections one after the other take one column; two at once take two."""
    def exchange(conn: str) -> list[TraceRecord]:
        return [
            rec(TraceKind.REQUEST, conn=conn, http="POST", detail="notifications/initialized"),
            rec(TraceKind.REPLY, conn=conn, status=202),
        ]

    apart = [*exchange("c1"), *exchange("c2"), *exchange("c3")]
    together = [apart[0], apart[2], apart[1], apart[3]]

    def width(svg: str) -> int:
        return int(ET.fromstring(svg).get("width") or 0)

    assert width(render_svg(together)) > width(render_svg(apart))


def test_the_command_draws_a_trace_file(tmp_path: Path) -> None:
    """`python -m trio_mcp.cli._diagram TRACE -o OUT` writes what render_svg gives."""
    trace = tmp_path / "t.jsonl"
    out = tmp_path / "t.svg"
    trace.write_text(dumps_trace(DROP, title="drop"), encoding="utf-8")

    assert 0 == main([str(trace), "-o", str(out)])
    assert out.read_text(encoding="utf-8") == render_svg(DROP, title="drop")
