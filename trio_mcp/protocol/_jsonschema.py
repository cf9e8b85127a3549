# JSON Schema validation (2020-12 unless a schema names another draft), by the maintained
# jsonschema library rather than a validator of our own (TM-MRTR-VALIDATE), for every schema
# the server applies: a tool's input and output schemas, a prompt's arguments, the schemas a
# handler's elicitation asks the client to fill. No I/O: a $ref to anything outside the
# schema is never fetched (the library would, by default).
#
# A schema is compiled once (its dialect's validator, the schema checked against that
# dialect's metaschema) and kept with what it validates (`Schema`), since validation runs on
# every tools/call. What is wrong with an instance is worded here, as a Problem with the JSON
# path to it: the library's messages repeat the whole offending value, which a client can
# make megabytes long, and name Python types.
from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import attrs

__all__ = [
    "DIALECTS", "Problem", "ProblemKind", "Schema", "json_type", "preload", "schema_problems",
]

#: MJ-SCHEMA-4: the dialects a schema may name in ``$schema``, by the name `Server.tool`'s
#: documentation gives them; a schema that names none is 2020-12 (MJ-SCHEMA-2).
DIALECTS: Final = {
    "draft-03": "http://json-schema.org/draft-03/schema#",
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}

#: How much of a value a message shows: enough to recognize it, never the whole of a long one.
_SHOWN: Final = 60
#: The longest message of the library's that is passed on (for keywords not worded here).
_LONGEST: Final = 300
#: What an error of a ``false`` property schema names as its keyword (``_lenient``).
_FALSE: Final = "false"


class ProblemKind(enum.Enum):
    #: A property ``required`` names is absent (its path ends with the property's name).
    MISSING = "missing"
    #: A property the schema does not allow (``additionalProperties: false``).
    UNEXPECTED = "unexpected"
    #: A value the schema refuses.
    INVALID = "invalid"
    #: The schema cannot be applied: invalid itself, of an unknown dialect, or referring to
    #: what it does not hold. Every instance has this problem.
    SCHEMA = "schema"


@attrs.frozen
class Problem:
    """One thing wrong with an instance: where (a path of keys and indexes), and what."""

    path: tuple[str | int, ...]
    message: str
    kind: ProblemKind = ProblemKind.INVALID

    @property
    def where(self) -> str:
        """The path as JSONPath: ``$.shape.points[0]["odd key"]``."""
        out = "$"
        for seg in self.path:
            if isinstance(seg, int):
                out += f"[{seg}]"
            elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", seg):
                out += f".{seg}"
            else:
                out += f"[{json.dumps(seg)}]"
        return out

    def __str__(self) -> str:
        return self.message if self.kind is ProblemKind.SCHEMA else f"{self.where}: {self.message}"


class Schema:
    """A JSON Schema, compiled on first use (so that importing the package does not import
    the library) and kept: its dialect's validator, with the schema checked against that
    dialect's metaschema once."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._validator: Any = None
        self._fault: Problem | None = None
        self._unresolvable: type[Exception] = Exception

    def problems(self, instance: Any, limit: int | None = None) -> list[Problem]:
        """What is wrong with ``instance``, in the schema's order; [] when it is valid."""
        if self._validator is None:
            if self._fault is None:
                self._compile()
            if self._fault is not None:
                return [self._fault]
        try:
            errors = list(self._validator.iter_errors(instance))
        except self._unresolvable as exc:
            return [_schema_fault(
                f"the schema refers to what it does not hold: {_bounded(str(exc))}"
            )]
        except RecursionError:
            # A $ref that loops back without reaching a value, or an instance nested deeper
            # than a recursive schema can follow on the stack.
            return [_schema_fault(
                "the value is nested too deeply for the schema, or the schema's $ref loops "
                "without reaching a value"
            )]
        if not errors:
            return []
        found = list(_explain(errors, self._validator))
        return found if limit is None else found[:limit]

    def messages(self, instance: Any, limit: int | None = 3) -> list[str]:
        """``problems`` as text, each with its path: ``$.age: must be >= 0, got -1``."""
        return [str(p) for p in self.problems(instance, limit)]

    def _compile(self) -> None:
        import jsonschema  # heavy: imported by the first validation, not with the package
        import referencing
        import referencing.exceptions

        self._unresolvable = referencing.exceptions.Unresolvable

        # The stubs type ``default`` as a validator class; None is what says "unknown dialect".
        unknown: Any = None
        validator_class = jsonschema.validators.validator_for(self.schema, default=unknown)
        if validator_class is None:
            if "$schema" in self.schema:
                # MJ-SCHEMA-2 (MUST): an unsupported dialect is an error, not a guess.
                self._fault = _schema_fault(
                    f"the schema's dialect {self.schema['$schema']!r} is not supported"
                )
                return
            # MJ-SCHEMA-2 (MUST): without $schema, a schema is JSON Schema 2020-12.
            validator_class = jsonschema.Draft202012Validator
        try:
            validator_class.check_schema(dict(self.schema))
        except jsonschema.SchemaError as exc:
            self._fault = _schema_fault(f"the schema itself is invalid: {_bounded(exc.message)}")
            return
        # MJ-SCHEMA-1: a $ref is never followed to the network: an empty registry retrieves
        # nothing, where the library's default one would fetch any URL.
        self._validator = _lenient(validator_class, _forbids_a_property(self.schema))(
            dict(self.schema), registry=referencing.Registry()
        )


