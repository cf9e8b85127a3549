# The Python types a handler's users already write, beyond JSON's own (spec/handlers.md
# TM-HAND-TYPES, TM-HAND-CONSTRAINTS, TM-HAND-PYDANTIC): their JSON Schema 2020-12, and
# their conversion from JSON arguments and back to JSON results. _schema.py asks here for
# what it does not know itself.
#
# - Scalars that travel as strings: datetime, date, time, UUID, Path, Decimal (a number or a
#   decimal string in, a string out, as pydantic does), bytes (base64).
# - Dataclasses, described and built as attrs classes are.
# - pydantic v2 models, by pydantic itself (model_json_schema, model_validate, model_dump):
#   pydantic is never imported here unless the application's own annotations hold a model,
#   so it stays an optional dependency.
# - Constraints from annotated-types (Gt, Ge, Lt, Le, MultipleOf, MinLen, MaxLen, Len,
#   Interval) and pydantic's Field, carried into the schema, where the validator enforces
#   them.
#
# Pure computation: no I/O, no trio.
from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import decimal
import pathlib
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "SCALARS",
    "Scalar",
    "constraint_keywords",
    "dataclass_fields",
    "dump_dataclass",
    "dump_pydantic",
    "is_dataclass_type",
    "is_field_info",
    "is_pydantic_model",
    "pydantic_errors",
    "pydantic_schema",
    "scalar_for",
    "validate_pydantic",
]


class ConversionError(ValueError):
    """A JSON value the schema let through that still does not make the Python value."""


@attrs.frozen(kw_only=True)
class Scalar:
    """A Python type carried as one JSON value: its schema, and the two conversions."""

    schema: Mapping[str, Any]
    load: Callable[[Any], Any]
    """JSON value (already valid for ``schema``) -> Python value; raises ValueError."""
    dump: Callable[[Any], Any]
    """Python value -> JSON value."""


def _iso(value: Any) -> str:
    text: str = value.isoformat()
    return text


def _load_decimal(value: Any) -> decimal.Decimal:
    # A JSON number goes through its shortest text, so 0.1 is Decimal("0.1"), not the
    # binary float's 55 digits.
    try:
        result = decimal.Decimal(value if isinstance(value, str) else repr(value))
    except decimal.InvalidOperation:
        raise ConversionError(f"not a decimal number: {value[:40]!r}") from None
    if not result.is_finite():
        raise ConversionError("not a finite decimal number")
    return result


def _load_bytes(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConversionError("not base64 (RFC 4648, with padding)") from None


def _loader(make: Callable[[str], Any], what: str) -> Callable[[Any], Any]:
    def load(value: Any) -> Any:
        try:
            return make(value)
        except (ValueError, TypeError):
            raise ConversionError(f"not {what}: {str(value)[:40]!r}") from None

    return load


#: A decimal as text: what Decimal() takes, without NaN, the infinities or spaces.
_DECIMAL_PATTERN = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"

#: Exact types (datetime before date: a datetime is a date).
SCALARS: Mapping[type, Scalar] = {
    datetime.datetime: Scalar(
        schema={"type": "string", "format": "date-time"},
        load=_loader(datetime.datetime.fromisoformat, "an ISO 8601 date-time"),
        dump=_iso,
    ),
    datetime.date: Scalar(
        schema={"type": "string", "format": "date"},
        load=_loader(datetime.date.fromisoformat, "an ISO 8601 date"),
        dump=_iso,
    ),
    datetime.time: Scalar(
        schema={"type": "string", "format": "time"},
        load=_loader(datetime.time.fromisoformat, "an ISO 8601 time"),
        dump=_iso,
    ),
    uuid.UUID: Scalar(
        schema={"type": "string", "format": "uuid"},
        load=_loader(uuid.UUID, "a UUID"),
        dump=str,
    ),
    pathlib.Path: Scalar(
        schema={"type": "string", "format": "path"},
        load=_loader(pathlib.Path, "a path"),
        dump=str,
    ),
    pathlib.PurePosixPath: Scalar(
        schema={"type": "string", "format": "path"},
        load=_loader(pathlib.PurePosixPath, "a path"),
        dump=str,
    ),
    decimal.Decimal: Scalar(
        schema={"anyOf": [{"type": "number"}, {"type": "string", "pattern": _DECIMAL_PATTERN}]},
        load=_load_decimal,
        dump=str,
    ),
    bytes: Scalar(
        schema={"type": "string", "contentEncoding": "base64"},
        load=_load_bytes,
        dump=lambda value: base64.b64encode(value).decode("ascii"),
    ),
}


def scalar_for(tp: Any) -> Scalar | None:
    """The Scalar of an annotation, or None."""
    if not isinstance(tp, type):
        return None
    if tp in SCALARS:
        return SCALARS[tp]
    # pathlib.PosixPath and friends: the concrete classes of Path.
    if issubclass(tp, pathlib.Path):
        return SCALARS[pathlib.Path]
    return None


def dump_scalar(value: Any) -> tuple[bool, Any]:
    """(True, JSON) for a value of a scalar type, (False, None) for any other."""
    for tp in (datetime.datetime, datetime.date, datetime.time):
        if isinstance(value, tp):
            return True, SCALARS[tp].dump(value)
    if isinstance(value, uuid.UUID | pathlib.PurePath | decimal.Decimal):
        return True, str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return True, base64.b64encode(bytes(value)).decode("ascii")
    return False, None


# ---------------------------------------------------------------------------
# Dataclasses
# ---------------------------------------------------------------------------


def is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


@attrs.frozen(kw_only=True)
class FieldSpec:
    """One init field of a dataclass: its name, whether the JSON must hold it, its default."""

    name: str
    required: bool
    default: Any
    """The default when it is a plain value (not a factory), else ``dataclasses.MISSING``."""


def dataclass_fields(cls: type) -> list[FieldSpec]:
    out = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        has_default = field.default is not dataclasses.MISSING
        has_factory = field.default_factory is not dataclasses.MISSING
        out.append(FieldSpec(
            name=field.name,
            required=not (has_default or has_factory),
            default=field.default if has_default else dataclasses.MISSING,
        ))
    return out


def dump_dataclass(value: Any, dump: Callable[[Any], Any]) -> dict[str, Any]:
    return {f.name: dump(getattr(value, f.name)) for f in dataclasses.fields(value)}


# ---------------------------------------------------------------------------
# pydantic (optional): told apart without importing it
# ---------------------------------------------------------------------------


def is_pydantic_model(tp: Any) -> bool:
    """A pydantic v2 model class (``BaseModel`` or ``RootModel``)."""
    return (
        isinstance(tp, type)
        and any(
            base.__name__ == "BaseModel" and base.__module__.startswith("pydantic")
            for base in tp.__mro__
        )
        and hasattr(tp, "model_json_schema")
    )


def is_field_info(value: Any) -> bool:
    """A pydantic ``Field(...)`` (a FieldInfo), told without importing pydantic."""
    kind = type(value)
    return kind.__name__ == "FieldInfo" and (kind.__module__ or "").startswith("pydantic")


def pydantic_schema(
    cls: type, mode: typing.Literal["validation", "serialization"]
) -> dict[str, Any]:
    """The model's own JSON Schema, with references into the document's ``$defs``."""
    schema: dict[str, Any] = typing.cast(Any, cls).model_json_schema(
        ref_template="#/$defs/{model}", mode=mode
    )
    return schema


def validate_pydantic(cls: type, value: Any) -> Any:
    """A model instance from JSON data; raises ConversionError naming each field at fault."""
    from pydantic import ValidationError

    try:
        return typing.cast(Any, cls).model_validate(value)
    except ValidationError as exc:
        raise ConversionError(pydantic_errors(exc)) from None


def pydantic_errors(exc: Any, prefix: str = "") -> str:
    """A ValidationError's problems, each at its path (``items[0].price``), three at most."""
    parts = []
    for error in exc.errors(include_url=False)[:3]:
        where = prefix
        for seg in error.get("loc", ()):
            where += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if where else str(seg))
        message = str(error.get("msg", "invalid"))[:200]
        parts.append(f"{where!r}: {message}" if where else message)
    return "; ".join(parts)


