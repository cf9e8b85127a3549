"""The method table (trio_mcp/protocol/_methods.py): one row per method, every method set a
view of it, and a method nobody put in the table caught before it is served. The walk of the
table against a running server is tests/features/test_feat_methods.py."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_mcp import Server
from trio_mcp.app._dispatch import Dispatcher
from trio_mcp.app._tools import ToolRegistry
from trio_mcp.protocol import Notification, Request
from trio_mcp.protocol._lifecycle import MessageClass, classify
from trio_mcp.protocol._methods import (
    APP_METHODS,
    BROADCASTS,
    CACHEABLE_METHODS,
    INPUT_CAPABILITY,
    INPUT_METHODS,
    LISTEN_FLAGS,
    METHOD_CAPABILITY,
    METHODS,
    MODERN_METHODS,
    NAME_PARAM,
    SESSION_METHODS,
    SUBSCRIBED,
    UNCANCELLABLE,
    Handler,
    Kind,
    Method,
    ScopeKind,
    Sender,
    declared,
    named,
)
from trio_mcp.protocol._tasks import TASK_METHODS, TASK_ROWS, TASKS_EXTENSION, TaskAction
from trio_mcp.protocol._versions import Era
from trio_mcp.runtime.legacy._session import Session

PACKAGE = Path(__file__).resolve().parents[2] / "trio_mcp"


def full_server() -> Server:
    """A server that declares every capability an application can: a tool, a resource and
    a template, a prompt (and so completion)."""
    server = Server("methods")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    @server.resource("mem://a")
    async def a() -> str:
        """A."""
        return "a"

    @server.resource("mem://{name}")
    async def by_name(name: str) -> str:
        """By name."""
        return name

    @server.prompt()
    async def greet(who: str) -> str:
        """Greet."""
        return f"hello {who}"

    return server


def test_every_method_set_is_a_view_of_the_table() -> None:
    """The named sets the code asks are what the rows say, method by method."""
    assert {n for n, m in METHODS.items() if m.input is not None and m.sent_by.client} == (
        INPUT_METHODS
    )
    assert {n for n, m in METHODS.items() if m.cacheable} == CACHEABLE_METHODS
    assert {n for n, m in METHODS.items() if m.extension == TASKS_EXTENSION} == TASK_METHODS
    assert all(Era.MODERN in METHODS[n].eras for n in MODERN_METHODS | set(NAME_PARAM))
    assert all(METHODS[n].capability == c for n, c in METHOD_CAPABILITY.items())
    assert all(METHODS[n].target == f for n, f in NAME_PARAM.items())
    assert {"elicitation/create", "sampling/createMessage", "roots/list"} == set(INPUT_CAPABILITY)
    assert {"initialize"} == UNCANCELLABLE
    assert {n for n, m in METHODS.items() if m.broadcast} == BROADCASTS
    assert all(METHODS[n].listen_flag == f for f, n in LISTEN_FLAGS.items())
    assert all(METHODS[n].target == f and not METHODS[n].is_request for n, f in SUBSCRIBED.items())


@pytest.mark.spec("MU-SUB-1", "U-RES-6", "TK-NOTIFY")
def test_the_notifications_a_client_follows_and_listens_for_are_rows() -> None:
    """A list change is broadcast and asked for by its listen flag; a resource update goes
    to the subscribers of its uri, a task status to the listeners of its taskId."""
    assert {
        "toolsListChanged": "notifications/tools/list_changed",
        "promptsListChanged": "notifications/prompts/list_changed",
        "resourcesListChanged": "notifications/resources/list_changed",
    } == LISTEN_FLAGS
    assert {"notifications/resources/updated": "uri", "notifications/tasks": "taskId"} == (
        SUBSCRIBED
    )
    assert set(LISTEN_FLAGS.values()) | {"notifications/resources/updated"} == BROADCASTS


@pytest.mark.spec("TK-GET", "TK-UPDATE", "TK-CANCEL", "TM-TASK-EXT")
def test_the_task_actions_are_the_tasks_extensions_rows() -> None:
    """Each tasks/* row is one TaskAction and each action a row: the extension's rows
    (Handler.EXTENSION, of 2026-07-28 alone, Mcp-Name the task id), in the table."""
    assert {a.value for a in TaskAction} == TASK_METHODS
    for row in TASK_ROWS:
        assert METHODS[row.name] is row
        assert (Handler.EXTENSION, TASKS_EXTENSION, "taskId") == (
            row.handler, row.extension, row.target
        )
        assert frozenset({Era.MODERN}) == row.eras


@pytest.mark.spec("TK-HEADERS", "MT-HDR-6")
def test_mcp_name_repeats_the_target_of_each_modern_request_that_names_one() -> None:
    """Mcp-Name mirrors params.name for tools and prompts, params.uri for resources and
    params.taskId for the tasks extension's requests."""
    assert {
        "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
        "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
    } == NAME_PARAM


def test_the_dispatcher_serves_exactly_the_application_rows() -> None:
    """Every APP row has a registry's handler, and every handler a row."""
    assert APP_METHODS == set(Dispatcher()._methods)


def test_a_legacy_session_answers_exactly_its_own_rows() -> None:
    """The SESSION requests are Session.OWN_METHODS, no more and no fewer."""
    assert SESSION_METHODS == set(Session.OWN_METHODS)


def test_a_registry_method_missing_from_the_table_is_refused_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registry that offers a method the table lacks cannot be built into a server: it
    would be served with no capability, era or scope checked."""
    offered = ToolRegistry.methods

    def more(self: ToolRegistry) -> dict[str, Any]:
        return {**offered(self), "tools/frobnicate": offered(self)["tools/list"]}

    monkeypatch.setattr(ToolRegistry, "methods", more)
    with pytest.raises(ValueError, match="served without a row: tools/frobnicate"):
        Server("unlisted")


def test_a_row_no_registry_serves_is_refused_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other way round: a row of the application's with no handler is refused too,
    rather than announced and then not found."""
    offered = ToolRegistry.methods

    def fewer(self: ToolRegistry) -> dict[str, Any]:
        return {k: v for k, v in offered(self).items() if k != "tools/list"}

    monkeypatch.setattr(ToolRegistry, "methods", fewer)
    with pytest.raises(ValueError, match="a row without a handler: tools/list"):
        Server("unserved")


@pytest.mark.spec("L-CAP-1")
def test_a_server_with_every_primitive_declares_every_capability_the_table_names() -> None:
    """What each received method and each sent notification needs declared (capability
    and feature) is declared by a server that registered one of each primitive."""
    capabilities = full_server().capabilities()
    for name, spec in METHODS.items():
        if spec.input is not None and spec.sent_by is Sender.SERVER:
            continue  # the client's capability, not the server's
        if spec.handler is Handler.EXTENSION:
            continue  # an extension's, declared by a server that installs it
        assert declared(capabilities, name), name


@pytest.mark.spec("L-CAP-1")
def test_a_feature_the_row_names_must_be_declared_too() -> None:
    """resources without subscribe does not allow resources/subscribe, nor does it announce
    notifications/resources/updated; resources alone allows resources/read."""
    caps = {"resources": {"listChanged": True}}
    assert not declared(caps, "resources/subscribe")
    assert not declared(caps, "notifications/resources/updated")
    assert declared(caps, "resources/read")
    assert declared(caps, "notifications/resources/list_changed")
    assert not declared({}, "tools/call")
    assert declared({}, "ping") and declared({}, "no/such/method")


@pytest.mark.spec("L-INIT-1", "L-INIT-4", "L-PING-1")
@pytest.mark.parametrize("name", sorted(METHODS))
def test_the_lifecycle_class_of_a_message_is_its_rows(name: str) -> None:
    """classify reads the table: initialize, ping and notifications/initialized have their
    own class, as a request and a notification respectively; any other is general."""
    spec = METHODS[name]
    request = classify(Request(id=1, method=name))
    notification = classify(Notification(method=name))
    if spec.kind is Kind.REQUEST:
        assert (spec.lifecycle or MessageClass.REQUEST) == request
        assert MessageClass.NOTIFICATION == notification
    else:
        assert (spec.lifecycle or MessageClass.NOTIFICATION) == notification
        assert MessageClass.REQUEST == request


def test_named_reads_the_target_field_of_the_kind_asked() -> None:
    """What a request names is its target field's value, for its own kind only."""
    assert "x" == named("tools/call", {"name": "x"}, ScopeKind.TOOL)
    assert named("tools/call", {"name": "x"}, ScopeKind.PROMPT) is None
    assert "mem://a" == named("resources/read", {"uri": "mem://a"}, ScopeKind.RESOURCE)
    assert named("resources/read", {"uri": 3}, ScopeKind.RESOURCE) is None
    assert named("tasks/get", {"taskId": "t"}, ScopeKind.TOOL) is None
    assert named("no/such", {"name": "x"}, ScopeKind.TOOL) is None


@pytest.mark.parametrize(
    "facts",
    [
        {"kind": Kind.NOTIFICATION, "target": "name"},
        {"sent_by": Sender.SERVER},
        {"feature": "listChanged"},
        {"cacheable": True, "eras": frozenset({Era.LEGACY})},
        {"broadcast": True},
        {"listen_flag": "toolsExampleChanged"},
        {"kind": Kind.NOTIFICATION, "cancellable": False},
        {
            "kind": Kind.NOTIFICATION, "sent_by": Sender.SERVER, "handler": Handler.CLIENT,
            "listen_flag": "toolsExampleChanged",
        },
    ],
)
def test_a_row_that_does_not_hang_together_is_refused(facts: dict[str, Any]) -> None:
    """A row whose facts contradict each other fails when the table is built (at import)."""
    base = Method(
        name="tools/example", kind=Kind.REQUEST, sent_by=Sender.CLIENT,
        eras=frozenset({Era.LEGACY, Era.MODERN}), handler=Handler.APP,
    )
    with pytest.raises(ValueError, match="method table row tools/example"):
        attrs.evolve(base, **facts)


# -- where method names are spelled ----------------------------------------------------------


def _literals(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def _spelled_in(name: str) -> set[str]:
    """The modules of trio_mcp whose code (not comments, docstrings are constants too but
    never a bare method name) holds ``name`` as a string."""
    return {
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if name in _literals(path)
    }


#: The modules whose code serves the application's methods, one registry each.
REGISTRIES = {
    "trio_mcp/app/_tools.py", "trio_mcp/app/_resources.py", "trio_mcp/app/_prompts.py",
    "trio_mcp/app/_completion.py",
}
#: The table, and the clients (the tour's, and trio_mcp.Client's), which write their requests
#: as any client does: what a server serves is the table's, what a client asks is its own.
ELSEWHERE = {
    "trio_mcp/protocol/_methods.py",
    "trio_mcp/cli/_tour.py",
    "trio_mcp/client/_client.py",
    "trio_mcp/client/_modern.py",
}


@pytest.mark.parametrize("name", sorted(APP_METHODS))
def test_an_application_method_is_spelled_in_the_table_and_its_registry_only(
    name: str,
) -> None:
    """Adding a method touches the table, its handler and its rule (docs/architecture.md,
    "Adding a JSON-RPC method"): the name of each method the application serves is written
    in two modules of trio_mcp, the method table and one registry; everything else asks the
    table."""
    spelled = _spelled_in(name)
    assert "trio_mcp/protocol/_methods.py" in spelled
    assert 1 == len(spelled & REGISTRIES), spelled
    assert set() == spelled - REGISTRIES - ELSEWHERE


def _compared_with_a_method(tree: ast.AST) -> set[str]:
    """The strings a module compares a ``method`` (a name or an attribute) with, or passes
    as ``method=``; an HTTP method (GET, POST) is no JSON-RPC method."""
    found: set[str] = set()

    def is_method(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id == "method") or (
            isinstance(node, ast.Attribute) and node.attr == "method"
        )

    def strings(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return set() if node.value.isupper() else {node.value}
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return {s for e in node.elts for s in strings(e)}
        return set()

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(is_method(o) for o in operands):
                for o in operands:
                    found |= strings(o)
        elif isinstance(node, ast.keyword) and node.arg == "method":
            found |= strings(node.value)
    return found


def test_every_method_the_code_compares_with_is_a_row() -> None:
    """A method spelled in a comparison or a message anywhere in trio_mcp is one the table
    knows: a misspelt method, or one added outside the table, fails here."""
    unknown = {
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path in PACKAGE.rglob("*.py")
        for name in _compared_with_a_method(ast.parse(path.read_text("utf-8")))
        if name not in METHODS
    }
    assert set() == unknown


#: The handlers' registries, which hold their methods' names as keys: the application's
#: (one per registry module) and a legacy session's own; and the tour's client.
HANDLER_REGISTRIES = REGISTRIES | {"trio_mcp/runtime/legacy/_session.py", "trio_mcp/cli/_tour.py"}


def _method_collections(tree: ast.AST) -> list[tuple[int, set[str]]]:
    """The set, list, tuple and dict displays of a module that hold a method name (as an
    element, a key or a value), with the line of each: a method set of the module's own."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            items: list[ast.expr | None] = [*node.keys, *node.values]
        elif isinstance(node, ast.Set | ast.List | ast.Tuple):
            items = list(node.elts)
        else:
            continue
        names = {
            i.value for i in items
            if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in METHODS
        }
        if names:
            found.append((node.lineno, names))
    return found


def test_no_module_keeps_a_method_set_of_its_own() -> None:
    """Outside the table and the handlers' registries, no module of trio_mcp holds a
    collection of method names: a set, list, tuple or dict of them is a view of the table
    kept by hand, which a new method would have to join (and would silently miss)."""
    kept = {
        f"{path.relative_to(PACKAGE.parent)}:{line}: {sorted(names)}"
        for path in PACKAGE.rglob("*.py")
        if str(path.relative_to(PACKAGE.parent)) not in HANDLER_REGISTRIES | ELSEWHERE
        for line, names in _method_collections(ast.parse(path.read_text("utf-8")))
    }
    assert set() == kept


def test_a_method_set_kept_by_hand_is_found() -> None:
    """The check above finds what it is for: the listen flags as they were once written."""
    tree = ast.parse(
        '_LIST_CHANGED = {"toolsListChanged": "notifications/tools/list_changed"}\n'
        'if method in ("tasks/get", "tasks/cancel"): pass\n'
    )
    assert [(1, {"notifications/tools/list_changed"}), (2, {"tasks/get", "tasks/cancel"})] == (
        sorted(_method_collections(tree), key=lambda f: f[0])
    )


# -- the worked example of docs/architecture.md ------------------------------------------------

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _example_blocks() -> list[str]:
    """The Python blocks of docs/architecture.md's "Adding a JSON-RPC method" section."""
    text = ARCHITECTURE.read_text("utf-8")
    section = text.split("## Adding a JSON-RPC method: a worked example", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)


def test_the_worked_example_shows_the_row_and_the_handler_as_they_are() -> None:
    """The row docs/architecture.md shows is the table's row of prompts/get, and the
    handler it shows is the prompt registry's as written: the example cannot go stale."""
    from trio_mcp.app import _prompts
    from trio_mcp.protocol import _methods

    row_block, handler_block = _example_blocks()
    assert METHODS["prompts/get"] == eval(row_block, vars(_methods))
    assert textwrap.dedent(handler_block) in textwrap.dedent(
        inspect.getsource(_prompts.PromptRegistry.methods)
    )