def preload() -> None:
    """Import the validating library now: a server calls this before it serves, so that its
    first tool call does not wait a few hundred milliseconds (longer on a busy machine) for
    an import every call's arguments need."""
    import jsonschema  # noqa: F401
    import referencing  # noqa: F401


def schema_problems(instance: Any, schema: Mapping[str, Any], limit: int | None = 3) -> list[str]:
    """What is wrong with ``instance`` under a JSON Schema (2020-12 unless it names another
    draft), each with its path; [] when it is valid. For a schema used once or rarely (an
    elicitation's); a schema used on every call is kept as a ``Schema``."""
    return _compiled(json.dumps(schema, sort_keys=True, default=repr)).messages(instance, limit)


@functools.lru_cache(maxsize=64)
def _compiled(text: str) -> Schema:
    # Keyed by the schema's canonical text: the same questions are asked again on every
    # retry of a request (MRTR), and a schema's compilation costs more than its validation.
    return Schema(json.loads(text))


def _schema_fault(message: str) -> Problem:
    return Problem((), message, ProblemKind.SCHEMA)


def _forbids_a_property(schema: Any) -> bool:
    """Whether a ``properties`` anywhere in ``schema`` gives a property the schema ``false``."""
    if isinstance(schema, list):
        return any(_forbids_a_property(item) for item in schema)
    if not isinstance(schema, Mapping):
        return False
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and any(v is False for v in properties.values()):
        return True
    return any(_forbids_a_property(value) for value in schema.values())


@functools.cache
def _lenient(validator_class: Any, forbidden_properties: bool) -> Any:
    """``validator_class`` that takes what the server itself writes as JSON for arrays and
    objects (a tuple, any Mapping), as the wire will show it; what arrives from a client is
    lists and dicts already. With ``forbidden_properties``, a property whose schema is
    ``false`` is reported at the property (the library's own loses the property's name from
    the path); only then, as it costs a little on every object."""
    import jsonschema

    checker = validator_class.TYPE_CHECKER.redefine_many({
        "array": lambda _checker, value: type(value) is list or isinstance(value, tuple),
        "object": lambda _checker, value: type(value) is dict or isinstance(value, Mapping),
    })
    extend: Any = jsonschema.validators.extend  # untyped in the library's stubs
    if not forbidden_properties:
        return extend(validator_class, type_checker=checker)
    own = validator_class.VALIDATORS.get("properties")

    def properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for name, subschema in properties.items():
            if subschema is False and name in instance:
                yield jsonschema.ValidationError(
                    "no value is allowed here", validator=_FALSE, path=[name], instance=instance
                )
        yield from own(validator, {k: v for k, v in properties.items() if v is not False},
                       instance, schema)

    return extend(validator_class, validators={"properties": properties}, type_checker=checker)


# -- the wording -------------------------------------------------------------------------------


