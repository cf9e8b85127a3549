# Unit tests for trio_mcp.app._schema: schema derivation from signatures and docstrings,
# argument conversion, and dump_value; and how protocol/_jsonschema.py (the jsonschema
# library) words what is wrong with a value, which these tests hold to.

import enum
import math
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, TypedDict, Union

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.app._schema import (
    ArgumentError,
    Param,
    Signature,
    convert_arguments,
    derive_signature,
    dump_value,
)
from trio_mcp.protocol._jsonschema import schema_problems


def validate(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Every problem of ``instance`` under ``schema``, worded with its path."""
    return schema_problems(instance, schema, limit=None)

# ---------------------------------------------------------------------------
# Fixtures: module-level types so get_type_hints can resolve them.
# ---------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    ONE = 1
    TWO = "two"


@attrs.define
class Point:
    x: int
    y: int = 0


@attrs.define
class Shape:
    """A named polygon."""

    name: str
    points: list[Point]
    color: Color = Color.RED
    tags: list[str] = attrs.Factory(list)


@attrs.define
class Node:
    value: int
    children: list["Node"] = attrs.Factory(list)


@attrs.define
class Positive:
    n: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.define
class Described:
    size: int = attrs.field(metadata={"description": "size in bytes"})
    _secret: str = "s"
    computed: int = attrs.field(init=False, default=0)


@attrs.frozen
class Pair:
    left: Point
    right: Point


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Ctx:
    pass


class SubCtx(Ctx):
    pass


UserId = NewType("UserId", int)


def sig_of(fn: Any, **kwargs: Any) -> Signature:
    return derive_signature(fn, **kwargs)


def prop(fn: Any, name: str) -> Any:
    return sig_of(fn).input_schema["properties"][name]


# ---------------------------------------------------------------------------
# Type mapping
# ---------------------------------------------------------------------------


def test_primitive_annotations_map_to_json_types() -> None:
    """str, int, float, bool map to string, integer, number, boolean."""

    def f(s: str, i: int, x: float, b: bool) -> None: ...

    props = sig_of(f).input_schema["properties"]
    assert props == {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "x": {"type": "number"},
        "b": {"type": "boolean"},
    }


def test_none_annotation_maps_to_null() -> None:
    """A parameter annotated None accepts only JSON null."""

    def f(n: None) -> None: ...

    assert prop(f, "n") == {"type": "null"}


def test_input_schema_is_closed_object_with_required_list() -> None:
    """The input schema is an object with properties, required, and no extra keys allowed."""

    def f(a: int, b: int = 2) -> None: ...

    schema = sig_of(f).input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["a"]
    assert schema["additionalProperties"] is False
    assert "$schema" not in schema
    assert "$defs" not in schema


def test_no_parameters_gives_empty_object_schema() -> None:
    """A function without parameters gets an object schema with no properties."""

    def f() -> None: ...

    assert sig_of(f).input_schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_list_and_sequence_map_to_array_with_items() -> None:
    """list[X] and Sequence[X] become arrays whose items follow X."""

    def f(a: list[int], b: Sequence[str], c: list) -> None: ...  # type: ignore[type-arg]

    assert prop(f, "a") == {"type": "array", "items": {"type": "integer"}}
    assert prop(f, "b") == {"type": "array", "items": {"type": "string"}}
    assert prop(f, "c") == {"type": "array"}


def test_variadic_tuple_maps_to_array_with_items() -> None:
    """tuple[X, ...] is an array of X."""

    def f(t: tuple[float, ...]) -> None: ...

    assert prop(f, "t") == {"type": "array", "items": {"type": "number"}}


def test_fixed_tuple_maps_to_prefix_items_with_exact_length() -> None:
    """tuple[A, B] uses prefixItems and pins minItems/maxItems to its length."""

    def f(t: tuple[int, str]) -> None: ...

    assert prop(f, "t") == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }


def test_dict_and_mapping_map_to_object_with_additional_properties() -> None:
    """dict[str, X] and Mapping[str, X] are objects whose values follow X."""

    def f(d: dict[str, int], m: Mapping[str, bool], bare: dict) -> None: ...  # type: ignore[type-arg]

    assert prop(f, "d") == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert prop(f, "m") == {"type": "object", "additionalProperties": {"type": "boolean"}}
    assert prop(f, "bare") == {"type": "object"}


def test_optional_maps_to_anyof_with_null() -> None:
    """X | None and Optional[X] become anyOf [X, null]."""

    def f(a: int | None, b: Optional[str]) -> None: ...  # noqa: UP045

    assert prop(f, "a") == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert prop(f, "b") == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert sig_of(f).input_schema["required"] == ["a", "b"]


def test_default_none_parameter_is_not_required() -> None:
    """A parameter defaulting to None is optional and advertises default null."""

    def f(a: int | None = None) -> None: ...

    sig = sig_of(f)
    assert sig.input_schema["required"] == []
    assert sig.input_schema["properties"]["a"]["default"] is None
    assert sig.params[0].required is False


def test_union_maps_to_anyof() -> None:
    """X | Y and Union[X, Y] become anyOf in declaration order."""

    def f(a: int | str, b: Union[bool, list[int]]) -> None: ...  # noqa: UP007

    assert prop(f, "a") == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert prop(f, "b") == {
        "anyOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "integer"}}]
    }


def test_string_literal_maps_to_string_enum() -> None:
    """Literal["a", "b"] is a string with an enum of the values."""

    def f(mode: Literal["fast", "slow"]) -> None: ...

    assert prop(f, "mode") == {"type": "string", "enum": ["fast", "slow"]}


def test_integer_literal_keeps_integer_type() -> None:
    """A Literal of only integers is an integer enum."""

    def f(n: Literal[1, 2, 3]) -> None: ...

    assert prop(f, "n") == {"type": "integer", "enum": [1, 2, 3]}


def test_mixed_literal_maps_to_bare_enum() -> None:
    """A Literal mixing JSON types has an enum but no type."""

    def f(v: Literal["a", 1, None]) -> None: ...

    assert prop(f, "v") == {"enum": ["a", 1, None]}


def test_enum_subclass_maps_to_enum_of_values() -> None:
    """Enum subclasses become an enum of their member values."""

    def f(c: Color, lvl: Level, m: Mixed) -> None: ...

    assert prop(f, "c") == {"type": "string", "enum": ["red", "green"]}
    assert prop(f, "lvl") == {"type": "integer", "enum": [1, 2]}
    assert prop(f, "m") == {"enum": [1, "two"]}


def test_any_and_missing_annotation_map_to_empty_schema() -> None:
    """typing.Any and an unannotated parameter accept anything."""

    def f(a: Any, b) -> None: ...  # type: ignore[no-untyped-def]

    assert prop(f, "a") == {}
    assert prop(f, "b") == {}


def test_newtype_maps_to_its_supertype() -> None:
    """NewType("UserId", int) is advertised as its underlying int."""

    def f(user: UserId) -> None: ...

    assert prop(f, "user") == {"type": "integer"}


def test_attrs_class_parameter_goes_to_defs_with_ref() -> None:
    """An attrs class becomes a closed object schema in $defs, referenced by $ref."""

    def f(p: Point) -> None: ...

    schema = sig_of(f).input_schema
    assert schema["properties"]["p"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
        "additionalProperties": False,
    }


def test_nested_attrs_classes_each_get_one_def() -> None:
    """Nested attrs classes are defined once in $defs and referenced everywhere."""

    def f(shape: Shape, pair: Pair) -> None: ...

    schema = sig_of(f).input_schema
    assert set(schema["$defs"]) == {"Shape", "Point", "Pair"}
    shape = schema["$defs"]["Shape"]
    assert shape["properties"]["points"] == {"type": "array", "items": {"$ref": "#/$defs/Point"}}
    assert shape["description"] == "A named polygon."
    assert schema["$defs"]["Pair"]["properties"]["left"] == {"$ref": "#/$defs/Point"}


def test_attrs_field_defaults_make_fields_optional() -> None:
    """Fields with defaults or factories are not required; JSON-able defaults are shown."""

    def f(shape: Shape) -> None: ...

    shape = sig_of(f).input_schema["$defs"]["Shape"]
    assert shape["required"] == ["name", "points"]
    assert shape["properties"]["color"]["default"] == "red"
    assert "default" not in shape["properties"]["tags"]


def test_attrs_field_metadata_and_init_false() -> None:
    """Field metadata descriptions are used and init=False fields are left out."""

    def f(d: Described) -> None: ...

    described = sig_of(f).input_schema["$defs"]["Described"]
    assert described["properties"]["size"]["description"] == "size in bytes"
    assert "computed" not in described["properties"]
    assert "_secret" in described["properties"]


def test_recursive_attrs_class_refers_to_itself() -> None:
    """A self-referencing attrs class terminates via a $ref to its own definition."""

    def f(tree: Node) -> None: ...

    node = sig_of(f).input_schema["$defs"]["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_typeddict_maps_to_object_with_required_keys() -> None:
    """A TypedDict becomes a closed object; NotRequired keys are optional."""

    def f(m: Movie) -> None: ...

    movie = sig_of(f).input_schema["$defs"]["Movie"]
    assert movie["properties"] == {"title": {"type": "string"}, "year": {"type": "integer"}}
    assert movie["required"] == ["title"]


def test_annotated_string_gives_description() -> None:
    """Annotated[X, "text"] describes the parameter."""

    def f(city: Annotated[str, "City name"]) -> None: ...

    sig = sig_of(f)
    assert sig.input_schema["properties"]["city"] == {"type": "string", "description": "City name"}
    assert sig.params[0].description == "City name"


def test_jsonable_defaults_appear_in_schema() -> None:
    """Defaults that are JSON-able (after dumping enums/tuples) are advertised."""

    def f(a: int = 3, c: Color = Color.GREEN, t: tuple[int, ...] = (1, 2)) -> None: ...

    props = sig_of(f).input_schema["properties"]
    assert props["a"]["default"] == 3
    assert props["c"]["default"] == "green"
    assert props["t"]["default"] == [1, 2]


def test_non_jsonable_defaults_are_omitted_from_schema() -> None:
    """A default that cannot be expressed in JSON is not advertised but still optional."""
    sentinel = object()

    def f(a: Any = sentinel, x: float = math.nan) -> None: ...

    sig = sig_of(f)
    assert "default" not in sig.input_schema["properties"]["a"]
    assert "default" not in sig.input_schema["properties"]["x"]
    assert sig.input_schema["required"] == []


def test_params_record_name_description_required_default_annotation() -> None:
    """Signature.params lists each schema parameter with its metadata."""

    def f(a: int, b: str = "x") -> None:
        """Summary.

        Args:
            a: first
        """

    sig = sig_of(f)
    assert sig.params == (
        Param(name="a", description="first", required=True, default=None, annotation=int),
        Param(name="b", description="", required=False, default="x", annotation=str),
    )


def test_from_future_annotations_are_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    """String annotations from `from __future__ import annotations` are resolved."""
    source = (
        "from __future__ import annotations\n"
        "import attrs\n"
        "@attrs.define\n"
        "class Inner:\n"
        "    v: int\n"
        "@attrs.define\n"
        "class Outer:\n"
        "    inner: Inner\n"
        "    items: list[Inner] | None = None\n"
        "def tool(o: Outer, n: int | None = None) -> dict[str, Inner]:\n"
        "    return {}\n"
    )
    module = types.ModuleType("schema_future_mod")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(source, "<schema_future_mod>", "exec"), module.__dict__)

    sig = derive_signature(module.tool)
    assert sig.input_schema["properties"]["o"] == {"$ref": "#/$defs/Outer"}
    assert sig.input_schema["properties"]["n"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert sig.input_schema["$defs"]["Outer"]["properties"]["inner"] == {"$ref": "#/$defs/Inner"}
    assert sig.output_schema is not None
    assert sig.output_schema["additionalProperties"] == {"$ref": "#/$defs/Inner"}
    converted = convert_arguments(sig, {"o": {"inner": {"v": 1}, "items": [{"v": 2}]}})
    assert converted["o"] == module.Outer(module.Inner(1), [module.Inner(2)])


def test_name_and_description_overrides() -> None:
    """Explicit name and description replace the function name and docstring."""

    def f() -> None:
        """Docstring."""

    sig = derive_signature(f, name="renamed", description="custom")
    assert (sig.name, sig.description) == ("renamed", "custom")
    assert derive_signature(f).name == "f"


def test_bound_method_skips_self() -> None:
    """A bound method's self is not a schema parameter."""

    class Tools:
        def add(self, a: int, b: int) -> int:
            return a + b

    sig = derive_signature(Tools().add)
    assert list(sig.input_schema["properties"]) == ["a", "b"]


# ---------------------------------------------------------------------------
# Context parameter
# ---------------------------------------------------------------------------


def test_context_parameter_is_excluded_from_schema() -> None:
    """The parameter annotated with the context class is recorded and hidden."""

    def f(a: int, ctx: Ctx) -> None: ...

    sig = derive_signature(f, context_type=Ctx)
    assert sig.context_param == "ctx"
    assert list(sig.input_schema["properties"]) == ["a"]
    assert [p.name for p in sig.params] == ["a"]


def test_context_subclass_and_optional_are_recognised() -> None:
    """A subclass of the context class, or Optional of it, also marks the context."""

    def f(c: SubCtx) -> None: ...

    def g(c: Ctx | None = None) -> None: ...

    assert derive_signature(f, context_type=Ctx).context_param == "c"
    assert derive_signature(g, context_type=Ctx).context_param == "c"


def test_without_context_type_there_is_no_context_param() -> None:
    """With no context class given, context_param is None."""

    def f(a: int) -> None: ...

    assert derive_signature(f).context_param is None


def test_two_context_parameters_are_rejected() -> None:
    """Only one parameter may take the context."""

    def f(a: Ctx, b: Ctx) -> None: ...

    with pytest.raises(TypeError, match="more than one context"):
        derive_signature(f, context_type=Ctx)


# ---------------------------------------------------------------------------
# Rejections at derive time
# ---------------------------------------------------------------------------


def test_var_positional_is_rejected() -> None:
    """*args cannot be expressed as named JSON arguments."""

    def f(*args: int) -> None: ...

    with pytest.raises(TypeError, match=r"\*args"):
        derive_signature(f)


def test_var_keyword_is_rejected() -> None:
    """**kwargs cannot be expressed in a closed schema."""

    def f(**kwargs: int) -> None: ...

    with pytest.raises(TypeError, match=r"\*\*kwargs"):
        derive_signature(f)


def test_positional_only_is_rejected() -> None:
    """Positional-only parameters cannot be passed by name."""

    def f(a: int, /) -> None: ...

    with pytest.raises(TypeError, match="positional-only parameter 'a'"):
        derive_signature(f)


def test_unsupported_annotation_is_rejected() -> None:
    """An annotation with no JSON mapping raises TypeError naming the parameter."""

    def f(data: complex) -> None: ...

    with pytest.raises(TypeError, match="unsupported annotation complex for parameter 'data'"):
        derive_signature(f)


def test_unsupported_nested_annotation_is_rejected() -> None:
    """An unsupported type inside a container is also rejected."""

    def f(data: list[complex]) -> None: ...

    with pytest.raises(TypeError, match="parameter 'data'"):
        derive_signature(f)


def test_non_string_mapping_keys_are_rejected() -> None:
    """JSON object keys are strings, so dict[int, X] is rejected."""

    def f(d: dict[int, str]) -> None: ...

    with pytest.raises(TypeError, match="mapping keys must be str"):
        derive_signature(f)


def test_unresolvable_forward_reference_is_rejected() -> None:
    """A string annotation that names nothing raises TypeError."""

    def f(a: "NoSuchType") -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match="cannot resolve type hints"):
        derive_signature(f)


