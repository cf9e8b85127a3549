# The rulebook (spec/*.md), the tests and the code must agree: every rule well-formed, every
# marker naming a real rule, every binding rule we claim to keep proved by a test, every
# rule id cited in trio_mcp/ existing, every name of trio_mcp a rule puts between backticks
# existing, and spec/README.md's table current.
# Everything is read statically by tests/spec_rules.py, so the result does not depend on
# which tests a run selects.

from __future__ import annotations

import functools
import re
from pathlib import Path

import spec_features
import spec_rules
from spec_rules import Rule


@functools.cache
def rulebook() -> spec_rules.Rulebook:
    return spec_rules.load_rules()


@functools.cache
def markers() -> spec_rules.MarkerScan:
    return spec_rules.collect_markers()


def rules() -> tuple[Rule, ...]:
    return rulebook().rules


def _listing(lines: list[str]) -> str:
    return "\n  " + "\n  ".join(lines)


def test_rulebook_files_are_in_the_rule_format() -> None:
    """
    Every spec/*.md but README.md is a known area file, has at least one rule, and parses
    cleanly: `### ID — Title` headings followed only by `- **Field:** value` lines and their
    indented continuations.
    """
    files = [p.name for p in spec_rules.SPEC_DIR.glob("*.md") if p.name not in spec_rules.PROSE]
    unknown = sorted(set(files) - set(spec_rules.AREAS))
    empty = sorted(f for f in files if not any(r.file == f for r in rules()))

    assert [] == unknown, "rulebook files missing from spec_rules.AREAS"
    assert [] == empty, "rulebook files without rules"
    assert [] == list(rulebook().problems), _listing(list(rulebook().problems))


def test_rule_ids_are_unique_well_formed_and_in_their_area_file() -> None:
    """
    Rule ids are unique across spec/, have the shape of a spec catalogue id (`T-POST-4`) or
    of a trio-mcp choice (`TM-GET-ONE`), and sit in the file of their area
    (spec_rules.AREAS: T-SESS-* and TM-SESS-* in sessions.md, ...).
    """
    seen: dict[str, str] = {}
    duplicates, malformed, misplaced = [], [], []
    for rule in rules():
        if rule.id in seen:
            duplicates.append(f"{rule.id}: {seen[rule.id]} and {rule.where}")
        seen.setdefault(rule.id, rule.where)
        if not spec_rules.RULE_ID_RE.match(rule.id):
            malformed.append(f"{rule.where}: {rule.id}")
        patterns = spec_rules.AREAS.get(rule.file, ())
        if not any(re.fullmatch(p, rule.id) for p in patterns):
            misplaced.append(f"{rule.where}: {rule.id} does not belong in {rule.file}")

    assert [] == duplicates, _listing(duplicates)
    assert [] == malformed, _listing(malformed)
    assert [] == misplaced, _listing(misplaced)


def test_every_rule_has_level_source_and_status_with_valid_values() -> None:
    """
    Every rule has Level, Applies to, Source, Says, We do and Status, each with a value from
    its legend; trio-mcp choices (TM-*) are Level CHOICE with Source `trio-mcp` and no spec
    rule is; spec rules cite `MCP <revision> · ...`; `client-only` is the status of exactly
    the rules that apply to the client; Since and Until name known revisions.
    """
    problems = []
    for rule in rules():
        f = rule.fields
        missing = [name for name in spec_rules.REQUIRED_FIELDS if not f.get(name)]
        if missing:
            problems.append(f"{rule.where}: {rule.id} lacks {', '.join(missing)}")
            continue
        if rule.level not in spec_rules.LEVELS:
            problems.append(f"{rule.where}: {rule.id} Level {rule.level!r}")
        if rule.applies_to not in spec_rules.APPLIES:
            problems.append(f"{rule.where}: {rule.id} Applies to {rule.applies_to!r}")
        if rule.status not in spec_rules.STATUSES:
            problems.append(f"{rule.where}: {rule.id} Status {rule.status!r}")
        if rule.is_choice != (rule.level == "CHOICE"):
            problems.append(f"{rule.where}: {rule.id}: CHOICE is the level of TM-* rules only")
        if rule.is_choice and rule.source != "trio-mcp":
            problems.append(f"{rule.where}: {rule.id}: a choice's Source is trio-mcp")
        revisions = "|".join(spec_rules.REVISIONS)
        if not rule.is_choice and not re.match(rf"MCP (?:{revisions}) · \S", rule.source or ""):
            problems.append(f"{rule.where}: {rule.id} Source {rule.source!r}")
        if (rule.status == "client-only") != (rule.applies_to == "client"):
            problems.append(
                f"{rule.where}: {rule.id}: client-only goes with Applies to: client, "
                f"not {rule.applies_to!r} / {rule.status!r}"
            )
        for name in ("Since", "Until"):
            if name in f and f[name] not in spec_rules.REVISIONS:
                problems.append(f"{rule.where}: {rule.id} {name} {f[name]!r}")

    assert [] == problems, _listing(problems)


