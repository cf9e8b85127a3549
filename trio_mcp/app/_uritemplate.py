# URI templates for resources (RFC 6570, spec/handlers.md TM-HAND-TEMPLATE): the expressions
# a resource URI uses, up to level 4: {var}, {+var}, {#var}, {.var}, {/var}, {/var*}, and the
# query forms {?a,b} and {&c}; matching a URI against a template (values percent-decoded, a
# query's parameters in any order), expanding one, and the screening that refuses a value
# walking out of a directory (U-RES-3, MU-RES-4). Pure computation.
from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence

import attrs

__all__ = ["UriTemplate", "unsafe_value"]

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARNAME = re.compile(r"[A-Za-z0-9_]+\Z")

#: operator -> (what a match of it starts with, the separator between its values)
_OPERATORS: Mapping[str, tuple[str, str]] = {
    "": ("", ","), "+": ("", ","), "#": ("#", ","), ".": (".", "."), "/": ("/", "/"),
    "?": ("?", "&"), "&": ("&", "&"),
}
#: Characters an expansion leaves as they are: unreserved for most operators, reserved too
#: for + and # (RFC 6570 §3.2.3).
_UNRESERVED = "-._~"
_RESERVED = ":/?#[]@!$&'()*+,;=" + _UNRESERVED


@attrs.frozen
class Variable:
    name: str
    operator: str
    explode: bool


@attrs.frozen
class UriTemplate:
    """An RFC 6570 template of the expressions a resource URI uses.

    ``{var}`` matches one segment (no ``/``, ``?`` or ``#``), ``{+var}`` a run with ``/``
    (a path), ``{#var}`` the fragment, ``{.var}`` a label after a dot, ``{/var}`` one path
    segment and ``{/var*}`` any number of them (a list), and ``{?a,b}`` / ``{&c}`` query
    parameters, in any order and each optional. A value is percent-decoded when matched and
    percent-encoded when expanded.
    """

    template: str
    variables: tuple[str, ...]
    pattern: re.Pattern[str]
    specs: tuple[Variable, ...] = ()
    query: tuple[str, ...] = ()
    """The variables of the query expressions ({?a,b}, {&c})."""

    @classmethod
    def parse(cls, template: str) -> UriTemplate:
        parts: list[str] = []
        specs: list[Variable] = []
        query: list[str] = []
        pos = 0
        for m in _EXPRESSION.finditer(template):
            literal = template[pos : m.start()]
            if query and literal:
                raise ValueError(
                    f"URI template {template!r}: the query expressions ({{?...}}, {{&...}}) "
                    "come last"
                )
            parts.append(re.escape(literal))
            pos = m.end()
            body = m.group(1)
            operator = body[:1] if body[:1] in "+#./?&;=,!@|" else ""
            if operator not in _OPERATORS:
                raise ValueError(
                    f"URI template {template!r}: the operator {operator!r} of {{{body}}} is "
                    "not supported (use {var}, {+var}, {#var}, {.var}, {/var}, {?a,b}, {&c})"
                )
            names = body[len(operator):].split(",")
            for raw in names:
                explode = raw.endswith("*")
                name = raw[:-1] if explode else raw
                if not _VARNAME.match(name):
                    raise ValueError(
                        f"URI template {template!r}: {raw!r} in {{{body}}} is not a variable "
                        "(letters, digits and _, with * to explode; prefixes like :3 are "
                        "not supported)"
                    )
                if explode and operator != "/":
                    raise ValueError(
                        f"URI template {template!r}: only {{/var*}} may explode ({{{body}}})"
                    )
                if any(s.name == name for s in specs):
                    raise ValueError(f"URI template {template!r}: {{{name}}} appears twice")
                specs.append(Variable(name, operator, explode))
            if operator in ("?", "&"):
                query.extend(n.rstrip("*") for n in names)
            else:
                parts.append(_expression_pattern(operator, specs[-len(names):]))
        rest = template[pos:]
        if query and rest:
            raise ValueError(
                f"URI template {template!r}: the query expressions ({{?...}}, {{&...}}) come last"
            )
        if "{" in rest or "}" in rest or any("{" in p or "}" in p for p in parts[::2]):
            raise ValueError(f"URI template {template!r}: unbalanced braces")
        parts.append(re.escape(rest))
        if query:
            parts.append(r"(?:\?(?P<_query>[^#]*))?")
        return cls(
            template, tuple(s.name for s in specs), re.compile("".join(parts)), tuple(specs),
            tuple(query),
        )

    def explodes(self, name: str) -> bool:
        """Whether ``name`` is an exploded ``{/var*}`` (its value a list of segments)."""
        return any(s.name == name and s.explode for s in self.specs)

    def match(self, uri: str, *, screen: bool = True) -> dict[str, str | list[str]] | None:
        """The variables of ``uri`` if it matches this template, else None. With ``screen``
        (the default), a value that decodes to an absolute path, holds a ``..`` step or a
        NUL makes the URI match nothing (TM-HAND-TEMPLATE)."""
        m = self.pattern.fullmatch(uri)
        if m is None:
            return None
        values: dict[str, str | list[str]] = {}
        for spec in self.specs:
            if spec.name in self.query:
                continue
            raw = m.group(spec.name)
            if raw is None:
                continue
            if spec.explode:
                values[spec.name] = [urllib.parse.unquote(s) for s in raw.split("/")[1:]]
            else:
                values[spec.name] = urllib.parse.unquote(raw)
        if self.query and m.group("_query"):
            pairs = urllib.parse.parse_qsl(m.group("_query"), keep_blank_values=True)
            for key, value in pairs:
                if key in self.query:
                    if key in values:
                        return None  # a parameter given twice names nothing
                    values[key] = value
        if screen and any(unsafe_value(v) for v in values.values()):
            # U-RES-3 / MU-RES-4 (MUST): a variable that decodes to an absolute path or a
            # step up could walk a file-backed resource out of its directory, so such a URI
            # names nothing.
            return None
        return values

    def expand(self, **values: object) -> str:
        """The URI for ``values`` (RFC 6570 §3.2: each percent-encoded as its operator asks;
        a query variable not given is left out)."""
        missing = {s.name for s in self.specs if s.name not in self.query} - values.keys()
        if missing:
            raise KeyError(f"missing template variables: {', '.join(sorted(missing))}")
        specs = iter(self.specs)

        def expression(m: re.Match[str]) -> str:
            body = m.group(1)
            operator = body[:1] if body[:1] in _OPERATORS and body[:1] else ""
            first, sep = _OPERATORS[operator]
            safe = _RESERVED if operator in ("+", "#") else _UNRESERVED
            out = []
            for _ in body[len(operator):].split(","):
                spec = next(specs)
                if spec.name not in values:
                    continue
                value = values[spec.name]
                if spec.explode and isinstance(value, Sequence) and not isinstance(value, str):
                    text = sep.join(urllib.parse.quote(str(v), safe=safe) for v in value)
                else:
                    text = urllib.parse.quote(str(value), safe=safe)
                out.append(f"{spec.name}={text}" if operator in ("?", "&") else text)
            if not out:
                return ""
            return first + sep.join(out)

        expanded = _EXPRESSION.sub(expression, self.template)
        # {?a}{&b} with a left out: the first parameter written opens the query.
        if self.query and "?" not in expanded and "&" in expanded:
            expanded = expanded.replace("&", "?", 1)
        return expanded