# ---------------------------------------------------------------------------
# Docstrings
# ---------------------------------------------------------------------------


def test_docstring_args_section_is_parsed_and_removed() -> None:
    """Args: entries describe parameters and are cut from the description."""

    def f(city: str, days: int = 1) -> None:
        """Get the forecast.

        Looks the city up first.

        Args:
            city: Name of the city.
            days: How many days
                to forecast.

        Returns:
            The forecast.
        """

    sig = sig_of(f)
    assert (
        sig.description
        == "Get the forecast.\n\nLooks the city up first.\n\nReturns:\n    The forecast."
    )
    assert sig.input_schema["properties"]["city"]["description"] == "Name of the city."
    assert sig.input_schema["properties"]["days"]["description"] == "How many days to forecast."


@pytest.mark.parametrize("header", ["Arguments:", "Parameters:"])
def test_docstring_alternative_section_headers(header: str) -> None:
    """Arguments: and Parameters: are accepted like Args:."""

    def f(a: int) -> None: ...

    f.__doc__ = f"Summary.\n\n{header}\n    a: the value\n"
    sig = sig_of(f)
    assert sig.description == "Summary."
    assert sig.params[0].description == "the value"


def test_docstring_entries_may_carry_types_in_parentheses() -> None:
    """`name (type): text` entries are parsed by name."""

    def f(a: int, b: str) -> None:
        """Summary.

        Args:
            a (int): first
            b (str, optional): second
        """

    sig = sig_of(f)
    assert [p.description for p in sig.params] == ["first", "second"]