def test_every_spec_marker_names_an_existing_rule() -> None:
    """
    Every `pytest.mark.spec(...)` in tests/ (on tests, classes, `pytestmark`, or in a test's
    decorators) names a rule of spec/*.md with string literals only.
    """
    known = {rule.id for rule in rules()}
    unknown = sorted(
        f"{m.where}: {m.rule_id!r}" for m in markers().markers if m.rule_id not in known
    )

    assert [] == list(markers().problems), _listing(list(markers().problems))
    assert [] == unknown, _listing(unknown)


def test_every_binding_rule_we_keep_has_a_test() -> None:
    """
    Every rule that binds the server (Applies to server or both), at Level MUST, MUST NOT,
    SHOULD, SHOULD NOT or CHOICE, and that we claim to keep (Status implemented, partial or
    deviation), is named by the spec marker of at least one test.
    """
    tested = spec_rules.tests_by_rule(markers().markers)
    untested = [
        f"{rule.id} ({rule.level}, {rule.status}) — {rule.title}  [{rule.where}]"
        for rule in rules()
        if rule.needs_test and not tested.get(rule.id)
    ]

    assert [] == untested, f"{len(untested)} rules have no test:" + _listing(untested)


def test_planned_and_not_implemented_rules_give_a_reason() -> None:
    """
    A rule with Status planned or not-implemented says why in a Reason field.
    """
    reasonless = [
        f"{rule.where}: {rule.id} ({rule.status})"
        for rule in rules()
        if rule.status in spec_rules.REASON_STATUSES and not rule.fields.get("Reason")
    ]

    assert [] == reasonless, _listing(reasonless)


def test_no_rule_waits_for_a_feature_that_exists() -> None:
    """
    A rule kept in part or not at all may name in its Depends field the features its status
    waits for (tests/spec_features.py registers them, each with the code that says it has
    landed); once that code exists, the status, We do and Reason are stale, and this fails
    naming the rule. Depends names registered features only, and only on a rule that is
    planned, not-implemented or partial.
    """
    problems = spec_rules.waiting_on_what_exists(
        rules(), spec_features.FEATURES, spec_rules.CodeIndex()
    )

    assert [] == problems, _listing(problems)


def test_the_stale_status_check_finds_a_rule_left_behind_by_a_feature(tmp_path: Path) -> None:
    """
    Run on a rulebook of its own: a rule that waits for a feature whose code exists is
    reported (as MU-CACHE-5 was, "no access control", when authorization had landed), one
    that waits for a feature to come is not, and an unknown feature, a Depends on a rule
    kept in full and a registry entry that names no code are reported too.
    """
    code = tmp_path / "pkg"
    code.mkdir()
    (code / "__init__.py").write_text("", encoding="utf-8")
    (code / "_auth.py").write_text("class Authenticator:\n    pass\n", encoding="utf-8")
    index = spec_rules.CodeIndex(code)
    features = {
        "auth": spec_features.Feature("auth", "authorization", "pkg._auth.Authenticator"),
        "rate-limit": spec_features.Feature("rate-limit", "a rate limit", "pkg._limits.Limit"),
        "bogus": spec_features.Feature("bogus", "nothing", "os.path"),
    }
    fields = {"Level": "MUST", "Applies to": "server", "Source": "MCP 2026-07-28 · x · y",
              "Says": "x", "We do": "x", "Reason": "x"}
    book = [
        Rule(id="MU-CACHE-5", title="t", file="modern.md", line=1,
             fields={**fields, "Status": "not-implemented", "Depends": "auth"}),
        Rule(id="MU-TOOL-6", title="t", file="modern.md", line=2,
             fields={**fields, "Status": "partial", "Depends": "rate-limit"}),
        Rule(id="MU-TOOL-7", title="t", file="modern.md", line=3,
             fields={**fields, "Status": "partial", "Depends": "rate-limit, warp-drive"}),
        Rule(id="MU-TOOL-8", title="t", file="modern.md", line=4,
             fields={**fields, "Status": "implemented", "Depends": "rate-limit"}),
    ]

    problems = spec_rules.waiting_on_what_exists(book, features, index)

    assert 4 == len(problems), _listing(problems)
    assert "feature 'bogus'" in problems[0]
    assert "MU-CACHE-5 is not-implemented for want of auth" in problems[1]
    assert "MU-TOOL-7 depends on 'warp-drive'" in problems[2]
    assert "MU-TOOL-8 is implemented and waits for nothing" in problems[3]


