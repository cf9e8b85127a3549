"""The rulebook in spec/*.md as data, and which tests claim which rules.

Everything here is static: the rule files are parsed as text and the test files with ``ast``,
so the answers do not depend on which tests a pytest run happens to select.

- :func:`load_rules` parses ``spec/*.md`` into :class:`Rule` objects.
- :func:`collect_markers` finds every ``pytest.mark.spec("ID", ...)`` in ``tests/**/*.py``:
  on a test function, on a test class, in a module's or class's ``pytestmark``, or inside a
  test's decorators (``pytest.param(..., marks=...)``).
- :class:`CodeIndex` and :func:`code_references` find the names of trio_mcp that the rules
  put between backticks, and whether they still exist (read with ``ast`` too).
- :func:`render_block` renders the rule table of ``spec/README.md``.
- :func:`waiting_on_what_exists` finds the rules whose status waits for a feature (their
  ``Depends`` field) that the code now has (tests/spec_features.py is the registry).

Run it as a script to see or refresh that table::

    python tests/spec_rules.py            # print the generated block
    python tests/spec_rules.py --write    # rewrite it in spec/README.md
    python tests/spec_rules.py --check    # exit 1 when spec/README.md is stale
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs

__all__ = [
    "APPLIES",
    "AREAS",
    "CODE_CITATION_RE",
    "CODE_FIELDS",
    "DEPENDS_STATUSES",
    "LEVELS",
    "REVISIONS",
    "RULE_ID_RE",
    "STATUSES",
    "CodeIndex",
    "CodeRef",
    "FeatureLike",
    "Marker",
    "MarkerScan",
    "Rule",
    "Rulebook",
    "code_citations",
    "code_references",
    "collect_markers",
    "load_rules",
    "main",
    "render_block",
    "tests_by_rule",
    "waiting_on_what_exists",
]

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "spec"
TESTS_DIR = ROOT / "tests"
CODE_DIR = ROOT / "trio_mcp"
README = SPEC_DIR / "README.md"
#: Files of spec/ that are prose for readers, not rule files.
PROSE = frozenset({"README.md", "reattachment.md"})

BEGIN = "<!-- rules:begin -->"
END = "<!-- rules:end -->"

LEVELS = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY", "STATEMENT", "CHOICE")
#: "trio-mcp client": a rule trio_mcp.Client keeps (spec/client.md); "client" is a rule that
#: binds other clients, recorded for what it makes the server receive (client-only).
APPLIES = ("server", "client", "both", "trio-mcp client")
STATUSES = ("implemented", "partial", "planned", "deviation", "not-implemented", "client-only")
REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")

#: A rule with one of these levels, that binds the server and that we claim to keep, must be
#: proved by at least one test. CHOICE is here on purpose: trio-mcp's own decisions are
#: behaviour clients rely on, so they are tested like the spec's.
TESTED_LEVELS = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "CHOICE")
TESTED_APPLIES = ("server", "both", "trio-mcp client")
TESTED_STATUSES = ("implemented", "partial", "deviation")
#: Statuses that must say why.
REASON_STATUSES = ("planned", "not-implemented")
#: Statuses that may name, in a Depends field, the features they wait for.
DEPENDS_STATUSES = ("planned", "not-implemented", "partial")

#: The fields of a rule, in the order they are written.
FIELDS = (
    "Level",
    "Applies to",
    "Source",
    "Says",
    "We do",
    "Status",
    "Reason",
    "Depends",
    "Since",
    "Until",
    "Discussion",
)
REQUIRED_FIELDS = ("Level", "Applies to", "Source", "Says", "We do", "Status")

_SPEC_ID = r"(?:T|L|J|U|MT|ML|MJ|MU)-[A-Z]+-\d+"
_TM_ID = r"TM-[A-Z]+-[A-Z0-9]+(?:-[A-Z0-9]+)*"
#: The tasks extension's rules (SEP-2663), named rather than numbered: the extension's text
#: numbers nothing.
_TK_ID = r"TK-[A-Z]+(?:-[A-Z0-9]+)*"
#: The MCP Apps extension's rules (SEP-1865), named for the same reason.
_UI_ID = r"UI-[A-Z]+(?:-[A-Z0-9]+)*"
#: The extensions framework's (SEP-2133, ``EX-``) and the skills extension's (SEP-2640,
#: ``SK-``) rules, named as the tasks extension's are.
_EXT_ID = r"(?:EX|SK)-[A-Z]+(?:-[A-Z0-9]+)*"
#: A well-formed rule id: the spec catalogue's (``T-POST-4``), an extension's (``TK-CANCEL``,
#: ``UI-...``, ``SK-LIST``) or trio-mcp's own (``TM-GET-ONE``).
RULE_ID_RE = re.compile(rf"^(?:{_SPEC_ID}|{_TK_ID}|{_UI_ID}|{_EXT_ID}|{_TM_ID})$")
#: A rule id cited in running text (code comments, docstrings).
CODE_CITATION_RE = re.compile(rf"\b(?:{_SPEC_ID}|{_TK_ID}|{_UI_ID}|{_EXT_ID}|{_TM_ID})\b")


def _tm(*areas: str) -> str:
    return rf"TM-(?:{'|'.join(areas)})-[A-Z0-9]+(?:-[A-Z0-9]+)*"


#: Which ids each rulebook file holds, in reading order.
AREAS: Mapping[str, tuple[str, ...]] = {
    "transport.md": (
        r"T-(?:GEN|EP|POST|PSSE|GET|MULTI|CUSTOM|COMPAT)-\d+",
        _tm("HTTP", "POST", "GET"),
    ),
    "security.md": (r"T-SEC-\d+", _tm("SEC")),
    "authorization.md": (r"T-AUTH-\d+", _tm("AUTH")),
    "sessions.md": (r"T-SESS-\d+", _tm("SESS")),
    "versioning.md": (r"T-VER-\d+", r"L-VER-\d+", _tm("VER")),
    "lifecycle.md": (r"L-(?:GEN|INIT|CAP|PING|SHUT|TIME|ERR)-\d+", _tm("LIFE")),
    "jsonrpc.md": (r"J-[A-Z]+-\d+", _tm("RPC")),
    "resumption.md": (r"T-RESUME-\d+", _tm("RES")),
    "backpressure.md": (_tm("BP"),),
    "tools.md": (r"U-(?:TOOL|PAGE)-\d+", _tm("TOOL", "PAGE")),
    "utilities.md": (
        r"U-(?:CANCEL|PROG|LOG|RES|PROMPT|COMP|TASK)-\d+",
        _tm("CANCEL", "PROG", "LOG", "RSRC", "PROMPT", "COMP"),
    ),
    "modern.md": (r"M[TLJU]-[A-Z]+-\d+", _tm("MOD", "ERA", "MRTR", "CACHE")),
    "tasks.md": (_TK_ID, _tm("TASK")),
    "apps.md": (_UI_ID, _tm("APPS")),
    "workers.md": (_tm("WORK", "STORE"),),
    "handlers.md": (_tm("HAND"),),
    "client.md": (_tm("CLIENT"),),
    "telemetry.md": (_tm("OTEL"),),
    "extensions.md": (_EXT_ID, _tm("EXT", "SKILL")),
    "stdio.md": (r"T-STDIO-\d+", _tm("STDIO")),
}

_HEADING_RE = re.compile(r"^### (?P<id>\S+) — (?P<title>\S.*)$")
_FIELD_RE = re.compile(r"^- \*\*(?P<name>[A-Z][A-Za-z ]*):\*\* (?P<value>\S.*)$")


# -- the rulebook ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Rule:
    """One rule of spec/*.md: a ``### ID — Title`` heading and its field list."""

    id: str
    title: str
    file: str
    """The rulebook file, relative to spec/ (``"transport.md"``)."""
    line: int
    """The line of the heading, 1-based."""
    fields: Mapping[str, str]
    """Every field by name (``"Level"``, ``"Applies to"``, ...); continuation lines are
    joined to their field with newlines."""
    field_lines: Mapping[str, int] = attrs.field(factory=dict)
    """The line where each field starts, 1-based; its continuation lines follow it."""

    @property
    def level(self) -> str | None:
        return self.fields.get("Level")

    @property
    def applies_to(self) -> str | None:
        return self.fields.get("Applies to")

    @property
    def source(self) -> str | None:
        return self.fields.get("Source")

    @property
    def status(self) -> str | None:
        return self.fields.get("Status")

    @property
    def depends(self) -> tuple[str, ...]:
        """The features the rule's status waits for (its Depends field, comma-separated)."""
        value = self.fields.get("Depends") or ""
        return tuple(name.strip() for name in value.split(",") if name.strip())

    @property
    def is_choice(self) -> bool:
        """A trio-mcp decision rather than a rule of the spec."""
        return self.id.startswith("TM-")

    @property
    def where(self) -> str:
        return f"spec/{self.file}:{self.line}"

    @property
    def anchor(self) -> str:
        """The GitHub anchor of the rule's heading."""
        heading = f"{self.id} — {self.title}".lower()
        return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")

    @property
    def needs_test(self) -> bool:
        return (
            self.level in TESTED_LEVELS
            and self.applies_to in TESTED_APPLIES
            and self.status in TESTED_STATUSES
        )


@attrs.frozen(kw_only=True)
class Rulebook:
    """The parsed rules, and the lines of spec/*.md that are not in the expected format."""

    rules: tuple[Rule, ...]
    problems: tuple[str, ...]

    def by_id(self) -> dict[str, Rule]:
        return {rule.id: rule for rule in self.rules}


def _file_order(path: Path) -> tuple[int, str]:
    names = list(AREAS)
    return (names.index(path.name) if path.name in names else len(names), path.name)


def parse_rule_file(text: str, file: str) -> tuple[list[Rule], list[str]]:
    """The rules of one rulebook file, and its format problems."""
    rules: list[Rule] = []
    problems: list[str] = []
    current: tuple[str, str, int] | None = None  # id, title, line of the heading
    fields: dict[str, list[str]] = {}
    starts: dict[str, int] = {}
    last: str | None = None

    def finish() -> None:
        if current is not None:
            rule_id, title, line = current
            joined = {name: "\n".join(lines) for name, lines in fields.items()}
            rules.append(
                Rule(
                    id=rule_id,
                    title=title,
                    file=file,
                    line=line,
                    fields=joined,
                    field_lines=dict(starts),
                )
            )

    for number, line in enumerate(text.splitlines(), start=1):
        where = f"spec/{file}:{number}"
        if line.startswith("#"):
            finish()
            current, fields, starts, last = None, {}, {}, None
            if line.startswith("### "):
                m = _HEADING_RE.match(line)
                if m is None:
                    problems.append(f"{where}: a rule heading is '### ID — Title': {line!r}")
                    continue
                current = (m["id"], m["title"].strip(), number)
            continue
        if current is None or not line.strip():
            continue
        m = _FIELD_RE.match(line)
        if m is not None:
            name = m["name"]
            if name not in FIELDS:
                problems.append(f"{where}: unknown field {name!r} (fields: {', '.join(FIELDS)})")
            elif name in fields:
                problems.append(f"{where}: field {name!r} given twice in {current[0]}")
            fields[name] = [m["value"].strip()]
            starts[name] = number
            last = name
        elif line.startswith("  ") and last is not None:
            fields[last].append(line.strip())
        else:
            problems.append(
                f"{where}: inside rule {current[0]}, expected '- **Field:** value' or an "
                f"indented continuation line: {line!r}"
            )
    finish()
    return rules, problems


def load_rules(spec_dir: Path = SPEC_DIR) -> Rulebook:
    """Parse every rule file of ``spec/`` (all but the PROSE ones), in reading order."""
    rules: list[Rule] = []
    problems: list[str] = []
    for path in sorted(spec_dir.glob("*.md"), key=_file_order):
        if path.name in PROSE:
            continue
        found, bad = parse_rule_file(path.read_text(encoding="utf-8"), path.name)
        rules.extend(found)
        problems.extend(bad)
    return Rulebook(rules=tuple(rules), problems=tuple(problems))


# -- markers in the tests -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Marker:
    """One rule id named by one ``pytest.mark.spec(...)`` for one test."""

    rule_id: str
    test: str | None
    """``tests/dir/test_x.py::TestClass::test_name``; None when the marker is not attached to
    a test the scanner can see (for example in a list of ``pytest.param`` defined apart)."""
    where: str
    """``tests/dir/test_x.py:LINE`` of the marker."""


@attrs.frozen(kw_only=True)
class MarkerScan:
    markers: tuple[Marker, ...]
    problems: tuple[str, ...]
    """Markers the scanner cannot read: arguments that are not string literals, keyword
    arguments, no argument at all, files that do not parse."""


def _is_spec_mark(node: ast.expr) -> bool:
    """``pytest.mark.spec`` or ``mark.spec``."""
    if not (isinstance(node, ast.Attribute) and node.attr == "spec"):
        return False
    owner = node.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (
        isinstance(owner, ast.Name) and owner.id == "mark"
    )


def _spec_calls(nodes: Iterable[ast.AST]) -> Iterator[ast.Call]:
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and _is_spec_mark(sub.func):
                yield sub


def _pytestmark_values(body: Sequence[ast.stmt]) -> list[ast.expr]:
    values: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            values.append(value)
    return values


class _FileScan:
    def __init__(self, rel: str, tree: ast.Module) -> None:
        self.rel = rel
        self.tree = tree
        self.markers: list[Marker] = []
        self.problems: list[str] = []
        self.used: set[int] = set()

    def ids(self, call: ast.Call) -> list[tuple[str, int]]:
        self.used.add(id(call))
        where = f"{self.rel}:{call.lineno}"
        if call.keywords:
            self.problems.append(f"{where}: pytest.mark.spec takes rule ids only, no keywords")
        if not call.args:
            self.problems.append(f"{where}: pytest.mark.spec() names no rule")
        out = []
        for arg in call.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append((arg.value, call.lineno))
            else:
                self.problems.append(
                    f"{where}: pytest.mark.spec arguments must be string literals, "
                    f"got {ast.unparse(arg)}"
                )
        return out

    def add(self, test: str | None, ids: Iterable[tuple[str, int]]) -> None:
        for rule_id, lineno in ids:
            self.markers.append(Marker(rule_id=rule_id, test=test, where=f"{self.rel}:{lineno}"))

    def scan(self) -> None:
        inherited = [
            pair
            for value in _pytestmark_values(self.tree.body)
            for call in _spec_calls([value])
            for pair in self.ids(call)
        ]
        self._scan_body(self.tree.body, f"{self.rel}::", inherited)
        # Markers the walk above did not attach to a test are still checked for their ids.
        for call in _spec_calls([self.tree]):
            if id(call) not in self.used:
                self.add(None, self.ids(call))

    def _scan_body(
        self, body: Sequence[ast.stmt], prefix: str, inherited: list[tuple[str, int]]
    ) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                own = [pair for call in _spec_calls(stmt.decorator_list) for pair in self.ids(call)]
                if stmt.name.startswith("test"):
                    self.add(f"{prefix}{stmt.name}", inherited + own)
                else:
                    self.add(None, own)
            elif isinstance(stmt, ast.ClassDef):
                own = [pair for call in _spec_calls(stmt.decorator_list) for pair in self.ids(call)]
                own += [
                    pair
                    for value in _pytestmark_values(stmt.body)
                    for call in _spec_calls([value])
                    for pair in self.ids(call)
                ]
                if stmt.name.startswith("Test"):
                    self._scan_body(stmt.body, f"{prefix}{stmt.name}::", inherited + own)
                else:
                    self.add(None, own)


def collect_markers(tests_dir: Path = TESTS_DIR, root: Path = ROOT) -> MarkerScan:
    """Every spec marker in ``tests_dir/**/*.py``, read statically."""
    markers: list[Marker] = []
    problems: list[str] = []
    for path in sorted(tests_dir.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        except SyntaxError as exc:
            problems.append(f"{rel}: does not parse: {exc}")
            continue
        scan = _FileScan(rel, tree)
        scan.scan()
        markers.extend(scan.markers)
        problems.extend(scan.problems)
    return MarkerScan(markers=tuple(markers), problems=tuple(problems))


def tests_by_rule(markers: Iterable[Marker]) -> dict[str, list[str]]:
    """Rule id -> the sorted, distinct tests marked with it."""
    out: dict[str, set[str]] = {}
    for marker in markers:
        if marker.test is not None:
            out.setdefault(marker.rule_id, set()).add(marker.test)
    return {rule_id: sorted(tests) for rule_id, tests in out.items()}


# -- rule ids cited in the code -------------------------------------------------------------


def code_citations(code_dir: Path = CODE_DIR, root: Path = ROOT) -> dict[str, list[str]]:
    """Rule id -> the ``path:line`` places of ``code_dir/**/*.py`` that cite it."""
    out: dict[str, list[str]] = {}
    for path in sorted(code_dir.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for m in CODE_CITATION_RE.finditer(line):
                out.setdefault(m.group(0), []).append(f"{rel}:{number}")
    return out


# -- code named in the rules ----------------------------------------------------------------

#: The fields of a rule that describe trio-mcp in its own words (Says quotes the spec).
CODE_FIELDS = ("We do", "Reason", "Discussion")

_CODE_SPAN_RE = re.compile(r"`([^`]+)`")
_DOTTED_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
#: Attributes every class has whether it defines them or not (``__init__``, ...).
_OBJECT_ATTRS = frozenset(dir(object)) | {"__call__"}


@attrs.frozen(kw_only=True)
class CodeRef:
    """A backticked name of a rule that :meth:`CodeIndex.claim` takes for code of trio_mcp."""

    text: str
    """As written between the backticks: ``Session._handle``, ``runtime/_runtime.Runtime``."""
    name: str
    """The dotted name it stands for, without call arguments, ``/`` or ``.py``."""
    rule: str
    field: str
    where: str
    """``spec/file.md:LINE`` of the backticked text."""


def _blocks(stmt: ast.stmt) -> Iterator[ast.stmt]:
    """The statements nested in an ``if``, ``try``, ``with`` or loop, but not in a def or a
    class (those are scopes of their own)."""
    for field in ("body", "orelse", "finalbody", "handlers"):
        for node in getattr(stmt, field, ()):
            if isinstance(node, ast.ExceptHandler):
                yield from node.body
            else:
                yield node


def _bindings(body: Iterable[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a module or class body binds, each to the statement that binds it first:
    defs, classes, assignments (attrs fields and enum members are class-level assignments)
    and imports, also under ``if``, ``try`` and ``with`` (``if TYPE_CHECKING:`` imports)."""
    out: dict[str, ast.stmt] = {}
    for stmt in body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            out.setdefault(stmt.name, stmt)
            continue
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                out.setdefault(alias.asname or alias.name.split(".")[0], stmt)
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
            targets = [stmt.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    out.setdefault(node.id, stmt)
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets
        ):
            for node in ast.walk(stmt.value):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    out.setdefault(node.value, stmt)
        for name, node in _bindings(_blocks(stmt)).items():
            out.setdefault(name, node)
    return out