def test_missing_docstring_gives_empty_description() -> None:
    """A function without a docstring has description ""."""

    def f(a: int) -> None: ...

    sig = sig_of(f)
    assert sig.description == ""
    assert "description" not in sig.input_schema["properties"]["a"]


def test_annotated_description_wins_over_docstring() -> None:
    """An Annotated description takes precedence over the docstring entry."""

    def f(a: Annotated[int, "from annotation"]) -> None:
        """Summary.

        Args:
            a: from docstring
        """

    assert sig_of(f).params[0].description == "from annotation"


# ---------------------------------------------------------------------------
# Output schema
# ---------------------------------------------------------------------------


def test_str_return_has_no_output_schema_in_auto_mode() -> None:
    """A str return is plain text content unless structured output is requested."""

    def f() -> str:
        raise NotImplementedError

    sig = sig_of(f)
    assert sig.output_schema is None
    assert sig.wrap_output is False


def test_str_return_is_wrapped_when_structured_output_requested() -> None:
    """structured_output=True wraps even a str return in {"result": ...}."""

    def f() -> str:
        raise NotImplementedError

    sig = derive_signature(f, structured_output=True)
    assert sig.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "string"}},
        "required": ["result"],
    }
    assert sig.wrap_output is True


@pytest.mark.parametrize(
    ("annotation", "inner"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    ],
)
def test_non_object_returns_are_wrapped_in_result(annotation: Any, inner: Any) -> None:
    """Non-object return types get an output schema {"result": <schema>} and wrap_output."""

    def f() -> None: ...

    f.__annotations__["return"] = annotation
    sig = sig_of(f)
    assert sig.output_schema == {
        "type": "object",
        "properties": {"result": inner},
        "required": ["result"],
    }
    assert sig.wrap_output is True