def test_rule_ids_cited_in_the_code_exist() -> None:
    """
    Every rule id that trio_mcp/**/*.py cites in a comment or docstring (`T-POST-4`,
    `TM-RES-STALE`, ...) is a rule of spec/*.md: no dangling references.
    """
    known = {rule.id for rule in rules()}
    dangling = [
        f"{rule_id}: {', '.join(places)}"
        for rule_id, places in sorted(spec_rules.code_citations().items())
        if rule_id not in known
    ]

    assert [] == dangling, _listing(dangling)


def test_code_named_in_the_rules_exists() -> None:
    """Every code reference into trio_mcp in a rule's We do, Reason or Discussion resolves."""
    index = spec_rules.CodeIndex()
    refs = spec_rules.code_references(rules(), index)
    dangling = [
        f"{ref.where}: {ref.rule} {ref.field}: `{ref.text}`"
        for ref in refs
        if not index.resolve(ref.name)
    ]

    assert refs, "the recognizer claims no code reference at all"
    assert [] == dangling, (
        f"{len(dangling)} of {len(refs)} code references name nothing in trio_mcp/ "
        "(read with ast; see spec_rules.CodeIndex):" + _listing(dangling)
    )


def test_readme_table_is_current() -> None:
    """
    The generated block of spec/README.md is what `python tests/spec_rules.py --write`
    would write now.
    """
    text = spec_rules.README.read_text(encoding="utf-8")
    block = spec_rules.read_block(text)

    assert block is not None, f"{spec_rules.BEGIN} ... {spec_rules.END} missing"
    assert spec_rules.render_block(rules(), markers().markers) == block, (
        "spec/README.md is stale: run python tests/spec_rules.py --write"
    )


def test_readme_links_every_choice() -> None:
    """
    The section "Choices the spec leaves open" of spec/README.md links every trio-mcp
    choice (TM-*) to its rule.
    """
    text = spec_rules.README.read_text(encoding="utf-8")
    start = text.find("## Choices the spec leaves open")
    section = text[start : text.find("\n## ", start + 1)] if start >= 0 else ""
    unlinked = [
        rule.id
        for rule in rules()
        if rule.is_choice and f"[{rule.id}]({rule.file}#{rule.anchor})" not in section
    ]

    assert start >= 0, "spec/README.md has no section 'Choices the spec leaves open'"
    assert [] == unlinked, _listing(unlinked)