def dump_pydantic(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True)


# ---------------------------------------------------------------------------
# Constraints: annotated-types and pydantic's Field
# ---------------------------------------------------------------------------

_BOUNDS = {
    "Gt": ("gt", "exclusiveMinimum"),
    "Ge": ("ge", "minimum"),
    "Lt": ("lt", "exclusiveMaximum"),
    "Le": ("le", "maximum"),
    "MultipleOf": ("multiple_of", "multipleOf"),
}
_LENGTH_KEYWORDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}


class UnknownConstraint(TypeError):
    """Metadata that asks for a check JSON Schema cannot state."""


def _flatten(metadata: Iterable[Any]) -> Iterable[Any]:
    for meta in metadata:
        # annotated_types.GroupedMetadata (Interval, Len, pydantic's StringConstraints)
        # iterates to its single constraints.
        if getattr(meta, "__is_annotated_types_grouped_metadata__", False) is True:
            yield from meta
        else:
            yield meta


def constraint_keywords(metadata: Iterable[Any], inner: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema keywords of constraint metadata, for a value of schema ``inner``.

    Raises UnknownConstraint for metadata that is a constraint JSON Schema cannot say
    (a Predicate, a Timezone...), so that nothing is promised that no one checks.
    """
    found: dict[str, Any] = {}
    kind = inner.get("type")
    for meta in _flatten(metadata):
        name = type(meta).__name__
        module = type(meta).__module__ or ""
        if name in _BOUNDS and module.startswith(("annotated_types", "pydantic")):
            attr, keyword = _BOUNDS[name]
            found[keyword] = getattr(meta, attr)
        elif name in ("MinLen", "MaxLen") and module.startswith(("annotated_types", "pydantic")):
            keywords = _LENGTH_KEYWORDS.get(kind) if isinstance(kind, str) else None
            if keywords is None:
                raise UnknownConstraint(
                    f"{meta!r} applies to strings, arrays and objects, not to this type"
                )
            if name == "MinLen":
                found[keywords[0]] = meta.min_length
            else:
                found[keywords[1]] = meta.max_length
        elif module.startswith("pydantic") and name == "_PydanticGeneralMetadata":
            for key, value in vars(meta).items():
                if key == "pattern" and kind == "string":
                    found["pattern"] = value if isinstance(value, str) else value.pattern
                elif value is not None:
                    raise UnknownConstraint(f"{key}={value!r} cannot be said in JSON Schema")
        elif module.startswith(("annotated_types", "pydantic")):
            raise UnknownConstraint(f"{meta!r} cannot be said in JSON Schema")
    return found