def test_attrs_return_is_the_object_schema_itself() -> None:
    """An attrs class return is inlined as the output schema, unwrapped."""

    def f() -> Point:
        raise NotImplementedError

    sig = sig_of(f)
    assert sig.wrap_output is False
    assert sig.output_schema == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
        "additionalProperties": False,
    }


def test_attrs_return_keeps_defs_for_nested_classes() -> None:
    """Nested classes of an attrs return stay in $defs of the output schema."""

    def f() -> Shape:
        raise NotImplementedError

    schema = sig_of(f).output_schema
    assert schema is not None
    assert set(schema["$defs"]) == {"Point"}
    assert schema["properties"]["points"]["items"] == {"$ref": "#/$defs/Point"}


def test_recursive_attrs_return_keeps_its_own_definition() -> None:
    """A recursive return class stays in $defs so its inner $ref resolves."""

    def f() -> Node:
        raise NotImplementedError

    schema = sig_of(f).output_schema
    assert schema is not None
    assert "Node" in schema["$defs"]
    assert validate({"value": 1, "children": [{"value": 2}]}, schema) == []
    assert validate({"value": 1, "children": [{"value": "x"}]}, schema) != []


def test_dict_and_typeddict_returns_are_object_schemas() -> None:
    """dict[str, X] and TypedDict returns are object schemas, unwrapped."""

    def f() -> dict[str, int]:
        raise NotImplementedError

    def g() -> Movie:
        raise NotImplementedError

    assert sig_of(f).output_schema == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert sig_of(f).wrap_output is False
    movie = sig_of(g).output_schema
    assert movie is not None
    assert movie["required"] == ["title"]
    assert sig_of(g).wrap_output is False


@pytest.mark.parametrize("annotation", [None, Any, "missing"])
def test_none_any_and_missing_returns_have_no_output_schema(annotation: Any) -> None:
    """Returns annotated None or Any, or not annotated, produce no output schema."""

    def f() -> None: ...

    if annotation == "missing":
        del f.__annotations__["return"]
    else:
        f.__annotations__["return"] = annotation
    for mode in (None, True):
        sig = derive_signature(f, structured_output=mode)
        assert sig.output_schema is None
        assert sig.wrap_output is False


def test_structured_output_false_disables_output_schema() -> None:
    """structured_output=False means no output schema whatever the return type."""

    def f() -> Point:
        raise NotImplementedError

    sig = derive_signature(f, structured_output=False)
    assert sig.output_schema is None
    assert sig.wrap_output is False


def test_unsupported_return_is_ignored_in_auto_mode_but_rejected_when_requested() -> None:
    """Auto mode skips structured output for unmappable returns; True raises TypeError."""

    def f() -> complex:
        raise NotImplementedError

    assert derive_signature(f).output_schema is None
    with pytest.raises(TypeError, match="return annotation"):
        derive_signature(f, structured_output=True)


# ---------------------------------------------------------------------------
# convert_arguments
# ---------------------------------------------------------------------------


def test_convert_fills_defaults_and_accepts_none_arguments() -> None:
    """Missing optional arguments take the function's defaults; None means no arguments."""

    def f(a: int = 1, b: Point | None = None) -> None: ...

    sig = sig_of(f)
    assert convert_arguments(sig, None) == {"a": 1, "b": None}
    assert convert_arguments(sig, {"a": 5}) == {"a": 5, "b": None}


def test_convert_rejects_unknown_argument() -> None:
    """Keys outside the schema are rejected by name."""

    def f(a: int) -> None: ...

    with pytest.raises(ArgumentError, match="unexpected argument 'bogus'"):
        convert_arguments(sig_of(f), {"a": 1, "bogus": 2})


