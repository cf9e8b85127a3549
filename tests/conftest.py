# Root test configuration. Shared fixtures live in tests/support/ (importable as `support`,
# because this directory is on sys.path); the spec-marker plumbing lives here.
#
# Spec markers: `@pytest.mark.spec("T-POST-4", ...)` says which rules of spec/*.md a test
# proves. A marker naming a rule that does not exist stops the run at collection, whatever
# subset is selected; `--spec=RULE_ID` runs only the tests of that rule.
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["support.fixtures", "support.redis"]

# The machine is shared and has two cores: a property is judged by its examples, never by how
# long one took, so Hypothesis's per-example deadline and speed health check are off.
settings.register_profile(
    "trio-mcp",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("trio-mcp")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--spec",
        action="append",
        default=[],
        metavar="RULE_ID",
        help="run only the tests marked with this rule of spec/*.md (repeatable)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import spec_rules

    known = {rule.id for rule in spec_rules.load_rules().rules}
    unknown = [
        f"{item.nodeid}: {rule_id!r}"
        for item in items
        for mark in item.iter_markers(name="spec")
        for rule_id in mark.args
        if rule_id not in known
    ]
    if unknown:
        raise pytest.UsageError(
            "pytest.mark.spec names rules that are not in spec/*.md:\n  " + "\n  ".join(unknown)
        )
    wanted = set(config.getoption("spec"))
    if not wanted:
        return
    if missing := sorted(wanted - known):
        raise pytest.UsageError(f"--spec names rules that are not in spec/*.md: {missing}")
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        marked = {a for mark in item.iter_markers(name="spec") for a in mark.args}
        (keep if marked & wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
