# Root test configuration. Shared fixtures live in tests/support/ (importable as `support`,
# because this directory is on sys.path); the spec-marker plumbing lives here.
#
# Spec markers: `@pytest.mark.spec("T-POST-4", ...)` says which rules of spec/*.md a test
# proves. A marker naming a rule that does not exist stops the run at collection, whatever
# subset is selected; `--spec=RULE_ID` runs only the tests of that rule.
from __future__ import annotations

import contextlib
import sys

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["support.fixtures", "support.redis", "support.stores"]

# The machine is shared and has two cores: a property is judged by its examples, never by how
# long one took, so Hypothesis's per-example deadline and speed health check are off.
settings.register_profile(
    "trio-mcp",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("trio-mcp")
# The longer run, for a property test's change or a night: `pytest --hypothesis-profile=
# thorough` tries ten times the examples (support/examples.py), as the suite's counts were cut
# to keep the test command within minutes.
settings.register_profile(
    "thorough", parent=settings.get_profile("trio-mcp"), max_examples=1000
)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Install the programs of the system the tests need where they are missing
    (support/system.py): once per run, in the process that runs or hands out the tests,
    before any test and so outside every test's timeout."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    from support import system

    capture = config.pluginmanager.getplugin("capturemanager")
    terminal = config.pluginmanager.getplugin("terminalreporter")

    def say(text: str) -> None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if terminal is not None:
                terminal.write_line(text)
            else:
                print(text, file=sys.__stderr__, flush=True)

    system.provision(say)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--spec",
        action="append",
        default=[],
        metavar="RULE_ID",
        help="run only the tests marked with this rule of spec/*.md (repeatable)",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        for item in items:
            if (group := _shared_setup_group(item)) is not None:
                item.add_marker(pytest.mark.xdist_group(group))
        # The tests that take seconds first, the short ones filling in after them, so that
        # the run does not end waiting on one long test that started last. (Every worker
        # sorts alike: they must all collect the same list.)
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    _select_by_spec(config, items)


#: Fixtures of these scopes are set up once for many tests, and once again in every worker
#: process that runs one of those tests.
_SHARED_SCOPES = frozenset({"class", "module", "package"})


def _shared_setup_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a fixture set up once for many tests (a suite run,
    a server, an npm install): the module (or class) and that fixture's parameters. Tests in
    one group run in one worker, so that the set-up runs once, as it does without workers;
    different parameters of it (a conformance run per HTTP server) still run in parallel. A
    test already in a group of its own choosing keeps it."""
    if item.get_closest_marker("xdist_group") is not None:
        return None
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the test's fixtures
    if info is None:
        return None
    shared = [
        name for name in info.names_closure
        if (defs := info.name2fixturedefs.get(name)) and defs[-1].scope in _SHARED_SCOPES
    ]
    if not shared:
        return None
    scopes = {info.name2fixturedefs[name][-1].scope for name in shared}
    holder = item.getparent(pytest.Class) if scopes == {"class"} else None
    group = (holder or item.getparent(pytest.Module) or item).nodeid
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        group += "".join(
            f"[{name}={callspec.indices[name]}]" for name in sorted(shared)
            if name in callspec.indices
        )
    return group


def _select_by_spec(config: pytest.Config, items: list[pytest.Item]) -> None:
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