def test_convert_rejects_missing_required_argument() -> None:
    """A required parameter that is absent is reported by name."""

    def f(a: int, b: str) -> None: ...

    with pytest.raises(ArgumentError, match="missing required argument 'b'"):
        convert_arguments(sig_of(f), {"a": 1})


def test_convert_rejects_bool_for_int() -> None:
    """JSON true is not an integer."""

    def f(n: int) -> None: ...

    with pytest.raises(ArgumentError, match="'n': expected integer, got boolean"):
        convert_arguments(sig_of(f), {"n": True})


def test_convert_rejects_bool_for_float() -> None:
    """JSON true is not a number."""

    def f(x: float) -> None: ...

    with pytest.raises(ArgumentError, match="'x': expected number, got boolean"):
        convert_arguments(sig_of(f), {"x": False})


def test_convert_accepts_int_for_float_and_makes_it_float() -> None:
    """An integer is a valid number and reaches the function as float."""

    def f(x: float) -> None: ...

    result = convert_arguments(sig_of(f), {"x": 3})
    assert result == {"x": 3.0}
    assert type(result["x"]) is float


def test_convert_accepts_integral_float_for_int() -> None:
    """JSON Schema counts 1.0 as an integer; the function receives int 1."""

    def f(n: int) -> None: ...

    result = convert_arguments(sig_of(f), {"n": 1.0})
    assert type(result["n"]) is int


def test_convert_rejects_wrong_type() -> None:
    """A string where an integer is expected is reported with both types."""

    def f(n: int) -> None: ...

    with pytest.raises(ArgumentError, match="invalid argument 'n': expected integer, got string"):
        convert_arguments(sig_of(f), {"n": "5"})


def test_convert_rejects_value_outside_literal() -> None:
    """A value not in the Literal is rejected listing the allowed values."""

    def f(mode: Literal["fast", "slow"]) -> None: ...

    with pytest.raises(ArgumentError, match=r"'mode': must be one of \[\"fast\", \"slow\"\]"):
        convert_arguments(sig_of(f), {"mode": "medium"})


def test_convert_rejects_value_outside_enum_and_converts_members() -> None:
    """Enum arguments become members; unknown values are rejected."""

    def f(c: Color, lvl: Level) -> None: ...

    sig = sig_of(f)
    assert convert_arguments(sig, {"c": "green", "lvl": 2}) == {"c": Color.GREEN, "lvl": Level.HIGH}
    with pytest.raises(ArgumentError, match="'c': must be one of"):
        convert_arguments(sig, {"c": "blue", "lvl": 1})


def test_convert_enum_does_not_confuse_true_with_one() -> None:
    """JSON true does not match the enum value 1."""

    def f(lvl: Level) -> None: ...

    with pytest.raises(ArgumentError, match="'lvl'"):
        convert_arguments(sig_of(f), {"lvl": True})


def test_convert_builds_attrs_instances() -> None:
    """Objects for attrs parameters are constructed, applying field defaults."""

    def f(p: Point) -> None: ...

    assert convert_arguments(sig_of(f), {"p": {"x": 1}}) == {"p": Point(1, 0)}


def test_convert_builds_nested_attrs_instances() -> None:
    """Nested attrs classes, lists of them and enums inside them are all constructed."""

    def f(shape: Shape) -> None: ...

    result = convert_arguments(
        sig_of(f), {"shape": {"name": "tri", "points": [{"x": 1, "y": 2}], "color": "green"}}
    )
    assert result["shape"] == Shape(name="tri", points=[Point(1, 2)], color=Color.GREEN)


def test_convert_builds_recursive_attrs_instances() -> None:
    """A recursive attrs class is built at every depth."""

    def f(tree: Node) -> None: ...

    result = convert_arguments(sig_of(f), {"tree": {"value": 1, "children": [{"value": 2}]}})
    assert result["tree"] == Node(1, [Node(2)])


def test_convert_uses_attrs_init_alias_for_private_fields() -> None:
    """A private field is passed to __init__ under its alias."""

    def f(d: Described) -> None: ...

    result = convert_arguments(sig_of(f), {"d": {"size": 3, "_secret": "x"}})
    assert result["d"] == Described(size=3, secret="x")


def test_convert_reports_nested_path_of_bad_field() -> None:
    """Errors inside nested objects and arrays name the full path."""

    def f(shape: Shape) -> None: ...

    with pytest.raises(ArgumentError, match=r"'shape\.points\[1\]\.x': expected integer"):
        convert_arguments(sig_of(f), {"shape": {"name": "s", "points": [{"x": 1}, {"x": "2"}]}})


def test_convert_reports_missing_and_unknown_nested_fields() -> None:
    """Missing and unexpected keys inside an attrs object name their path."""

    def f(p: Point) -> None: ...

    with pytest.raises(ArgumentError, match=r"missing required argument 'p\.x'"):
        convert_arguments(sig_of(f), {"p": {"y": 1}})
    with pytest.raises(ArgumentError, match=r"unexpected argument 'p\.z'"):
        convert_arguments(sig_of(f), {"p": {"x": 1, "z": 1}})


def test_convert_reports_errors_inside_optional_object() -> None:
    """For Optional[attrs class], a bad field is reported, not a vague union failure."""

    def f(p: Point | None = None) -> None: ...

    with pytest.raises(ArgumentError, match=r"'p\.x': expected integer, got string"):
        convert_arguments(sig_of(f), {"p": {"x": "no"}})
    with pytest.raises(ArgumentError, match="'p': expected Point or null, got integer"):
        convert_arguments(sig_of(f), {"p": 5})


