# The statistics of the runtime (TM-BP-COUNTERS): frozen records, each field of which says what
# kind of figure it is. A GAUGE is a level now (it goes down as well as up: sessions open,
# bytes retained); a COUNTER counts events since the server started (sessions created, streams
# cut). A field that holds a record of its own is a PART: its figures are read under a prefix
# (the modern path's ``requests`` is ``modern_requests``). The kind is declared where the
# figure is: /metrics (trio_mcp.edges.observe._metrics) exports a gauge as a gauge and a counter as
# a
# ``_total`` because the record says so, and /stats serves the same names, flat, as JSON.
from __future__ import annotations

import enum
import types
from collections.abc import Iterator
from typing import Any, Final, Union, get_args, get_origin

import attrs
from attrs import AttrsInstance

__all__ = ["KIND", "Kind", "as_dict", "counter", "declared", "figures", "gauge", "part"]

#: The metadata key of a statistics field: its Kind.
KIND: Final = "trio_mcp.kind"
#: The metadata key of a PART's prefix.
PREFIX: Final = "trio_mcp.prefix"


class Kind(enum.Enum):
    GAUGE = "gauge"
    """A level now: it goes down as well as up."""
    COUNTER = "counter"
    """Events since the server started: it only goes up."""
    PART = "part"
    """A record of figures of its own (or None: nothing of that part here)."""


def gauge() -> Any:
    """A field of a statistics record that is a level now (0 unless given)."""
    return attrs.field(default=0, metadata={KIND: Kind.GAUGE})


def counter() -> Any:
    """A field of a statistics record that counts events since the start (0 unless given)."""
    return attrs.field(default=0, metadata={KIND: Kind.COUNTER})


def part(prefix: str = "", *, default: Any = attrs.NOTHING) -> Any:
    """A field that holds a statistics record of its own, its figures named ``prefix`` +
    their names."""
    return attrs.field(default=default, metadata={KIND: Kind.PART, PREFIX: prefix})


def figures(record: AttrsInstance, prefix: str = "") -> Iterator[tuple[str, int | float, Kind]]:
    """Every figure of ``record``, its parts' included: its flat name, value and kind."""
    for field in attrs.fields(type(record)):
        kind: Kind = field.metadata[KIND]
        value = getattr(record, field.name)
        if kind is Kind.PART:
            if value is not None:
                yield from figures(value, prefix + field.metadata[PREFIX])
        else:
            yield prefix + field.name, value, kind


def as_dict(record: AttrsInstance) -> dict[str, int | float]:
    """``record``'s figures by their flat names (the stats port's JSON)."""
    return {name: value for name, value, _ in figures(record)}


def declared(cls: type[AttrsInstance], prefix: str = "") -> Iterator[tuple[str, Kind | None]]:
    """Every figure a statistics record class declares, its parts' included: its flat name
    and the kind its field declares (None: it declares none, which is a mistake)."""
    attrs.resolve_types(cls)
    for field in attrs.fields(cls):
        kind: Kind | None = field.metadata.get(KIND)
        if kind is Kind.PART:
            yield from declared(_record_type(field.type), prefix + field.metadata[PREFIX])
        else:
            yield prefix + field.name, kind


def _record_type(annotation: Any) -> type[AttrsInstance]:
    """The record class of a PART's annotation (``X``, or ``X | None``)."""
    if get_origin(annotation) in (Union, types.UnionType):
        [annotation] = [a for a in get_args(annotation) if a is not type(None)]
    assert attrs.has(annotation), annotation
    record: type[AttrsInstance] = annotation
    return record
