# Tool and prompt metadata from plain Python functions.
#
# This module turns a function's signature, type hints and Google-style docstring into the
# JSON Schema (2020-12 dialect) that MCP advertises in tools/list and prompts/list, converts
# incoming JSON arguments back into Python values for the call (validated against those
# schemas by protocol/_jsonschema.py, the jsonschema library's), and turns Python return
# values into JSON-able data for structuredContent.
# It is pure computation: no I/O, and no dependency on trio, hypercorn or h11.

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ..protocol._jsonschema import ProblemKind, Schema, json_type
from . import _models
from ._depends import Injection, find_depends, plan_dependency
from ._models import ConversionError, UnknownConstraint

__all__ = [
    "SUPPORTED_TYPES",
    "ArgumentError",
    "Param",
    "Signature",
    "UnsupportedType",
    "already_registered",
    "convert_arguments",
    "defined_at",
    "derive_signature",
    "dump_value",
]


class ArgumentError(ValueError):
    """Tool or prompt arguments do not match the derived input schema."""


@attrs.frozen(kw_only=True)
class Param:
    """One schema-visible parameter of a tool or prompt function."""

    name: str
    description: str
    required: bool
    # The Python default; only meaningful when ``required`` is False.
    default: Any
    # The resolved type hint (``typing.Any`` when the parameter has none).
    annotation: Any
    # Makes the default of each call (a pydantic ``Field(default_factory=...)``), or None.
    factory: Callable[[], Any] | None = None


@attrs.frozen(kw_only=True)
class Signature:
    """Everything MCP needs to advertise and call a function."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    context_param: str | None
    params: tuple[Param, ...]
    wrap_output: bool
    injections: tuple[Injection, ...] = ()
    """Parameters a ``Depends`` fills (TM-HAND-DEPENDS): not in the schema."""
    input_check: Schema = attrs.field(
        default=attrs.Factory(lambda self: Schema(self.input_schema), takes_self=True),
        init=False, eq=False, repr=False,
    )
    """``input_schema``, compiled once for the arguments of every call."""
    output_check: Schema | None = attrs.field(
        default=attrs.Factory(
            lambda self: None if self.output_schema is None else Schema(self.output_schema),
            takes_self=True,
        ),
        init=False, eq=False, repr=False,
    )
    """``output_schema``, compiled once for the result of every call."""


# ---------------------------------------------------------------------------
# Type annotation -> JSON Schema
# ---------------------------------------------------------------------------

_NONE_TYPE = type(None)
_SEQUENCE_ORIGINS: frozenset[Any] = frozenset(
    {list, collections.abc.Sequence, collections.abc.MutableSequence}
)
_MAPPING_ORIGINS: frozenset[Any] = frozenset(
    {dict, collections.abc.Mapping, collections.abc.MutableMapping}
)
# attrs.Factory is typed as returning the produced value, so take the class from an instance.
_FACTORY_TYPE: type[Any] = type(attrs.Factory(list))
_JSON_SCALARS = (str, int, float, bool, _NONE_TYPE)


def _strip(tp: Any) -> Any:
    """Remove wrappers that do not change the JSON shape: Annotated, NewType, (Not)Required."""
    while True:
        origin = typing.get_origin(tp)
        if origin in (typing.Annotated, typing.Required, typing.NotRequired):
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        else:
            return tp


#: What a parameter may be annotated with, for the messages that refuse the rest.
SUPPORTED_TYPES = (
    "str, int, float, bool, None, Literal[...], Enum, list[T], tuple[...], dict[str, T], "
    "unions (X | Y, Optional[X]), TypedDict, attrs classes, dataclasses, pydantic models, "
    "datetime, date, time, UUID, Path, Decimal and bytes (base64); Annotated[T, ...] with a "
    "description string, pydantic's Field or annotated-types' constraints describes one"
)


class UnsupportedType(TypeError):
    """An annotation trio-mcp cannot turn into a JSON Schema it enforces."""


_is_dataclass_type = _models.is_dataclass_type
_is_pydantic_model = _models.is_pydantic_model


def _unsupported(tp: Any, where: str, why: str = "") -> UnsupportedType:
    name = _type_repr(tp)
    return UnsupportedType(
        f"unsupported annotation {name} for {where}: {why + '; ' if why else ''}"
        f"supported are {SUPPORTED_TYPES}"
    )


#: The pydantic ``Field`` arguments the schema carries besides constraints (which
#: ``FieldInfo.metadata`` holds); any other (an alias, strict, a default inside Annotated)
#: would be silently dropped, so it is refused.
_FIELD_KEYWORDS = frozenset({"description", "title", "examples", "deprecated"})


def _annotated_keywords(
    tp: Any, where: str, inner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The schema keywords an ``Annotated`` type's metadata gives (TM-HAND-CONSTRAINTS): a
    string is the description, and so is a pydantic ``Field(description=...)`` or a
    ``Doc(...)`` (PEP 727); ``Field`` may give a title and examples too. Constraints of
    annotated-types and of ``Field`` (``ge``, ``max_length``, ``pattern``...) become the
    JSON Schema keywords that say them, for a value of schema ``inner``. Metadata that asks
    for more than a schema can say (a predicate, aliases, a default inside Annotated) is
    refused rather than dropped: the schema would promise what no one checks."""
    if typing.get_origin(tp) is not typing.Annotated:
        return {}
    found: dict[str, Any] = {}
    inner = inner if inner is not None else {}
    constraints: list[Any] = []
    for meta in tp.__metadata__:
        if isinstance(meta, str):
            found.setdefault("description", meta)
            continue
        kind = type(meta)
        module = kind.__module__ or ""
        if kind.__name__ == "Doc" and isinstance(getattr(meta, "documentation", None), str):
            found.setdefault("description", meta.documentation)
        elif _models.is_field_info(meta):
            for key, value in _field_keywords(meta, where, _FIELD_KEYWORDS).items():
                found.setdefault(key, value)
            constraints.extend(meta.metadata)
        elif module.startswith(("pydantic", "annotated_types")):
            constraints.append(meta)
    if constraints:
        try:
            found.update(_models.constraint_keywords(constraints, inner))
        except UnknownConstraint as exc:
            raise UnsupportedType(
                f"{exc} (on {where}): check the value in the handler (raise ToolError)"
            ) from None
    return found