def test_convert_wraps_attrs_validator_failures() -> None:
    """attrs validators that refuse a schema-valid value raise ArgumentError with the path."""

    def f(v: Positive) -> None: ...

    with pytest.raises(ArgumentError, match="'v'"):
        convert_arguments(sig_of(f), {"v": {"n": -1}})


def test_convert_lists_tuples_and_dicts() -> None:
    """Arrays become lists or tuples and objects become dicts, element types applied."""

    def f(
        a: list[float],
        b: tuple[int, ...],
        c: tuple[int, str],
        d: dict[str, Point],
        s: Sequence[int],
    ) -> None: ...

    result = convert_arguments(
        sig_of(f), {"a": [1, 2.5], "b": [1, 2], "c": [1, "x"], "d": {"k": {"x": 1}}, "s": [1]}
    )
    assert result == {"a": [1.0, 2.5], "b": (1, 2), "c": (1, "x"), "d": {"k": Point(1)}, "s": [1]}
    assert type(result["a"][0]) is float


def test_convert_rejects_wrong_tuple_length() -> None:
    """A fixed tuple must have exactly its length."""

    def f(c: tuple[int, str]) -> None: ...

    with pytest.raises(ArgumentError, match="'c': must have at most 2 items"):
        convert_arguments(sig_of(f), {"c": [1, "x", 3]})


def test_convert_union_picks_matching_branch() -> None:
    """A union argument is converted with the first member it matches."""

    def f(v: int | Point | list[Point]) -> None: ...

    sig = sig_of(f)
    assert convert_arguments(sig, {"v": 3}) == {"v": 3}
    assert convert_arguments(sig, {"v": {"x": 1}}) == {"v": Point(1)}
    assert convert_arguments(sig, {"v": [{"x": 2}]}) == {"v": [Point(2)]}


def test_convert_typeddict_stays_a_dict() -> None:
    """TypedDict arguments are validated and passed as dicts."""

    def f(m: Movie) -> None: ...

    assert convert_arguments(sig_of(f), {"m": {"title": "Up"}}) == {"m": {"title": "Up"}}
    with pytest.raises(ArgumentError, match=r"missing required argument 'm\.title'"):
        convert_arguments(sig_of(f), {"m": {"year": 2009}})


def test_convert_rejects_non_object_arguments() -> None:
    """Arguments themselves must be a JSON object."""

    def f() -> None: ...

    with pytest.raises(ArgumentError, match="must be a JSON object"):
        convert_arguments(sig_of(f), [1, 2])  # type: ignore[arg-type]


def test_convert_reports_every_problem_at_once() -> None:
    """All argument errors are joined into one message."""

    def f(a: int, b: str) -> None: ...

    with pytest.raises(ArgumentError) as info:
        convert_arguments(sig_of(f), {"a": "x", "c": 1})
    message = str(info.value)
    assert "'a'" in message
    assert "'b'" in message
    assert "'c'" in message


def test_argument_error_is_a_value_error() -> None:
    """ArgumentError subclasses ValueError so generic handlers still catch it."""
    assert issubclass(ArgumentError, ValueError)


# ---------------------------------------------------------------------------
# validate
# ---------------------------------------------------------------------------


def test_validate_type_list() -> None:
    """A list of types accepts any of them."""
    schema = {"type": ["string", "null"]}
    assert validate("a", schema) == []
    assert validate(None, schema) == []
    assert validate(1, schema) == ["$: expected string or null, got integer"]


def test_validate_integer_and_number_exclude_bool() -> None:
    """Booleans are neither integers nor numbers."""
    assert validate(True, {"type": "integer"}) != []
    assert validate(False, {"type": "number"}) != []
    assert validate(1, {"type": "number"}) == []
    assert validate(1.0, {"type": "integer"}) == []
    assert validate(1.5, {"type": "integer"}) != []


def test_validate_properties_required_and_additional_false() -> None:
    """properties validate members, required demands keys, additionalProperties false closes."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert validate({"a": 1}, schema) == []
    assert validate({}, schema) == ["$.a: required property is missing"]
    assert validate({"a": 1, "b": 2}, schema) == ["$.b: unexpected property"]
    assert validate({"a": "x"}, schema) == ["$.a: expected integer, got string"]


def test_validate_additional_properties_schema() -> None:
    """additionalProperties as a schema validates every extra member."""
    schema = {"type": "object", "additionalProperties": {"type": "string"}}
    assert validate({"k": "v"}, schema) == []
    assert validate({"k": 1}, schema) == ["$.k: expected string, got integer"]


def test_validate_items_and_prefix_items() -> None:
    """prefixItems checks leading positions; items checks the rest."""
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}}
    assert validate(["a", 1, 2], schema) == []
    assert validate([1], schema) == ["$[0]: expected string, got integer"]
    assert validate(["a", 1, "b"], schema) == ["$[2]: expected integer, got string"]


def test_validate_items_false_forbids_extra_items() -> None:
    """items: false after prefixItems forbids any further element."""
    schema = {"prefixItems": [{}], "items": False}
    assert validate([1], schema) == []
    assert validate([1, 2], schema) == ["$[1]: no value is allowed here"]


def test_validate_enum_and_const_use_json_equality() -> None:
    """enum/const compare as JSON: 1 equals 1.0 but true does not equal 1."""
    assert validate(1.0, {"enum": [1, 2]}) == []
    assert validate(True, {"enum": [1, 2]}) == ["$: must be one of [1, 2], got true"]
    assert validate([1, {"a": None}], {"const": [1, {"a": None}]}) == []
    assert validate(1, {"const": True}) == ["$: must be true, got 1"]


def test_validate_any_of() -> None:
    """anyOf passes when at least one branch matches."""
    schema = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert validate(1, schema) == []
    assert validate("a", schema) == []
    assert validate(None, schema) == ["$: expected integer or string, got null"]


def test_validate_any_of_reports_single_deeper_branch_or_generic_failure() -> None:
    """anyOf explains via the one branch that matched the value's shape, else generically."""
    nullable_object = {
        "anyOf": [{"type": "object", "properties": {"x": {"type": "integer"}}}, {"type": "null"}]
    }
    assert validate({"x": "a"}, nullable_object) == ["$.x: expected integer, got string"]
    two_arrays = {
        "anyOf": [
            {"type": "array", "items": {"type": "integer"}},
            {"type": "array", "items": {"type": "string"}},
        ]
    }
    assert validate([1, "a"], two_arrays) == [
        "$: does not match any of the allowed schemas (anyOf)"
    ]


