# JSON Schema validation (2020-12 unless a schema names another draft), by the maintained
# jsonschema library rather than a validator of our own (TM-MRTR-VALIDATE). No I/O: a $ref to
# anything outside the schema is never fetched (the library would, by default).
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["DIALECTS", "schema_problems"]

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


def schema_problems(instance: Any, schema: Mapping[str, Any], limit: int = 3) -> list[str]:
    """What is wrong with ``instance`` under a JSON Schema (2020-12 unless it names another
    draft), by the jsonschema library (TM-MRTR-VALIDATE); [] when it is valid."""
    import jsonschema  # heavy: imported by the first validation, not with the package
    import referencing
    import referencing.exceptions

    # The stubs type ``default`` as a validator class; None is what says "unknown dialect".
    unknown: Any = None
    validator_class = jsonschema.validators.validator_for(schema, default=unknown)
    if validator_class is None:
        if "$schema" in schema:
            # MJ-SCHEMA-2 (MUST): an unsupported dialect is an error, not a guess.
            return [f"the schema's dialect {schema['$schema']!r} is not supported"]
        # MJ-SCHEMA-2 (MUST): without $schema, a schema is JSON Schema 2020-12.
        validator_class = jsonschema.Draft202012Validator
    try:
        validator_class.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        return [f"the schema itself is invalid: {exc.message}"]
    # MJ-SCHEMA-1: a $ref is never followed to the network: an empty registry retrieves
    # nothing, where the library's default one would fetch any URL.
    validator = validator_class(dict(schema), registry=referencing.Registry())
    try:
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    except referencing.exceptions.Unresolvable as exc:
        return [f"the schema refers to what it does not hold: {exc}"]
    return [
        (f"{'/'.join(str(p) for p in e.path)}: " if e.path else "") + e.message
        for e in errors[:limit]
    ]