def test_marker_scan_finds_functions_classes_pytestmark_and_params(tmp_path: Path) -> None:
    """
    The static marker scan attaches ids from a test's decorators (parametrize marks
    included), from its class, and from module and class `pytestmark` to the right tests,
    checks ids the scan cannot attach to a test, and reports non-literal arguments.
    """
    tests = tmp_path / "tests"
    tests.mkdir()
    mark = "pytest.mark.spec"  # only ever inside strings here, so the real scan skips it
    (tests / "test_sample.py").write_text(
        "import pytest\n"
        f"pytestmark = [pytest.mark.slow, {mark}('M-1')]\n"
        f"@{mark}('F-1', 'F-2')\n"
        "def test_f(): pass\n"
        f"@pytest.mark.parametrize('x', [pytest.param(1, marks={mark}('P-1'))])\n"
        "def test_p(x): pass\n"
        f"@{mark}('C-1')\n"
        "class TestC:\n"
        f"    pytestmark = {mark}('C-2')\n"
        "    def test_m(self): pass\n"
        "    def helper(self): pass\n"
        f"CASES = [{mark}('O-1')]\n"
        "RULE = 'X'\n"
        f"@{mark}(RULE)\n"
        "def test_bad(): pass\n",
        encoding="utf-8",
    )

    scan = spec_rules.collect_markers(tests, root=tmp_path)

    assert {
        "C-1": ["tests/test_sample.py::TestC::test_m"],
        "C-2": ["tests/test_sample.py::TestC::test_m"],
        "F-1": ["tests/test_sample.py::test_f"],
        "F-2": ["tests/test_sample.py::test_f"],
        "M-1": [
            "tests/test_sample.py::TestC::test_m",
            "tests/test_sample.py::test_bad",
            "tests/test_sample.py::test_f",
            "tests/test_sample.py::test_p",
        ],
        "P-1": ["tests/test_sample.py::test_p"],
    } == spec_rules.tests_by_rule(scan.markers)
    assert ["O-1"] == [m.rule_id for m in scan.markers if m.test is None]
    assert 1 == len(scan.problems)
    assert "string literals" in scan.problems[0]


def test_code_reference_recognizer_claims_only_names_it_can_anchor(tmp_path: Path) -> None:
    """
    CodeIndex claims a backticked name only when its first part is the package, one of its
    modules (a path from a package too), or one of its classes followed by an attribute,
    and resolves the rest through submodules with or without their underscore, imports,
    methods, properties, class-level and `self.x` assignments, attrs fields, enum members
    and bases.
    """
    code = tmp_path / "pkg"
    (code / "_sub").mkdir(parents=True)
    (code / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ._core import Thing as Thing\n",
        encoding="utf-8",
    )
    (code / "_core.py").write_text(
        "import enum\n"
        "import attrs\n"
        "LIMIT = 3\n"
        "class Kind(enum.IntEnum):\n"
        "    A = 1\n"
        "class Base:\n"
        "    def inherited(self): ...\n"
        "@attrs.define\n"
        "class Thing(Base):\n"
        "    size: int = 0\n"
        "    def __attrs_post_init__(self):\n"
        "        self.extra = 1\n"
        "        object.__setattr__(self, 'hidden', 2)\n"
        "    @property\n"
        "    def prop(self): ...\n"
        "    class Inner:\n"
        "        X = 1\n"
        "def helper(): ...\n",
        encoding="utf-8",
    )
    (code / "_sub" / "__init__.py").write_text("", encoding="utf-8")
    (code / "_sub" / "_leaf.py").write_text(
        "from .._core import Thing\nfrom .._core import helper as aid\n", encoding="utf-8"
    )
    index = spec_rules.CodeIndex(code)

    ignored = [
        "Mcp-Session-Id", "resultType", '"complete"', "--host", "tools/call", "T-POST-4",
        "tests/unit/test_x.py", "os.execve", "resources.subscribe", "core.Thing", "Thing",
        "_core", "helper.x", "Unknown.attr", "pkg", "a/b.c",
    ]  # fmt: skip
    resolving = [
        "pkg.Thing", "pkg._core.LIMIT", "pkg/_sub/_leaf.py", "_core.Thing.size",
        "_core.Thing.extra", "_core.Thing.hidden", "_core.Thing.prop", "_core.Thing.Inner.X",
        "Thing.inherited", "Thing.__init__", "Kind.A", "Kind.value", "_leaf.Thing.size",
        "_leaf.aid", "_sub.leaf.Thing", "_sub/_leaf.Thing", 'Thing.prop("x")',
    ]  # fmt: skip
    dangling = [
        "pkg.Missing", "_core.Thing.missing", "_core.helper.x", "Thing.Inner.Y",
        "Kind.B", "_leaf.helper", "_sub._gone", "pkg/_sub/_gone.py",
    ]  # fmt: skip

    assert [] == [text for text in ignored if index.claim(text) is not None]
    claimed = {text: index.claim(text) for text in resolving + dangling}
    assert [] == [text for text, name in claimed.items() if name is None]
    assert [] == [text for text in resolving if not index.resolve(claimed[text] or "")]
    assert [] == [text for text in dangling if index.resolve(claimed[text] or "")]