def test_validate_one_of() -> None:
    """oneOf passes when exactly one branch matches."""
    schema = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert validate(1.5, schema) == []
    assert validate(1, schema) == ["$: matches 2 schemas in oneOf, expected exactly one"]
    assert validate("x", schema) != []


def test_validate_all_of() -> None:
    """allOf requires every branch."""
    schema = {"allOf": [{"type": "integer"}, {"minimum": 3}]}
    assert validate(4, schema) == []
    assert validate(2, schema) == ["$: must be >= 3, got 2"]


def test_validate_numeric_bounds() -> None:
    """minimum/maximum are inclusive, exclusiveMinimum/exclusiveMaximum strict."""
    schema = {"minimum": 1, "maximum": 3}
    assert validate(1, schema) == []
    assert validate(3, schema) == []
    assert validate(0, schema) == ["$: must be >= 1, got 0"]
    assert validate(4, schema) == ["$: must be <= 3, got 4"]
    strict = {"exclusiveMinimum": 1, "exclusiveMaximum": 3}
    assert validate(2, strict) == []
    assert validate(1, strict) == ["$: must be > 1, got 1"]
    assert validate(3, strict) == ["$: must be < 3, got 3"]
    assert validate("not a number", schema) == []


def test_validate_string_length_and_pattern() -> None:
    """minLength/maxLength count code points and pattern searches unanchored."""
    schema = {"minLength": 2, "maxLength": 3, "pattern": "b+"}
    assert validate("abb", schema) == []
    assert validate("é", {"maxLength": 1}) == []
    assert validate("b", schema) == ["$: must be at least 2 characters long"]
    assert validate("abbb", schema) == ["$: must be at most 3 characters long"]
    assert validate("aa", schema) == ["$: does not match pattern 'b+'"]


def test_validate_array_length() -> None:
    """minItems/maxItems bound array length."""
    schema = {"minItems": 1, "maxItems": 2}
    assert validate([1], schema) == []
    assert validate([], schema) == ["$: must have at least 1 items, got 0"]
    assert validate([1, 2, 3], schema) == ["$: must have at most 2 items, got 3"]


def test_validate_ref_to_defs_and_definitions() -> None:
    """$ref resolves #/$defs/... and #/definitions/... against the root schema."""
    schema = {
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/definitions/B"}},
        "$defs": {"A": {"type": "integer"}},
        "definitions": {"B": {"type": "string"}},
    }
    assert validate({"a": 1, "b": "x"}, schema) == []
    assert validate({"a": "x", "b": 1}, schema) == [
        "$.a: expected integer, got string",
        "$.b: expected string, got integer",
    ]


def test_validate_unresolvable_and_circular_refs_are_errors() -> None:
    """A $ref that points nowhere, or loops without progress, is an error, not a crash."""
    [unresolvable] = validate(1, {"$ref": "#/$defs/Nope"})
    assert unresolvable.startswith("the schema refers to what it does not hold: ")
    assert "/$defs/Nope" in unresolvable
    looping = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}
    assert validate(1, looping) == [
        "the value is nested too deeply for the schema, or the schema's $ref loops without "
        "reaching a value"
    ]


def test_validate_boolean_schemas() -> None:
    """true accepts everything; false accepts nothing."""
    assert validate({"x": 1}, {"properties": {"x": True}}) == []
    assert validate({"x": 1}, {"properties": {"x": False}}) == ["$.x: no value is allowed here"]


def test_validate_ignores_unknown_keywords() -> None:
    """Keywords the validator does not know are ignored."""
    assert validate("x", {"type": "string", "format": "email", "x-custom": 1}) == []


def test_validate_error_paths_quote_odd_keys() -> None:
    """Path segments that are not identifiers are quoted."""
    schema = {"additionalProperties": {"type": "integer"}}
    assert validate({"a b": "x"}, schema) == ['$["a b"]: expected integer, got string']


def test_validate_accepts_derived_input_schema() -> None:
    """A derived input schema validates well-formed arguments and reports bad ones."""

    def f(shape: Shape, n: int = 1) -> None: ...

    schema = sig_of(f).input_schema
    assert validate({"shape": {"name": "s", "points": []}}, schema) == []
    assert validate({"shape": {"name": "s", "points": [{}]}}, schema) == [
        "$.shape.points[0].x: required property is missing"
    ]


def test_validate_takes_tuples_and_mappings_as_the_wire_will_carry_them() -> None:
    """What the server writes itself is checked as JSON will show it: a tuple is an array,
    any Mapping an object (what a client sends is lists and dicts already)."""
    schema = {"type": "object", "properties": {"xy": {"type": "array", "prefixItems": [
        {"type": "integer"}, {"type": "integer"}]}}}
    assert validate(types.MappingProxyType({"xy": (1, 2)}), schema) == []
    assert validate(types.MappingProxyType({"xy": (1, "2")}), schema) == [
        "$.xy[1]: expected integer, got string"
    ]


