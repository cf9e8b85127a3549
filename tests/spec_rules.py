"""The rulebook in spec/*.md as data, and which tests claim which rules.

Everything here is static: the rule files are parsed as text and the test files with ``ast``,
so the answers do not depend on which tests a pytest run happens to select.

- :func:`load_rules` parses ``spec/*.md`` into :class:`Rule` objects.
- :func:`collect_markers` finds every ``pytest.mark.spec("ID", ...)`` in ``tests/**/*.py``:
  on a test function, on a test class, in a module's or class's ``pytestmark``, or inside a
  test's decorators (``pytest.param(..., marks=...)``).
- :func:`render_block` renders the rule table of ``spec/README.md``.

Run it as a script to see or refresh that table::

    python tests/spec_rules.py            # print the generated block
    python tests/spec_rules.py --write    # rewrite it in spec/README.md
    python tests/spec_rules.py --check    # exit 1 when spec/README.md is stale
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

__all__ = [
    "APPLIES",
    "AREAS",
    "CODE_CITATION_RE",
    "LEVELS",
    "REVISIONS",
    "RULE_ID_RE",
    "STATUSES",
    "Marker",
    "MarkerScan",
    "Rule",
    "Rulebook",
    "code_citations",
    "collect_markers",
    "load_rules",
    "main",
    "render_block",
    "tests_by_rule",
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
APPLIES = ("server", "client", "both")
STATUSES = ("implemented", "partial", "planned", "deviation", "not-implemented", "client-only")
REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")

#: A rule with one of these levels, that binds the server and that we claim to keep, must be
#: proved by at least one test. CHOICE is here on purpose: trio-mcp's own decisions are
#: behaviour clients rely on, so they are tested like the spec's.
TESTED_LEVELS = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "CHOICE")
TESTED_APPLIES = ("server", "both")
TESTED_STATUSES = ("implemented", "partial", "deviation")
#: Statuses that must say why.
REASON_STATUSES = ("planned", "not-implemented")

#: The fields of a rule, in the order they are written.
FIELDS = (
    "Level",
    "Applies to",
    "Source",
    "Says",
    "We do",
    "Status",
    "Reason",
    "Since",
    "Until",
    "Discussion",
)
REQUIRED_FIELDS = ("Level", "Applies to", "Source", "Says", "We do", "Status")

_SPEC_ID = r"(?:T|L|J|U|MT|ML|MJ|MU)-[A-Z]+-\d+"
_TM_ID = r"TM-[A-Z]+-[A-Z0-9]+(?:-[A-Z0-9]+)*"
#: A well-formed rule id: the spec catalogue's (``T-POST-4``) or trio-mcp's own (``TM-GET-ONE``).
RULE_ID_RE = re.compile(rf"^(?:{_SPEC_ID}|{_TM_ID})$")
#: A rule id cited in running text (code comments, docstrings).
CODE_CITATION_RE = re.compile(rf"\b(?:{_SPEC_ID}|{_TM_ID})\b")


def _tm(*areas: str) -> str:
    return rf"TM-(?:{'|'.join(areas)})-[A-Z0-9]+(?:-[A-Z0-9]+)*"


#: Which ids each rulebook file holds, in reading order.
AREAS: Mapping[str, tuple[str, ...]] = {
    "transport.md": (
        r"T-(?:GEN|EP|POST|PSSE|GET|MULTI|CUSTOM|COMPAT)-\d+",
        _tm("HTTP", "POST", "GET"),
    ),
    "security.md": (r"T-SEC-\d+", _tm("SEC")),
    "sessions.md": (r"T-SESS-\d+", _tm("SESS")),
    "versioning.md": (r"T-VER-\d+", r"L-VER-\d+", _tm("VER")),
    "lifecycle.md": (r"L-(?:GEN|INIT|CAP|PING|SHUT|TIME|ERR)-\d+", _tm("LIFE")),
    "jsonrpc.md": (r"J-[A-Z]+-\d+", _tm("RPC")),
    "resumption.md": (r"T-RESUME-\d+", _tm("RES")),
    "backpressure.md": (_tm("BP"),),
    "tools.md": (r"U-(?:TOOL|PAGE)-\d+", _tm("TOOL", "PAGE")),
    "utilities.md": (
        r"U-(?:CANCEL|PROG|LOG|RES|PROMPT|COMP|TASK)-\d+",
        _tm("CANCEL", "PROG", "LOG", "RSRC", "PROMPT", "COMP", "TASK"),
    ),
    "modern.md": (r"M[TLJU]-[A-Z]+-\d+", _tm("MOD", "ERA", "MRTR", "CACHE")),
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
    last: str | None = None

    def finish() -> None:
        if current is not None:
            rule_id, title, line = current
            joined = {name: "\n".join(lines) for name, lines in fields.items()}
            rules.append(Rule(id=rule_id, title=title, file=file, line=line, fields=joined))

    for number, line in enumerate(text.splitlines(), start=1):
        where = f"spec/{file}:{number}"
        if line.startswith("#"):
            finish()
            current, fields, last = None, {}, None
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


# -- the generated table --------------------------------------------------------------------


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