def json_type(value: Any) -> str:
    """The JSON type of a value, as a message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return _bounded(text, _SHOWN)


def _bounded(text: str, most: int = _LONGEST) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


_BOUNDS: Final = {
    "minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<",
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _explain(errors: Iterable[Any], validator: Any) -> Iterator[Problem]:
    """The library's errors, worded: one Problem per missing or unexpected property, the
    branches of anyOf and oneOf explained, and nothing more said of a value whose type is
    wrong (the other keywords of its schema would restate it)."""
    errors = list(errors)
    mistyped = {
        (tuple(e.absolute_path), id(e.schema)) for e in errors if e.validator == "type"
    }
    told: set[tuple[tuple[str | int, ...], int]] = set()
    for error in errors:
        path = tuple(error.absolute_path)
        where = (path, id(error.schema))
        if error.validator != "type" and where in mistyped:
            continue
        if error.validator == "required":
            # The library reports each missing name apart, naming it only in its message:
            # the first of them tells them all.
            if where not in told and isinstance(error.instance, Mapping):
                told.add(where)
                for name in error.validator_value:
                    if name not in error.instance:
                        yield Problem(
                            (*path, name), "required property is missing", ProblemKind.MISSING
                        )
            continue
        yield from _worded(error, path, validator)


def _worded(error: Any, path: tuple[str | int, ...], validator: Any) -> Iterator[Problem]:
    keyword, value, instance = error.validator, error.validator_value, error.instance
    if keyword is None or keyword == _FALSE:
        # A schema of ``false`` (the library names no keyword for it).
        yield Problem(path, "no value is allowed here")
    elif keyword == "type":
        names = [value] if isinstance(value, str) else list(value)
        expected = " or ".join(str(n) for n in names)
        yield Problem(path, f"expected {expected}, got {json_type(instance)}")
    elif keyword == "additionalProperties" and value is False and isinstance(instance, Mapping):
        for name in _additional(instance, error.schema):
            yield Problem((*path, name), "unexpected property", ProblemKind.UNEXPECTED)
    elif keyword == "items" and value is False and isinstance(instance, list | tuple):
        for index in range(len(error.schema.get("prefixItems", ())), len(instance)):
            yield Problem((*path, index), "no value is allowed here")
    elif keyword == "enum":
        allowed = ", ".join(_show(e) for e in value)
        yield Problem(path, f"must be one of [{_bounded(allowed)}], got {_show(instance)}")
    elif keyword == "const":
        yield Problem(path, f"must be {_show(value)}, got {_show(instance)}")
    elif keyword in _BOUNDS and _is_number(value) and not isinstance(
        error.schema.get("exclusive" + keyword.title()), bool
    ):
        # (draft-04's exclusiveMinimum is a flag on minimum: the library words that one.)
        yield Problem(path, f"must be {_BOUNDS[keyword]} {_show(value)}, got {_show(instance)}")
    elif keyword == "minLength":
        yield Problem(path, f"must be at least {value} characters long")
    elif keyword == "maxLength":
        yield Problem(path, f"must be at most {value} characters long")
    elif keyword == "pattern":
        yield Problem(path, f"does not match pattern {_bounded(repr(value), _SHOWN)}")
    elif keyword == "minItems":
        yield Problem(path, f"must have at least {value} items, got {len(instance)}")
    elif keyword == "maxItems":
        yield Problem(path, f"must have at most {value} items, got {len(instance)}")
    elif keyword == "oneOf" and not error.context:
        matches = sum(validator.evolve(schema=branch).is_valid(instance) for branch in value)
        yield Problem(path, f"matches {matches} schemas in oneOf, expected exactly one")
    elif keyword in ("anyOf", "oneOf"):
        yield from _no_branch(error, path, validator)
    elif keyword == "not":
        yield Problem(path, "must not match the schema in 'not'")
    else:
        yield Problem(path, _bounded(error.message))


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """The properties of ``instance`` neither ``properties`` nor ``patternProperties`` name."""
    named = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    return [
        name for name in instance
        if name not in named and not any(re.search(p, name) for p in patterns)
    ]


def _no_branch(error: Any, path: tuple[str | int, ...], validator: Any) -> Iterator[Problem]:
    """No branch of anyOf (or oneOf) matched. If exactly one branch got past the value's own
    shape, its problems are the useful ones (a bad field inside an ``Optional[Point]``);
    if every branch failed on the value itself, the branches' types are what was expected."""
    branches: dict[int, list[Any]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    worded = [list(_explain(subs, validator)) for subs in branches.values()]
    deeper = [p for p in worded if p and all(len(q.path) > len(path) for q in p)]
    if len(deeper) == 1:
        yield from deeper[0]
        return
    described = [_describe(branch) for branch in error.validator_value]
    if not deeper and all(described):
        expected = " or ".join(dict.fromkeys(d for d in described if d))
        yield Problem(path, f"expected {expected}, got {json_type(error.instance)}")
        return
    yield Problem(path, f"does not match any of the allowed schemas ({error.validator})")


def _describe(schema: Any) -> str | None:
    """A branch in a few words, for "expected X or Y": its type, its value, or the name of
    the definition it refers to."""
    if not isinstance(schema, Mapping):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        from urllib.parse import unquote

        return unquote(ref.rsplit("/", 1)[-1]) or None
    if "const" in schema:
        return _show(schema["const"])
    if isinstance(schema.get("enum"), list):
        return "one of [" + _bounded(", ".join(_show(e) for e in schema["enum"])) + "]"
    kinds = schema.get("type")
    if isinstance(kinds, str):
        return kinds
    if isinstance(kinds, list):
        return " or ".join(str(k) for k in kinds)
    return None