def _instance_attributes(cls: ast.ClassDef) -> dict[str, ast.stmt]:
    """The attributes the methods of a class set on ``self`` (``self.x = ...``,
    ``self.x: T = ...``, ``object.__setattr__(self, "x", ...)``)."""
    out: dict[str, ast.stmt] = {}
    for method in ast.walk(cls):
        if not isinstance(method, _FUNCTIONS):
            continue
        args = [*method.args.posonlyargs, *method.args.args]
        if not args:
            continue
        this = args[0].arg
        for node in ast.walk(method):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id == this
                    ):
                        out.setdefault(sub.attr, node)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__setattr__"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == this
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                out.setdefault(node.args[1].value, method)
    return out


class CodeIndex:
    """What a package defines, read with ``ast`` (nothing of it is imported), and which
    backticked names of the rulebook are references into it.

    :meth:`claim` decides by construction, from the first dotted part alone, whether a name
    is code of the package: it must be the package itself (``trio_mcp.serve``), the real
    name of one of its modules or packages (``_tools``, ``_session``, ``protocol``; a path
    such as ``runtime/_runtime.py`` counts when it starts with a package's name), or a class
    the package defines at the top of a module, followed by an attribute
    (``ServerConfig.cache_hint``). Header names, JSON fields, values, flags, paths of tests/,
    method names (``tools/call``) and stdlib names (``os.execve``) begin with none of those,
    so they are never claimed, and no list of exceptions is needed.

    :meth:`resolve` then follows the rest of the name through submodules (with or without
    their leading underscore), module-level names (imports followed into the package),
    classes (their defs, properties, class-level assignments, attrs fields, nested classes,
    ``self.x`` assignments, ``__slots__``, and their bases), as far as the static reading
    can go: past a variable or an attribute whose type it does not read, and into a base
    class from outside the package, it takes the name as resolved.
    """

    def __init__(self, code_dir: Path = CODE_DIR) -> None:
        self.root = code_dir.name
        self.modules: dict[str, ast.Module] = {}
        self.packages: set[str] = set()
        for path in sorted(code_dir.rglob("*.py")):
            parts = path.relative_to(code_dir.parent).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
                self.packages.add(".".join(parts))
            name = ".".join(parts)
            self.modules[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        #: A module's last part -> the modules of that name (``_modern`` is in two packages).
        self.by_last: dict[str, list[str]] = {}
        #: A class defined at the top of a module -> (module, its definition) for each.
        self.classes: dict[str, list[tuple[str, ast.ClassDef]]] = {}
        self._bindings: dict[str, dict[str, ast.stmt]] = {}
        for name, tree in self.modules.items():
            if name != self.root:
                self.by_last.setdefault(name.rsplit(".", 1)[-1], []).append(name)
            for stmt in tree.body:
                if isinstance(stmt, ast.ClassDef):
                    self.classes.setdefault(stmt.name, []).append((name, stmt))

    # -- which names are ours

    def claim(self, text: str) -> str | None:
        """The dotted name ``text`` stands for, when it is a reference into the package with
        something to check after its first part; None for anything else."""
        name = text.strip()
        if name.endswith(")") and "(" in name:  # Session.close("deleted")
            name = name[: name.index("(")]
        name = name.removesuffix(".py")
        if "/" in name:  # a path: only one that starts at the package or a package of it,
            # and names a module (``_x``) in it: ``tasks/get`` is a method, not runtime/tasks
            first, rest = name.split("/", 1)
            if first != self.root and (
                first not in self._package_names() or not rest.startswith("_")
            ):
                return None
            name = name.replace("/", ".")
        if not _DOTTED_RE.fullmatch(name) or "." not in name:
            return None
        first = name.split(".", 1)[0]
        if first == self.root or first in self.by_last or first in self.classes:
            return name
        return None

    def _package_names(self) -> set[str]:
        return {p.rsplit(".", 1)[-1] for p in self.packages}

    # -- does the name exist

    def resolve(self, name: str) -> bool:
        """Whether the dotted name (as :meth:`claim` returns it) names something that exists."""
        first, *rest = name.split(".")
        if first == self.root:
            return self._in_module(self.root, rest)
        if first in self.by_last:
            return any(self._in_module(module, rest) for module in self.by_last[first])
        return any(self._in_class(module, cls, rest) for module, cls in self.classes[first])

    def bindings(self, module: str) -> dict[str, ast.stmt]:
        if module not in self._bindings:
            self._bindings[module] = _bindings(self.modules[module].body)
        return self._bindings[module]

    def _in_module(self, module: str, rest: Sequence[str], depth: int = 0) -> bool:
        if not rest:
            return True
        if depth > 20:  # an import cycle: give up on this path
            return False
        head, tail = rest[0], rest[1:]
        if module in self.packages:
            for sub in (f"{module}.{head}", f"{module}._{head}"):
                if sub in self.modules and self._in_module(sub, tail, depth + 1):
                    return True
        stmt = self.bindings(module).get(head)
        if stmt is None:
            return False
        if isinstance(stmt, ast.ClassDef):
            return self._in_class(module, stmt, tail)
        if isinstance(stmt, ast.ImportFrom):
            target = self._import_source(module, stmt)
            if target is None:
                return True  # imported from outside the package: not ours to check
            original = next(a.name for a in stmt.names if (a.asname or a.name) == head)
            return self._in_module(target, [original, *tail], depth + 1)
        if isinstance(stmt, ast.Import):
            return True
        if isinstance(stmt, _FUNCTIONS):
            return not tail
        return True  # a variable: what it holds is not read

    def _import_source(self, module: str, stmt: ast.ImportFrom) -> str | None:
        """The module of the package a ``from ... import`` reads from, or None when it is
        outside the package."""
        if stmt.level == 0:
            source = stmt.module or ""
            inside = source == self.root or source.startswith(f"{self.root}.")
            return source if inside and source in self.modules else None
        parts = module.split(".")
        if module not in self.packages:
            parts = parts[:-1]
        parts = parts[: len(parts) - (stmt.level - 1)]
        source = ".".join([*parts, stmt.module] if stmt.module else parts)
        return source if source in self.modules else None

    def _in_class(self, module: str, cls: ast.ClassDef, rest: Sequence[str]) -> bool:
        if not rest:
            return True
        head, tail = rest[0], rest[1:]
        stmt = _bindings(cls.body).get(head) or _instance_attributes(cls).get(head)
        if stmt is not None:
            if isinstance(stmt, ast.ClassDef):
                return self._in_class(module, stmt, tail)
            if isinstance(stmt, _FUNCTIONS):
                return not tail
            return True  # an attribute: its type is not read
        for base in cls.bases:
            found = self._base(module, base)
            if found is None:
                if self._outside_base_has(module, base, head):
                    return True
            elif self._in_class(*found, rest):
                return True
        return head in _OBJECT_ATTRS and not tail

    def _base(self, module: str, base: ast.expr) -> tuple[str, ast.ClassDef] | None:
        """The package's definition of a base class, or None when it is from outside."""
        if isinstance(base, ast.Subscript):  # Generic[T]
            base = base.value
        if not isinstance(base, ast.Name):
            return None
        stmt = self.bindings(module).get(base.id)
        if isinstance(stmt, ast.ClassDef):
            return module, stmt
        if isinstance(stmt, ast.ImportFrom):
            source = self._import_source(module, stmt)
            original = next(a.name for a in stmt.names if (a.asname or a.name) == base.id)
            if source is not None:
                return self._base(source, ast.Name(id=original))
        return None

    def _outside_base_has(self, module: str, base: ast.expr, attr: str) -> bool:
        """Whether a base class from outside the package (``enum.IntEnum``, ``Exception``)
        has the attribute; True when the base cannot be found without importing the package."""
        if isinstance(base, ast.Subscript):
            base = base.value
        path = ast.unparse(base).split(".")
        stmt = self.bindings(module).get(path[0])
        try:
            if stmt is None:
                obj = getattr(builtins, path[0])
            elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
                original = next(a.name for a in stmt.names if (a.asname or a.name) == path[0])
                obj = getattr(importlib.import_module(stmt.module), original)
            elif isinstance(stmt, ast.Import):
                full = next(a.name for a in stmt.names if (a.asname or a.name) == path[0])
                obj = importlib.import_module(full)
            else:
                return True
            for part in path[1:]:
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            return True
        # Looked up statically: an enum's `value` is a descriptor that refuses the class.
        classes = getattr(obj, "__mro__", (type(obj),))
        return hasattr(obj, attr) or any(attr in vars(c) for c in classes)


def code_references(rules: Iterable[Rule], index: CodeIndex) -> list[CodeRef]:
    """The backticked names of the rules' CODE_FIELDS that ``index`` claims, in reading order."""
    out: list[CodeRef] = []
    for rule in rules:
        for field in CODE_FIELDS:
            value = rule.fields.get(field)
            if not value:
                continue
            start = rule.field_lines.get(field, rule.line)
            for m in _CODE_SPAN_RE.finditer(value):
                name = index.claim(m.group(1))
                if name is not None:
                    line = start + value.count("\n", 0, m.start())
                    out.append(
                        CodeRef(
                            text=m.group(1),
                            name=name,
                            rule=rule.id,
                            field=field,
                            where=f"spec/{rule.file}:{line}",
                        )
                    )
    return out


# -- the generated table --------------------------------------------------------------------


class FeatureLike(Protocol):
    """A feature of the registry (tests/spec_features.py): its name, what it is, and the code
    whose existence says it has landed."""

    @property
    def name(self) -> str: ...

    @property
    def what(self) -> str: ...

    @property
    def code(self) -> str: ...


def waiting_on_what_exists(
    rules: Iterable[Rule], features: Mapping[str, FeatureLike], index: CodeIndex
) -> list[str]:
    """Every rule whose Depends field is wrong, one line each: a feature the registry does
    not know, a Depends on a rule kept in full (it waits for nothing), a feature whose code
    the index cannot read as a reference into the package, and above all a feature whose code
    exists now, so that the status, We do and Reason that waited for it are stale."""
    problems = []
    for name, feature in sorted(features.items()):
        claimed = index.claim(feature.code)
        if name != feature.name or claimed is None:
            problems.append(f"feature {name!r}: {feature.code!r} is no code reference")
    for rule in rules:
        if rule.depends and rule.status not in DEPENDS_STATUSES:
            problems.append(
                f"{rule.where}: {rule.id} is {rule.status} and waits for nothing: drop its "
                "Depends"
            )
        for name in rule.depends:
            feature = features.get(name)
            if feature is None:
                problems.append(
                    f"{rule.where}: {rule.id} depends on {name!r}, which tests/spec_features.py "
                    "does not register"
                )
                continue
            claimed = index.claim(feature.code)
            if claimed is not None and index.resolve(claimed):
                problems.append(
                    f"{rule.where}: {rule.id} is {rule.status} for want of {name} "
                    f"({feature.what}), which exists now (`{feature.code}`): update its Status, "
                    "We do and Reason, and drop the Depends"
                )
    return problems


def _summary(rules: Sequence[Rule]) -> list[str]:
    files = list(dict.fromkeys(rule.file for rule in rules))
    lines = [
        "| File | Rules | " + " | ".join(STATUSES) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in STATUSES) + " |",
    ]
    for file in [*files, None]:
        chosen = [r for r in rules if file is None or r.file == file]
        counts = [sum(1 for r in chosen if r.status == s) for s in STATUSES]
        name = f"[{file}]({file})" if file else "**all**"
        lines.append(f"| {name} | {len(chosen)} | " + " | ".join(map(str, counts)) + " |")
    return lines