def _field_keywords(field: Any, where: str, allowed: frozenset[str]) -> dict[str, Any]:
    """The description, title, examples and deprecation a pydantic ``Field`` gives."""
    given = getattr(field, "_attributes_set", None)
    keys = set(given) if isinstance(given, dict) else set()
    extra = sorted(keys - allowed)
    if extra:
        raise UnsupportedType(
            f"Field({', '.join(extra)}) on {where}: trio-mcp takes description=, title=, "
            "examples=, deprecated= and constraints from Field; give a default in the "
            "signature (or as the parameter's default: x: int = Field(3, ge=0))"
        )
    found: dict[str, Any] = {}
    for key in ("description", "title"):
        value = getattr(field, key, None)
        if isinstance(value, str):
            found[key] = value
    if getattr(field, "examples", None) is not None:
        found["examples"] = _json_examples(field.examples, where)
    if getattr(field, "deprecated", None):
        found["deprecated"] = True
    return found


def _json_examples(examples: Any, where: str) -> list[Any]:
    dumped = dump_value(list(examples))
    if not _is_jsonable(dumped):
        raise UnsupportedType(f"Field(examples=...) on {where}: examples must be JSON values")
    return typing.cast(list[Any], dumped)


def _annotated_description(tp: Any, where: str = "a parameter") -> str | None:
    if typing.get_origin(tp) is not typing.Annotated:
        return None
    description = _annotated_keywords(tp, where, _annotated_inner(tp)).get("description")
    return description if isinstance(description, str) else None


def _annotated_inner(tp: Any) -> dict[str, Any]:
    """The schema of an Annotated type's own type, for the kind of value its constraints
    apply to (no definitions: only its ``type`` is read)."""
    try:
        return _SchemaBuilder().schema(typing.get_args(tp)[0], "an annotated type")
    except TypeError:
        return {}


