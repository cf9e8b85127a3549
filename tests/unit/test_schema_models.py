# The types Python users already write (issue 40), as parameters and as results: their JSON
# Schema 2020-12, their conversion into the handler's own types, and the field path of a
# value that does not convert (spec/handlers.md).

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import pathlib
import re
import uuid
from typing import Annotated, Any, Literal, TypedDict

import annotated_types
import jsonschema
import pydantic
import pytest

from trio_mcp.app._schema import (
    ArgumentError,
    convert_arguments,
    derive_signature,
    dump_value,
)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    street: str
    zip: str = pydantic.Field(pattern=r"^\d{5}$")


class Person(pydantic.BaseModel):
    """A person."""

    name: str = pydantic.Field(min_length=1, max_length=50)
    age: int = pydantic.Field(ge=0, le=150)
    born: datetime.date
    address: Address | None = None
    tags: list[str] = []


@dataclasses.dataclass
class Point:
    """A point."""

    x: float
    y: float = 0.0
    label: str = dataclasses.field(default="", metadata={"description": "what it is"})


@dataclasses.dataclass
class Bare:
    n: int


class Row(TypedDict):
    id: uuid.UUID
    when: datetime.datetime


def valid(schema: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` meets ``schema`` by the jsonschema library's 2020-12 validator."""
    return jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.spec("TM-HAND-TYPES")
def test_scalars_travel_as_strings_with_their_format() -> None:
    """datetime, date, time, UUID and Path are strings with their JSON Schema format;
    Decimal a number or a decimal string; bytes base64."""

    def f(
        at: datetime.datetime, day: datetime.date, clock: datetime.time, key: uuid.UUID,
        where: pathlib.Path, price: decimal.Decimal, blob: bytes,
    ) -> None: ...

    props = derive_signature(f).input_schema["properties"]
    assert {"type": "string", "format": "date-time"} == props["at"]
    assert {"type": "string", "format": "date"} == props["day"]
    assert {"type": "string", "format": "time"} == props["clock"]
    assert {"type": "string", "format": "uuid"} == props["key"]
    assert {"type": "string", "format": "path"} == props["where"]
    assert {"type": "string", "contentEncoding": "base64"} == props["blob"]
    assert valid(props["price"], 1.5) and valid(props["price"], "12.50")
    assert not valid(props["price"], "NaN") and not valid(props["price"], "1 2")


@pytest.mark.spec("TM-HAND-TYPES")
def test_scalars_arrive_converted() -> None:
    """The handler receives the Python values, not their JSON strings."""

    def f(
        at: datetime.datetime, day: datetime.date, key: uuid.UUID, where: pathlib.Path,
        price: decimal.Decimal, blob: bytes, cheap: decimal.Decimal,
    ) -> None: ...

    key = uuid.uuid4()
    got = convert_arguments(derive_signature(f), {
        "at": "2026-07-28T10:00:00+00:00", "day": "2026-07-28", "key": str(key),
        "where": "/srv/data", "price": "12.50", "blob": "aGVsbG8=", "cheap": 0.1,
    })
    assert datetime.datetime(2026, 7, 28, 10, tzinfo=datetime.UTC) == got["at"]
    assert datetime.date(2026, 7, 28) == got["day"]
    assert key == got["key"]
    assert pathlib.Path("/srv/data") == got["where"]
    assert decimal.Decimal("12.50") == got["price"]
    assert b"hello" == got["blob"]
    # A JSON number becomes the decimal its text says, not the binary float's expansion.
    assert decimal.Decimal("0.1") == got["cheap"]


@pytest.mark.spec("TM-HAND-PATH")
@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"at": "yesterday"}, "'at'"),
        ({"blob": "not base64!"}, "'blob'"),
        ({"rows": [{"id": str(uuid.UUID(int=1)), "when": "2026-01-01T00:00:00"},
                   {"id": "nope", "when": "2026-01-01T00:00:00"}]}, "'rows[1].id'"),
    ],
)
def test_a_value_that_does_not_convert_names_its_path(
    arguments: dict[str, Any], path: str
) -> None:
    """A string the schema lets through that is no date, base64 or UUID is refused naming
    where it is."""

    def f(
        at: datetime.datetime | None = None, blob: bytes = b"", rows: list[Row] | None = None,
    ) -> None: ...

    with pytest.raises(ArgumentError, match=re.escape(f"invalid argument {path}: not")):
        convert_arguments(derive_signature(f), arguments)


@pytest.mark.spec("TM-HAND-TYPES")
def test_a_union_takes_the_first_member_the_value_converts_to() -> None:
    """In `datetime | str` a date-time string is a datetime and any other string a str."""

    def f(when: datetime.datetime | str) -> None: ...

    sig = derive_signature(f)
    assert isinstance(convert_arguments(sig, {"when": "2026-01-01T00:00:00"})["when"],
                      datetime.datetime)
    assert "tomorrow" == convert_arguments(sig, {"when": "tomorrow"})["when"]


@pytest.mark.spec("TM-HAND-PYDANTIC")
def test_a_pydantic_model_is_described_by_its_own_json_schema() -> None:
    """A pydantic model parameter's schema is its model_json_schema, in the document's
    $defs; the models it holds are definitions beside it."""

    def f(person: Person) -> None: ...

    schema = derive_signature(f).input_schema
    own = Person.model_json_schema(ref_template="#/$defs/{model}")
    nested = own.pop("$defs")
    assert {"$ref": "#/$defs/Person"} == schema["properties"]["person"]
    assert own == schema["$defs"]["Person"]
    assert nested["Address"] == schema["$defs"]["Address"]
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.spec("TM-HAND-PYDANTIC", "TM-HAND-PATH")
def test_a_pydantic_model_arrives_as_an_instance_and_its_errors_name_the_field() -> None:
    """The handler gets a model instance (pydantic validated it); a value pydantic refuses
    is an argument error naming the field under the parameter."""

    def f(person: Person) -> None: ...

    sig = derive_signature(f)
    got = convert_arguments(sig, {"person": {"name": "Ada", "age": 36, "born": "1815-12-10"}})
    assert isinstance(got["person"], Person)
    assert datetime.date(1815, 12, 10) == got["person"].born

    with pytest.raises(ArgumentError) as caught:
        convert_arguments(sig, {"person": {
            "name": "Ada", "age": 36, "born": "1815-12-10",
            "address": {"street": "x", "zip": "123"},
        }})
    assert "person.address.zip" in str(caught.value)


@pytest.mark.spec("TM-HAND-TYPES")
def test_a_dataclass_is_an_object_of_its_fields() -> None:
    """A dataclass is an object whose properties are its init fields, required unless
    they have a default, described by its docstring (not the generated one) and field
    metadata; it arrives as an instance."""

    def f(p: Point, b: Bare) -> None: ...

    sig = derive_signature(f)
    defs = sig.input_schema["$defs"]
    assert {
        "type": "object",
        "properties": {
            "x": {"type": "number"},
            "y": {"type": "number", "default": 0.0},
            "label": {"type": "string", "default": "", "description": "what it is"},
        },
        "required": ["x"],
        "additionalProperties": False,
        "description": "A point.",
    } == defs["Point"]
    assert "description" not in defs["Bare"]
    got = convert_arguments(sig, {"p": {"x": 1}, "b": {"n": 2}})
    assert Point(1.0) == got["p"] and Bare(2) == got["b"]


@pytest.mark.spec("TM-HAND-CONSTRAINTS")
def test_constraints_become_json_schema_keywords() -> None:
    """annotated-types' constraints and pydantic's Field constraints become the keywords
    that say them, for the kind of value they bound, and a Field default counts."""

    def f(
        n: Annotated[int, annotated_types.Gt(0), annotated_types.Le(10)],
        ratio: Annotated[float, annotated_types.Interval(ge=0, lt=1)],
        name: Annotated[str, pydantic.Field(min_length=1, max_length=8, pattern="^[a-z]+$")],
        tags: Annotated[list[str], annotated_types.Len(1, 3)],
        step: Annotated[int, annotated_types.MultipleOf(5)],
        size: int = pydantic.Field(3, ge=1, description="how big"),
        many: list[int] = pydantic.Field(default_factory=list, max_length=2),  # noqa: B008
    ) -> None: ...

    sig = derive_signature(f)
    props = sig.input_schema["properties"]
    assert {"type": "integer", "exclusiveMinimum": 0, "maximum": 10} == props["n"]
    assert {"type": "number", "minimum": 0, "exclusiveMaximum": 1} == props["ratio"]
    assert {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"} == (
        props["name"]
    )
    assert {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3} == (
        props["tags"]
    )
    assert {"type": "integer", "multipleOf": 5} == props["step"]
    assert {"type": "integer", "minimum": 1, "description": "how big", "default": 3} == (
        props["size"]
    )
    assert "size" not in sig.input_schema["required"]
    base = {"n": 1, "ratio": 0.5, "name": "ab", "tags": ["a"], "step": 10}
    assert {**base, "size": 3, "many": []} == convert_arguments(sig, base)
    for bad in ({"n": 0}, {"ratio": 1}, {"name": "AB"}, {"tags": []}, {"step": 7},
                {"size": 0}, {"many": [1, 2, 3]}):
        with pytest.raises(ArgumentError, match=f"invalid argument '{next(iter(bad))}'"):
            convert_arguments(sig, {**base, **bad})


@pytest.mark.spec("TM-HAND-TYPES", "TM-HAND-PYDANTIC")
def test_results_are_dumped_as_json() -> None:
    """A result is dumped as JSON: a pydantic model by model_dump (JSON mode, by alias), a
    dataclass by its fields, the scalars as their strings."""
    person = Person(name="Ada", age=36, born=datetime.date(1815, 12, 10))
    assert person.model_dump(mode="json") == dump_value(person)
    assert {"x": 1.0, "y": 0.0, "label": ""} == dump_value(Point(1.0))
    assert ["2026-01-01", "aGk=", "1.50", "/a"] == dump_value(
        [datetime.date(2026, 1, 1), b"hi", decimal.Decimal("1.50"), pathlib.Path("/a")]
    )


@pytest.mark.spec("TM-HAND-PYDANTIC", "TM-HAND-TYPES")
def test_model_results_get_an_output_schema_that_their_dump_meets() -> None:
    """A pydantic model, a dataclass or a list of them as return type gives an
    outputSchema (pydantic's serialization schema for a model), and the dumped value
    meets it."""

    def person() -> Person: ...

    def point() -> Point: ...

    def points() -> list[Point]: ...

    def moment() -> datetime.datetime: ...

    out = derive_signature(person).output_schema
    assert out is not None
    assert Person.model_json_schema(mode="serialization")["properties"] == out["properties"]
    value = dump_value(Person(name="A", age=1, born=datetime.date(2000, 1, 1)))
    assert valid(out, value)
    assert derive_signature(point).wrap_output is False
    assert derive_signature(points).wrap_output is True
    moment_schema = derive_signature(moment).output_schema
    assert moment_schema is not None
    assert {"type": "string", "format": "date-time"} == moment_schema["properties"]["result"]


@pytest.mark.spec("TM-HAND-TYPES")
def test_literal_enum_and_optional_keep_their_schemas() -> None:
    """Literal, Enum and Optional keep the schemas they had, beside the new types."""

    def f(mode: Literal["a", "b"], colour: Colour, when: datetime.date | None = None) -> None: ...

    props = derive_signature(f).input_schema["properties"]
    assert {"type": "string", "enum": ["a", "b"]} == props["mode"]
    assert {"type": "string", "enum": ["red", "blue"]} == props["colour"]
    assert {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}],
            "default": None} == props["when"]


@pytest.mark.spec("TM-HAND-PYDANTIC")
def test_pydantic_is_not_imported_by_a_server_without_models() -> None:
    """A server whose tools take dataclasses and scalars never imports pydantic (nor
    annotated-types): both stay optional."""
    import subprocess
    import sys

    code = (
        "import sys, dataclasses, datetime\n"
        "from trio_mcp import Server\n"
        "from trio_mcp.app._schema import convert_arguments\n"
        "server = Server('plain')\n"
        "@dataclasses.dataclass\n"
        "class P:\n"
        "    x: int\n"
        "@server.tool()\n"
        "def f(p: P, when: datetime.date) -> P:\n"
        "    '''A tool.'''\n"
        "    return p\n"
        "convert_arguments(server.tools['f'].signature, {'p': {'x': 1}, 'when': '2026-01-01'})\n"
        "print(sorted(m for m in ('pydantic', 'annotated_types') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "[]" == out.stdout.strip()