def _expression_pattern(operator: str, specs: Sequence[Variable]) -> str:
    """The regular expression of one non-query expression."""
    groups = []
    for spec in specs:
        name = spec.name
        if operator == "":
            groups.append(f"(?P<{name}>[^/?#,]+)" if len(specs) > 1 else f"(?P<{name}>[^/?#]+)")
        elif operator == "+":
            groups.append(f"(?P<{name}>[^?#]+)")
        elif operator == "#":
            groups.append(f"#(?P<{name}>.*)")
        elif operator == ".":
            groups.append(rf"\.(?P<{name}>[^/?#.]+)")
        elif spec.explode:
            groups.append(f"(?P<{name}>(?:/[^/?#]+)+)")
        else:
            groups.append(f"/(?P<{name}>[^/?#]+)")
    return ",".join(groups) if operator in ("", "+") else "".join(groups)


_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


def unsafe_value(value: str | list[str]) -> bool:
    """Whether a decoded value would walk out of a directory: an absolute path (``/x``,
    ``\\x``, ``C:\\x``), a ``..`` step, or a NUL."""
    if isinstance(value, list):
        return any(unsafe_value(v) for v in value) or unsafe_value("/".join(value))
    steps = value.replace("\\", "/").split("/")
    return (
        "\0" in value or value.startswith(("/", "\\")) or bool(_DRIVE.match(value))
        or ".." in steps
    )