def _is_union(origin: Any) -> bool:
    return origin is typing.Union or origin is types.UnionType


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _is_named_object(tp: Any) -> bool:
    """attrs classes, dataclasses, pydantic models and TypedDicts get their own entry in
    ``$defs``."""
    return isinstance(tp, type) and (
        attrs.has(tp) or _is_typeddict(tp) or _is_dataclass_type(tp) or _is_pydantic_model(tp)
    )


def _class_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve type hints of {cls.__qualname__}: {exc}") from exc


def _is_jsonable(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_jsonable(v) for k, v in value.items())
    return False


def _json_default(value: Any) -> tuple[bool, Any]:
    """Return (ok, dumped) for a Python default that may be advertised in the schema."""
    try:
        dumped = dump_value(value)
    except Exception:
        return False, None
    return _is_jsonable(dumped), dumped


def _homogeneous_type(values: Sequence[Any]) -> str | None:
    """The JSON type shared by all enum values, if there is exactly one."""
    kinds = {json_type(v) for v in values}
    if len(kinds) == 1:
        (kind,) = kinds
        if kind in ("string", "integer", "boolean", "number", "null"):
            return kind
    return None


class _SchemaBuilder:
    """Builds schemas for one document, collecting attrs/TypedDict classes into ``$defs``."""

    def __init__(
        self, mode: typing.Literal["validation", "serialization"] = "validation"
    ) -> None:
        self.defs: dict[str, dict[str, Any]] = {}
        self._names: dict[type, str] = {}
        #: pydantic's two schemas of a model: what it accepts, or what it dumps.
        self._mode = mode

    def schema(self, tp: Any, where: str) -> dict[str, Any]:
        if tp is Any or tp is object or tp is inspect.Parameter.empty:
            return {}
        if tp is None or tp is _NONE_TYPE:
            return {"type": "null"}
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            inner = self.schema(args[0], where)
            keywords = _annotated_keywords(tp, where, inner)
            if "$ref" in inner and set(keywords) - {"description", "title", "examples"}:
                raise UnsupportedType(f"constraints on {where} apply to no object")
            return {**inner, **keywords}
        if origin in (typing.Required, typing.NotRequired):
            return self.schema(args[0], where)
        if isinstance(tp, typing.NewType):
            return self.schema(tp.__supertype__, where)
        # bool before int: bool is a subclass of int but a distinct JSON type.
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        if tp is str:
            return {"type": "string"}
        scalar = _models.scalar_for(tp)
        if scalar is not None:
            return dict(scalar.schema)
        if origin is typing.Literal:
            return self._literal(args, tp, where)
        if _is_union(origin):
            return {"anyOf": [self.schema(arg, where) for arg in args]}
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self._enum(tp, where)
        if _is_named_object(tp):
            return {"$ref": f"#/$defs/{self._define(tp)}"}
        if tp in _SEQUENCE_ORIGINS or origin in _SEQUENCE_ORIGINS:
            if not args:
                return {"type": "array"}
            return {"type": "array", "items": self.schema(args[0], where)}
        if tp is tuple:
            return {"type": "array"}
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.schema(args[0], where)}
            # tuple[()] has no args on 3.11+: a fixed tuple of length zero.
            return {
                "type": "array",
                "prefixItems": [self.schema(arg, where) for arg in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        if tp in _MAPPING_ORIGINS or origin in _MAPPING_ORIGINS:
            if not args:
                return {"type": "object"}
            if _strip(args[0]) is not str:
                raise _unsupported(
                    tp, where, "JSON object keys are strings, so mapping keys must be str"
                )
            return {"type": "object", "additionalProperties": self.schema(args[1], where)}
        raise _unsupported(tp, where)

    def _literal(self, values: tuple[Any, ...], tp: Any, where: str) -> dict[str, Any]:
        for value in values:
            if not isinstance(value, _JSON_SCALARS) or isinstance(value, enum.Enum):
                raise TypeError(
                    f"unsupported annotation {_type_repr(tp)} for {where}: "
                    f"Literal value {value!r} is not a JSON scalar"
                )
        unique = list(dict.fromkeys(values))
        kind = _homogeneous_type(unique)
        return {"type": kind, "enum": unique} if kind is not None else {"enum": unique}

    def _enum(self, cls: type[enum.Enum], where: str) -> dict[str, Any]:
        values = [member.value for member in cls]
        for value in values:
            if not isinstance(value, _JSON_SCALARS):
                raise TypeError(
                    f"unsupported annotation {cls.__qualname__} for {where}: "
                    f"enum value {value!r} is not a JSON scalar"
                )
        kind = _homogeneous_type(values)
        return {"type": kind, "enum": values} if kind is not None else {"enum": values}

    def _define(self, cls: type) -> str:
        known = self._names.get(cls)
        if known is not None:
            return known
        name = cls.__name__
        suffix = 2
        while name in self.defs:
            name = f"{cls.__name__}{suffix}"
            suffix += 1
        self._names[cls] = name
        # Reserve the slot before descending so self-referencing classes terminate.
        self.defs[name] = {}
        if attrs.has(cls):
            self.defs[name] = self._attrs_object(cls)
        elif _is_dataclass_type(cls):
            self.defs[name] = self._dataclass_object(cls)
        elif _is_pydantic_model(cls):
            self.defs[name] = self._pydantic_object(cls, name)
        else:
            self.defs[name] = self._typeddict_object(cls)
        return name

    def _pydantic_object(self, cls: type, name: str) -> dict[str, Any]:
        # TM-HAND-PYDANTIC: the model's own schema, as its users know it; the models it
        # holds join this document's definitions, under pydantic's names.
        schema = _models.pydantic_schema(cls, self._mode)
        for key, definition in schema.pop("$defs", {}).items():
            if key == name and definition == schema:
                continue
            known = self.defs.get(key)
            if known is not None and known != definition:
                raise UnsupportedType(
                    f"two different models are both named {key!r} in one schema; rename one"
                )
            self.defs[key] = definition
        return schema

    def _dataclass_object(self, cls: type) -> dict[str, Any]:
        hints = _class_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        metadata = {f.name: f.metadata for f in dataclasses.fields(cls)}
        for field in _models.dataclass_fields(cls):
            where = f"field {cls.__qualname__}.{field.name}"
            prop = self.schema(hints.get(field.name, Any), where)
            meta_desc = metadata[field.name].get("description")
            if isinstance(meta_desc, str) and "description" not in prop:
                prop = {**prop, "description": meta_desc}
            if field.required:
                required.append(field.name)
            elif field.default is not dataclasses.MISSING:
                ok, dumped = _json_default(field.default)
                if ok:
                    prop = {**prop, "default": dumped}
            properties[field.name] = prop
        return self._object(cls, properties, required)

    def _attrs_object(self, cls: type) -> dict[str, Any]:
        hints = _class_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            ftype = hints.get(field.name, field.type if field.type is not None else Any)
            where = f"field {cls.__qualname__}.{field.name}"
            prop = self.schema(ftype, where)
            meta_desc = field.metadata.get("description")
            if isinstance(meta_desc, str) and "description" not in prop:
                prop = {**prop, "description": meta_desc}
            if field.default is attrs.NOTHING:
                required.append(field.name)
            elif not isinstance(field.default, _FACTORY_TYPE):
                ok, dumped = _json_default(field.default)
                if ok:
                    prop = {**prop, "default": dumped}
            properties[field.name] = prop
        return self._object(cls, properties, required)

    def _typeddict_object(self, cls: type) -> dict[str, Any]:
        hints = _class_hints(cls)
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        properties: dict[str, Any] = {}
        required: list[str] = []
        for key, hint in hints.items():
            properties[key] = self.schema(hint, f"key {cls.__qualname__}[{key!r}]")
            # Check the wrapper too: __required_keys__ misses string-form NotRequired on 3.11.
            origin = typing.get_origin(hint)
            if origin is typing.Required or (
                origin is not typing.NotRequired and key in required_keys
            ):
                required.append(key)
        return self._object(cls, properties, required)

    @staticmethod
    def _object(cls: type, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        # Only a docstring written on the class itself, not one inherited or generated.
        doc = cls.__dict__.get("__doc__")
        if _is_dataclass_type(cls) and isinstance(doc, str) and doc.startswith(f"{cls.__name__}("):
            # The docstring @dataclass generates is the signature, not a description.
            doc = None
        if isinstance(doc, str) and doc.strip():
            schema["description"] = inspect.cleandoc(doc)
        return schema


def _type_repr(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return repr(tp)


@functools.lru_cache(maxsize=512)
def _standalone_schema(tp: Any) -> dict[str, Any]:
    """A self-contained schema (own ``$defs``) for one annotation, used to pick union branches."""
    builder = _SchemaBuilder()
    schema = builder.schema(tp, "union member")
    if builder.defs:
        schema = {**schema, "$defs": builder.defs}
    return schema


# ---------------------------------------------------------------------------
# Docstrings
# ---------------------------------------------------------------------------

_ARGS_HEADER = re.compile(
    r"^(?P<indent>\s*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)\s*:\s*$"
)
_ARG_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description without Args sections, arg texts)."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    kept: list[str] = []
    params: dict[str, list[str]] = {}
    i = 0
    while i < len(lines):
        header = _ARGS_HEADER.match(lines[i])
        if header is None:
            kept.append(lines[i])
            i += 1
            continue
        header_indent = len(header.group("indent"))
        entry_indent: int | None = None
        current: list[str] | None = None
        i += 1
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            indent = _indent(line)
            if indent <= header_indent:
                break
            if entry_indent is None:
                entry_indent = indent
            entry = _ARG_ENTRY.match(line.strip()) if indent <= entry_indent else None
            if entry is not None:
                current = params.setdefault(entry.group("name"), [])
                if entry.group("text").strip():
                    current.append(entry.group("text").strip())
            elif current is not None:
                current.append(line.strip())
            i += 1
    description = "\n".join(kept)
    # Removing a section can leave a run of blank lines behind; keep paragraphs single-spaced.
    description = re.sub(r"\n{3,}", "\n\n", description).strip()
    return description, {name: " ".join(text) for name, text in params.items()}


# ---------------------------------------------------------------------------
# derive_signature
# ---------------------------------------------------------------------------


def _function_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target: Any = fn
    if isinstance(fn, functools.partial):
        target = fn.func
    elif not (inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isclass(fn)):
        # A callable instance: its annotations live on __call__.
        target = type(fn).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve type hints of {_callable_name(fn)}: {exc}") from exc


def _callable_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    if isinstance(fn, functools.partial):
        return _callable_name(fn.func)
    return type(fn).__name__


def defined_at(fn: Callable[..., Any]) -> str:
    """Where ``fn`` was written, for messages: ``module.qualname`` (file:line when known)."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
    code = getattr(target, "__code__", None)
    if code is not None:
        return f"{name} at {code.co_filename}:{code.co_firstlineno}"
    return name


def already_registered(kind: str, key: str, fn: Callable[..., Any]) -> ValueError:
    """The error for a second registration under ``key`` without ``replace=True``."""
    return ValueError(
        f"{kind} {key!r} is already registered (by {defined_at(fn)}); give this one "
        f"another name, or pass replace=True to replace it"
    )


def _is_context(tp: Any, context_type: type) -> bool:
    tp = _strip(tp)
    origin = typing.get_origin(tp)
    if _is_union(origin):
        members = [arg for arg in typing.get_args(tp) if arg is not _NONE_TYPE]
        return bool(members) and all(_is_context(arg, context_type) for arg in members)
    candidate = origin if origin is not None else tp
    return isinstance(candidate, type) and issubclass(candidate, context_type)


def _is_object_annotation(tp: Any) -> bool:
    tp = _strip(tp)
    origin = typing.get_origin(tp)
    return _is_named_object(tp) or tp in _MAPPING_ORIGINS or origin in _MAPPING_ORIGINS


def _is_text_annotation(tp: Any) -> bool:
    """str or Optional[str]: results that auto mode leaves as plain text content."""
    tp = _strip(tp)
    if tp is str:
        return True
    if _is_union(typing.get_origin(tp)):
        members = [_strip(arg) for arg in typing.get_args(tp)]
        return str in members and all(m is str or m is _NONE_TYPE for m in members)
    return False


def _output_schema(
    annotation: Any, structured_output: bool | None
) -> tuple[dict[str, Any] | None, bool]:
    if structured_output is False:
        return None, False
    bare = _strip(annotation)
    if bare is inspect.Signature.empty or bare is Any or bare is None or bare is _NONE_TYPE:
        return None, False
    if structured_output is None and _is_text_annotation(annotation):
        return None, False
    builder = _SchemaBuilder("serialization")
    try:
        top = builder.schema(annotation, "return annotation")
    except TypeError:
        # In auto mode an unmappable return type (e.g. a content block) just means
        # "no structured output"; only an explicit request makes it an error. A dataclass
        # or a pydantic model would fail at every call instead (its values are no JSON
        # here), so it is refused now.
        if structured_output is None and not _names_a_model(annotation):
            return None, False
        raise
    defs = builder.defs
    if _is_object_annotation(annotation) and _describes_object(top, defs):
        ref = top.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            extras = {k: v for k, v in top.items() if k != "$ref"}
            schema = {**defs[name], **extras}
            others = {k: v for k, v in defs.items() if k != name}
            # A recursive class still refers to itself, so its definition must stay.
            if json.dumps(ref) in json.dumps([schema, others]):
                others = defs
            defs = others
        else:
            schema = dict(top)
        if defs:
            schema["$defs"] = defs
        return schema, False
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": top},
        "required": ["result"],
    }
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


def _describes_object(top: Mapping[str, Any], defs: Mapping[str, Any]) -> bool:
    """Whether a schema is an object's (a pydantic RootModel of a list is not)."""
    ref = top.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return bool(defs.get(ref.removeprefix("#/$defs/"), {}).get("type") == "object")
    return True


def _names_a_model(tp: Any) -> bool:
    """Whether ``tp`` is, or holds, a dataclass or a pydantic model."""
    stack = [tp]
    while stack:
        t = _strip(stack.pop())
        if _is_dataclass_type(t) or _is_pydantic_model(t):
            return True
        stack.extend(a for a in typing.get_args(t) if a is not Ellipsis)
    return False


def derive_signature(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    context_type: type | None = None,
    structured_output: bool | None = None,
) -> Signature:
    """Derive MCP metadata (name, description, input/output schema) from ``fn``."""
    fn_name = name if name is not None else _callable_name(fn)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot inspect the signature of {fn_name}: {exc}") from exc
    hints = _function_hints(fn)
    doc_description, doc_params = _parse_docstring(inspect.getdoc(fn))

    builder = _SchemaBuilder()
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[Param] = []
    context_param: str | None = None
    injections: list[Injection] = []
    for param in sig.parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"{fn_name}: *{param.name} is not supported; use named parameters")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(f"{fn_name}: **{param.name} is not supported; use named parameters")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{fn_name}: positional-only parameter {param.name!r} is not supported; "
                "arguments are passed by name"
            )
        annotation = hints.get(param.name, Any)
        marker = find_depends(annotation, param.default)
        if marker is not None:
            def is_context(tp: Any) -> bool:
                return context_type is not None and _is_context(tp, context_type)

            injections.append(Injection(
                name=param.name, dependency=plan_dependency(marker, is_context)
            ))
            continue
        if context_type is not None and _is_context(annotation, context_type):
            if context_param is not None:
                raise TypeError(
                    f"{fn_name}: more than one context parameter "
                    f"({context_param!r} and {param.name!r})"
                )
            context_param = param.name
            continue
        where = f"parameter {param.name!r} of {fn_name}"
        prop = builder.schema(annotation, where)
        param_desc = _annotated_description(annotation, where)
        default = param.default
        factory: Callable[[], Any] | None = None
        if _models.is_field_info(default):
            # x: int = Field(3, ge=0, description=...), as FastMCP and pydantic users write.
            field = default
            prop = {
                **prop,
                **_field_keywords(
                    field, where, _FIELD_KEYWORDS | {"default", "default_factory"}
                ),
            }
            try:
                prop.update(_models.constraint_keywords(field.metadata, prop))
            except UnknownConstraint as exc:
                raise UnsupportedType(f"{exc} (on {where})") from None
            if param_desc is None and isinstance(field.description, str):
                param_desc = field.description
            factory = field.default_factory
            default = field.default if factory is None else None
            if factory is None and type(default).__name__ == "PydanticUndefinedType":
                default = inspect.Parameter.empty
        if param_desc is None:
            param_desc = doc_params.get(param.name, "")
        if param_desc:
            prop = {**prop, "description": param_desc}
        has_default = default is not inspect.Parameter.empty or factory is not None
        if has_default and factory is None:
            ok, dumped = _json_default(default)
            if ok:
                prop = {**prop, "default": dumped}
        elif not has_default:
            required.append(param.name)
        properties[param.name] = prop
        params.append(
            Param(
                name=param.name,
                description=param_desc,
                required=not has_default,
                default=default if has_default else None,
                annotation=annotation,
                factory=factory,
            )
        )

    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if builder.defs:
        input_schema["$defs"] = builder.defs

    output_schema, wrap_output = _output_schema(
        hints.get("return", sig.return_annotation), structured_output
    )
    return Signature(
        name=fn_name,
        description=description if description is not None else doc_description,
        input_schema=input_schema,
        output_schema=output_schema,
        context_param=context_param,
        params=tuple(params),
        wrap_output=wrap_output,
        injections=tuple(injections),
    )


# ---------------------------------------------------------------------------
# convert_arguments: JSON arguments -> Python call arguments
# ---------------------------------------------------------------------------


def _dotted(path: Sequence[str | int]) -> str:
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        else:
            out += f".{seg}" if out else seg
    return out


def convert_arguments(sig: Signature, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate JSON ``arguments`` against ``sig`` and convert them to keyword arguments."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ArgumentError(f"arguments must be a JSON object, got {json_type(arguments)}")
    problems = sig.input_check.problems(arguments)
    if problems:
        messages = []
        for problem in problems:
            where = _dotted(problem.path)
            if problem.kind is ProblemKind.MISSING:
                messages.append(f"missing required argument {where!r}")
            elif problem.kind is ProblemKind.UNEXPECTED:
                messages.append(f"unexpected argument {where!r}")
            elif where:
                messages.append(f"invalid argument {where!r}: {problem.message}")
            else:
                messages.append(f"invalid arguments: {problem.message}")
        raise ArgumentError("; ".join(messages))
    result: dict[str, Any] = {}
    for param in sig.params:
        if param.name in arguments:
            result[param.name] = _convert(arguments[param.name], param.annotation, [param.name])
        elif not param.required:
            result[param.name] = param.factory() if param.factory else param.default
    return result


@functools.lru_cache(maxsize=512)
def _member_schema(tp: Any) -> Schema:
    """The compiled schema of one union member, to pick the branch a value belongs to."""
    return Schema(_standalone_schema(tp))


def _conforms(value: Any, tp: Any) -> bool:
    try:
        schema = _member_schema(tp)
    except TypeError:
        # Unhashable Annotated metadata defeats the cache; build uncached.
        builder = _SchemaBuilder()
        built = builder.schema(tp, "union member")
        schema = Schema({**built, "$defs": builder.defs} if builder.defs else built)
    return not schema.problems(value, limit=1)


def _convert(value: Any, tp: Any, path: list[str | int]) -> Any:
    """Convert an already-validated JSON value to the Python type ``tp`` describes."""
    tp = _strip(tp)
    if tp is Any or tp is object or tp is None or tp is _NONE_TYPE:
        return value
    if tp is float:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if tp is int:
        # JSON Schema counts 1.0 as an integer; hand the function a real int.
        return int(value) if isinstance(value, float) else value
    if tp is str or tp is bool:
        return value
    scalar = _models.scalar_for(tp)
    if scalar is not None:
        try:
            return scalar.load(value)
        except ConversionError as exc:
            raise ArgumentError(f"invalid argument {_dotted(path)!r}: {exc}") from None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        for candidate in args:
            if _json_equal(candidate, value):
                return candidate
        return value
    if _is_union(origin):
        # The first member the value fits and converts to: "2026-01-01" is a datetime in
        # datetime | str, and "hello" (which the schema of datetime lets through) a str.
        failure: ArgumentError | None = None
        for arg in args:
            if _conforms(value, arg):
                try:
                    return _convert(value, arg, path)
                except ArgumentError as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if _json_equal(member.value, value):
                return member
        return value
    if isinstance(tp, type) and attrs.has(tp):
        return _build_attrs(tp, value, path)
    if _is_pydantic_model(tp):
        try:
            return _models.validate_pydantic(tp, value)
        except ConversionError as exc:
            # TM-HAND-PATH: pydantic's own paths, under the argument's.
            raise ArgumentError(f"invalid argument {_dotted(path)!r}: {exc}") from None
    if _is_dataclass_type(tp):
        return _build_dataclass(tp, value, path)
    if _is_typeddict(tp):
        hints = _class_hints(tp)
        return {k: _convert(v, hints.get(k, Any), [*path, k]) for k, v in value.items()}
    if tp in _SEQUENCE_ORIGINS or origin in _SEQUENCE_ORIGINS:
        item = args[0] if args else Any
        return [_convert(v, item, [*path, i]) for i, v in enumerate(value)]
    if tp is tuple:
        return tuple(value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], [*path, i]) for i, v in enumerate(value))
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(_convert(v, a, [*path, i]) for i, (v, a) in pairs)
    if tp in _MAPPING_ORIGINS or origin in _MAPPING_ORIGINS:
        item = args[1] if args else Any
        return {k: _convert(v, item, [*path, k]) for k, v in value.items()}
    return value