def render_block(rules: Sequence[Rule], markers: Iterable[Marker]) -> str:
    """The generated part of spec/README.md (between the begin and end comments)."""
    tested = tests_by_rule(markers)
    out = [
        "",
        "<!-- Generated by `python tests/spec_rules.py --write`; do not edit by hand. -->",
        "",
        *_summary(rules),
    ]
    for file in dict.fromkeys(rule.file for rule in rules):
        out += [
            "",
            f"### [{file}]({file})",
            "",
            "| Rule | Level | Status | Tests | Test names |",
            "| --- | --- | --- | ---: | --- |",
        ]
        for rule in (r for r in rules if r.file == file):
            names = tested.get(rule.id, [])
            shown = "<br>".join(f"`{name}`" for name in names)
            out.append(
                f"| [{rule.id}]({file}#{rule.anchor}) | {rule.level} | {rule.status} "
                f"| {len(names)} | {shown} |"
            )
    out.append("")
    return "\n".join(out)


def read_block(text: str) -> str | None:
    """The generated part of a README's text, or None when the markers are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start + len(BEGIN) : end]


def replace_block(text: str, block: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{README.name} has no {BEGIN} ... {END} block")
    return text[: start + len(BEGIN)] + block + text[end:]


def current_block() -> str:
    """The table as the rulebook and the tests make it today."""
    return render_block(load_rules().rules, collect_markers().markers)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="spec_rules.py", description="Show, rewrite or check the rule table of spec/README.md."
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the table in spec/README.md")
    mode.add_argument(
        "--check", action="store_true", help="exit with status 1 when spec/README.md is stale"
    )
    args = parser.parse_args(argv)
    block = current_block()
    if args.write:
        README.write_text(replace_block(README.read_text(encoding="utf-8"), block), "utf-8")
        print(f"wrote {README.relative_to(ROOT)}")
        return 0
    if args.check:
        if read_block(README.read_text(encoding="utf-8")) != block:
            print(
                f"{README.relative_to(ROOT)} is stale: run python tests/spec_rules.py --write",
                file=sys.stderr,
            )
            return 1
        return 0
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