def test_validate_shows_a_few_dozen_characters_of_a_long_value() -> None:
    """A message shows enough of a value to recognize it, never all of a long one."""
    [problem] = validate("x" * 100_000, {"enum": ["a", "b"]})
    assert problem.startswith('$: must be one of ["a", "b"], got "xxx')
    assert len(problem) < 120


def test_validate_words_what_it_does_not_know_with_the_librarys_text_cut_short() -> None:
    """A keyword not worded here keeps the library's message, cut short."""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b"]}}
    assert validate({"a": 1}, schema) == ["$: 'b' is a dependency of 'a'"]
    [long] = validate(["x" * 10_000, "x" * 10_000], {"uniqueItems": True})
    assert len(long) < 320


# ---------------------------------------------------------------------------
# dump_value
# ---------------------------------------------------------------------------


def test_dump_value_converts_attrs_recursively() -> None:
    """attrs instances become dicts all the way down, including inside lists."""
    shape = Shape(name="s", points=[Point(1, 2)], color=Color.GREEN)
    assert dump_value(shape) == {
        "name": "s",
        "points": [{"x": 1, "y": 2}],
        "color": "green",
        "tags": [],
    }


def test_dump_value_converts_tuples_enums_and_containers() -> None:
    """Tuples become lists, enums their values, and dicts/lists are walked."""
    value = {"t": (1, Level.LOW), "l": [Color.RED, (Point(0),)], Color.GREEN: None}
    assert dump_value(value) == {"t": [1, 1], "l": ["red", [{"x": 0, "y": 0}]], "green": None}


def test_dump_value_leaves_json_scalars_alone() -> None:
    """Strings, numbers, booleans and None are returned unchanged."""
    for scalar in ("s", 1, 1.5, True, None):
        assert dump_value(scalar) == scalar


def test_dump_value_output_validates_against_output_schema() -> None:
    """Dumping a returned attrs value produces data its derived output schema accepts."""

    def f() -> Shape:
        raise NotImplementedError

    schema = sig_of(f).output_schema
    assert schema is not None
    assert validate(dump_value(Shape(name="s", points=[Point(1)])), schema) == []


# ---------------------------------------------------------------------------
# Property-based checks
# ---------------------------------------------------------------------------

_SCALAR_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "integer": st.integers(),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "string": st.text(),
}
_JSON = st.recursive(
    st.one_of(*_SCALAR_STRATEGIES.values()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
_ALL_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    **_SCALAR_STRATEGIES,
    "array": st.lists(_JSON, max_size=3),
    "object": st.dictionaries(st.text(), _JSON, max_size=3),
}
_TYPES = sorted(_ALL_STRATEGIES)


def _expected_match(value: Any, value_kind: str, schema_kind: str) -> bool:
    if value_kind == schema_kind:
        return True
    if value_kind == "integer" and schema_kind == "number":
        return True
    # A float with no fractional part is an integer in JSON Schema.
    return value_kind == "number" and schema_kind == "integer" and float(value).is_integer()


@given(data=st.data(), value_kind=st.sampled_from(_TYPES), schema_kind=st.sampled_from(_TYPES))
def test_validate_type_agrees_with_generated_values(
    data: st.DataObject, value_kind: str, schema_kind: str
) -> None:
    """A value drawn for one JSON type validates against a type schema iff the types agree."""
    value = data.draw(_ALL_STRATEGIES[value_kind])
    errors = validate(value, {"type": schema_kind})
    assert (errors == []) == _expected_match(value, value_kind, schema_kind)


@given(data=st.data(), item_kind=st.sampled_from(_TYPES), schema_kind=st.sampled_from(_TYPES))
def test_validate_array_items_agree_with_generated_values(
    data: st.DataObject, item_kind: str, schema_kind: str
) -> None:
    """An array is valid against items iff every element agrees with the item type."""
    values = data.draw(st.lists(_ALL_STRATEGIES[item_kind], max_size=4))
    errors = validate(values, {"type": "array", "items": {"type": schema_kind}})
    expected = all(_expected_match(v, item_kind, schema_kind) for v in values)
    assert (errors == []) == expected


@given(
    value=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers() | st.text(), max_size=3),
    required=st.lists(st.sampled_from(["a", "b", "c"]), unique=True),
)
def test_validate_required_and_closed_objects_agree(
    value: dict[str, Any], required: list[str]
) -> None:
    """An object with integer properties a, b is valid iff required keys exist and types fit."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": required,
        "additionalProperties": False,
    }
    expected = (
        all(k in value for k in required)
        and "c" not in value
        and all(isinstance(v, int) for v in value.values())
    )
    assert (validate(value, schema) == []) == expected


@given(text=st.text(max_size=8), low=st.integers(0, 5), high=st.integers(0, 5))
def test_validate_string_length_agrees_with_len(text: str, low: int, high: int) -> None:
    """minLength/maxLength agree with len() on arbitrary text."""
    ok = validate(text, {"type": "string", "minLength": low, "maxLength": high}) == []
    assert ok == (low <= len(text) <= high)


_POINTS = st.builds(Point, x=st.integers(), y=st.integers())
_SHAPES = st.builds(
    Shape,
    name=st.text(),
    points=st.lists(_POINTS, max_size=3),
    color=st.sampled_from(Color),
    tags=st.lists(st.text(), max_size=2),
)


@given(shape=_SHAPES, count=st.integers() | st.none())
def test_dumped_arguments_round_trip_through_convert(shape: Shape, count: int | None) -> None:
    """Dumping Python arguments to JSON and converting them back gives the same values."""

    def f(shape: Shape, count: int | None = None) -> None: ...

    sig = sig_of(f)
    arguments = {"shape": dump_value(shape), "count": count}
    assert validate(arguments, sig.input_schema) == []
    assert convert_arguments(sig, arguments) == {"shape": shape, "count": count}