def _build_attrs(cls: type, value: Mapping[str, Any], path: list[str | int]) -> Any:
    hints = _class_hints(cls)
    kwargs: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if field.init and field.name in value:
            ftype = hints.get(field.name, field.type if field.type is not None else Any)
            kwargs[field.alias or field.name] = _convert(
                value[field.name], ftype, [*path, field.name]
            )
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        # attrs validators and converters can still refuse a schema-valid value.
        raise ArgumentError(f"invalid argument {_dotted(path)!r}: {exc}") from exc


def _build_dataclass(cls: type, value: Mapping[str, Any], path: list[str | int]) -> Any:
    hints = _class_hints(cls)
    kwargs = {
        field.name: _convert(value[field.name], hints.get(field.name, Any), [*path, field.name])
        for field in _models.dataclass_fields(cls)
        if field.name in value
    }
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        # __post_init__ (or a pydantic dataclass) can still refuse a schema-valid value.
        raise ArgumentError(f"invalid argument {_dotted(path)!r}: {str(exc)[:300]}") from exc


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans differ from numbers, 1 equals 1.0, containers compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        return False
    return bool(a == b)


def _is_number(value: Any) -> typing.TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---------------------------------------------------------------------------
# dump_value: Python return values -> JSON-able data
# ---------------------------------------------------------------------------


def dump_value(value: Any) -> Any:
    """Convert a Python value to JSON-able data (attrs -> dict, tuple -> list, enum -> value)."""
    if isinstance(value, enum.Enum):
        return dump_value(value.value)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if attrs.has(type(value)):
        return {f.name: dump_value(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if _is_pydantic_model(type(value)):
        return _models.dump_pydantic(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _models.dump_dataclass(value, dump_value)
    known, dumped = _models.dump_scalar(value)
    if known:
        return dumped
    if isinstance(value, Mapping):
        return {_dump_key(k): dump_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [dump_value(v) for v in value]
    return value


def _dump_key(key: Any) -> Any:
    return key.value if isinstance(key, enum.Enum) else key
