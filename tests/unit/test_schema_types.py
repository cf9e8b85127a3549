# What the schema derivation refuses, and says, for the types a FastMCP user reaches for first
# (issue 37): dataclasses and pydantic models are refused naming what is supported, and
# Annotated metadata is used or refused, never dropped (TM-TOOL-TYPES).

import dataclasses
from typing import Annotated

import pydantic
import pytest
from typing_extensions import Doc

from trio_mcp import Server
from trio_mcp.app._schema import SUPPORTED_TYPES, derive_signature


@dataclasses.dataclass
class Spot:
    x: int


class Model(pydantic.BaseModel):
    y: int


pytestmark = pytest.mark.spec("TM-TOOL-TYPES")


@pytest.mark.parametrize(
    ("annotation", "advice"),
    [
        (Spot, "dataclasses are not supported (yet): make Spot an attrs class"),
        (Model, "pydantic models are not supported (yet): describe Model as a TypedDict"),
        (list[Spot], "dataclasses are not supported"),
        (Spot | None, "dataclasses are not supported"),
        (bytes, ""),
    ],
)
def test_an_unsupported_parameter_type_is_refused_saying_what_is_supported(
    annotation: object, advice: str
) -> None:
    """A parameter typed with a dataclass, a pydantic model (alone or inside a container),
    or any other class without a JSON mapping is refused when the tool is registered, with
    what to write instead and the list of supported types."""
    server = Server("types")

    async def tool(arg: int) -> str:
        return ""

    tool.__annotations__["arg"] = annotation
    with pytest.raises(TypeError) as caught:
        server.add_tool(tool)

    message = str(caught.value)
    assert "for parameter 'arg' of tool" in message
    assert advice in message
    assert message.endswith(f"supported are {SUPPORTED_TYPES}")
    assert {} == server.tools


@pytest.mark.parametrize("annotation", [Spot, list[Model], Model | None])
def test_a_model_return_type_is_refused_rather_than_failing_at_every_call(
    annotation: object,
) -> None:
    """A return type that is or holds a dataclass or a pydantic model is refused at
    registration (its values are no JSON here, so every call would fail), though another
    unknown return type only means no structured output."""

    async def tool() -> int:
        return 0

    tool.__annotations__["return"] = annotation
    with pytest.raises(TypeError, match=r"for return annotation: .*not supported"):
        Server("returns").add_tool(tool)


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
        (pydantic.Field(ge=0), "Field(ge=0)"),
        (pydantic.Field(description="d", max_length=3), "Field(max_length=3)"),
        (pydantic.Field(default=3), "Field(default)"),
        (pydantic.Field(alias="n"), "Field(alias"),
    ],
)
def test_field_settings_the_schema_would_not_enforce_are_refused(
    field: object, named: str
) -> None:
    """A `Field` that asks for more than a description or a title (a bound, a length, a
    default, an alias) is refused naming it, rather than dropped or advertised unchecked."""

    def f(n: int) -> None: ...

    f.__annotations__["n"] = Annotated[int, field]
    with pytest.raises(TypeError) as caught:
        derive_signature(f)

    assert str(caught.value).startswith(named)
    assert "parameter 'n' of f" in str(caught.value)


def test_annotated_types_constraints_are_refused() -> None:
    """An `annotated_types` constraint straight in `Annotated` is refused too."""
    import annotated_types

    def f(n: Annotated[int, annotated_types.Gt(0)]) -> None: ...

    with pytest.raises(TypeError, match="not enforced by trio-mcp"):
        derive_signature(f)
