# What the schema derivation refuses, and says (TM-TOOL-TYPES): a type without a JSON mapping
# is refused naming what is supported, and Annotated metadata is used or refused, never
# dropped. What it takes since issue 40 (models, scalars, constraints) is in
# test_schema_models.py.

from typing import Annotated

import pydantic
import pytest
from typing_extensions import Doc

from trio_mcp import Server
from trio_mcp.app._schema import SUPPORTED_TYPES, derive_signature

pytestmark = pytest.mark.spec("TM-TOOL-TYPES")


class Opaque:
    """A class with no JSON mapping: no fields trio-mcp knows how to read."""


@pytest.mark.parametrize("annotation", [Opaque, list[Opaque], Opaque | None, complex])
def test_an_unsupported_parameter_type_is_refused_saying_what_is_supported(
    annotation: object,
) -> None:
    """A parameter typed with a class without a JSON mapping (alone or inside a container)
    is refused when the tool is registered, with the list of supported types."""
    server = Server("types")

    async def tool(arg: int) -> str:
        return ""

    tool.__annotations__["arg"] = annotation
    with pytest.raises(TypeError) as caught:
        server.add_tool(tool)

    message = str(caught.value)
    assert "for parameter 'arg' of tool" in message
    assert message.endswith(f"supported are {SUPPORTED_TYPES}")
    assert {} == server.tools


def test_an_unknown_return_type_means_no_structured_output() -> None:
    """A return type without a JSON mapping only means no structured output (unless it was
    asked for)."""

    async def tool() -> Opaque:
        return Opaque()

    Server("returns").add_tool(tool)
    with pytest.raises(TypeError, match="return annotation"):
        Server("returns").add_tool(tool, structured_output=True)


def test_annotated_descriptions_reach_the_schema_in_every_form() -> None:
    """`Annotated[T, "text"]`, `Annotated[T, Field(description=..., title=...)]` and
    `Annotated[T, Doc("text")]` all describe the parameter in the inputSchema, nested ones
    too."""

    def f(
        a: Annotated[int, "how many"],
        b: Annotated[str, pydantic.Field(description="the name", title="Name")],
        c: Annotated[bool, Doc("whether to shout")],
        d: list[Annotated[str, pydantic.Field(description="one tag")]],
    ) -> None: ...

    props = derive_signature(f).input_schema["properties"]

    assert {"type": "integer", "description": "how many"} == props["a"]
    assert {"type": "string", "description": "the name", "title": "Name"} == props["b"]
    assert {"type": "boolean", "description": "whether to shout"} == props["c"]
    assert {"type": "string", "description": "one tag"} == props["d"]["items"]


@pytest.mark.parametrize(
    ("field", "named"),
    [
        (pydantic.Field(default=3), "Field(default)"),
        (pydantic.Field(alias="n"), "Field(alias"),
        (pydantic.Field(strict=True), "Strict(strict=True)"),
    ],
)
def test_field_settings_the_schema_would_not_enforce_are_refused(
    field: object, named: str
) -> None:
    """A `Field` inside `Annotated` that asks for what a schema cannot say (a default
    there, an alias, strictness) is refused naming it, rather than dropped."""

    def f(n: int) -> None: ...

    f.__annotations__["n"] = Annotated[int, field]
    with pytest.raises(TypeError) as caught:
        derive_signature(f)

    assert str(caught.value).startswith(named)
    assert "parameter 'n' of f" in str(caught.value)


def test_constraints_json_schema_cannot_say_are_refused() -> None:
    """An annotated-types constraint JSON Schema cannot state (a predicate, a length on an
    integer) is refused naming it."""
    import annotated_types

    def f(n: Annotated[int, annotated_types.Predicate(lambda n: n > 0)]) -> None: ...

    def g(n: Annotated[int, annotated_types.MaxLen(3)]) -> None: ...

    with pytest.raises(TypeError, match=r"Predicate.*cannot be said in JSON Schema"):
        derive_signature(f)
    with pytest.raises(TypeError, match=r"MaxLen.*not to this type"):
        derive_signature(g)
