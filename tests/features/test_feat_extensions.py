"""The extension API (SEP-2133, spec/extensions.md): an extension's identifier and settings
under capabilities.extensions in both eras, its methods as rows of the method table, its
tools/call wrapper, and what a client that did not declare it gets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
import trio
from feat_support import Connect, error_of
from support.modern import MODERN

from trio_mcp import Context, Extension, ExtensionMethod, Server
from trio_mcp.protocol._methods import (
    CACHEABLE_METHODS,
    METHODS,
    MODERN_METHODS,
    Handler,
    Kind,
    Method,
    Sender,
    register,
)
from trio_mcp.protocol._versions import Era

STAMPS = "com.example/stamps"
DECLARED: dict[str, dict[str, Any]] = {STAMPS: {}}


class Stamps(Extension):
    identifier: ClassVar[str] = STAMPS

    def settings(self) -> Mapping[str, Any]:
        return {"format": "iso"}

    def methods(self) -> list[ExtensionMethod]:
        return [
            ExtensionMethod.make(STAMPS, "stamps/now", self.now, cacheable=True),
            ExtensionMethod.make(STAMPS, "stamps/old", self.now, eras="legacy"),
            ExtensionMethod.make(STAMPS, "stamps/new", self.now, eras="modern"),
            ExtensionMethod.make(STAMPS, "stamps/fancy", self.now, feature="fancy"),
        ]

    def contribute(self, server: Any) -> None:
        async def stamp() -> str:
            """A tool the extension adds."""
            return "stamped"

        server.add_tool(stamp, name="stamp")

    async def call_tool(
        self, ctx: Context, params: Mapping[str, Any], call_next: Any
    ) -> Mapping[str, Any]:
        result = await call_next()
        return {**result, "_meta": {STAMPS: "wrapped"}}

    async def now(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"now": "2026-01-01T00:00:00Z"}


class Required(Extension):
    identifier: ClassVar[str] = "com.example/required"
    mandatory: ClassVar[bool] = True

    def methods(self) -> list[ExtensionMethod]:
        return [ExtensionMethod.make(self.identifier, "required/ping", self.ping)]

    async def ping(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"pong": True}


def stamped_server(*extensions: Extension) -> Server:
    server = Server("ext-tests", extensions=extensions or [Stamps()])

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return server


@pytest.mark.spec("EX-DECLARE", "EX-OPTIN")
async def test_the_extension_and_its_settings_are_declared_in_both_eras(
    autojump_clock, connect: Connect
) -> None:
    """initialize's result and server/discover's both carry capabilities.extensions with the
    extension's settings; a server without one declares none."""
    server = stamped_server()
    with trio.fail_after(10):
        session = await connect(server)
        discovered = await (await connect(server, MODERN)).request("server/discover")
        plain = await connect(Server("bare"))

    assert {STAMPS: {"format": "iso"}} == session.server_capabilities["extensions"]
    assert {STAMPS: {"format": "iso"}} == discovered["capabilities"]["extensions"]
    assert "extensions" not in plain.server_capabilities


@pytest.mark.spec("TM-EXT-ROWS", "TM-EXT-DECLARED", "EX-OPTIN")
async def test_an_extension_method_follows_its_row_in_both_eras(
    autojump_clock, connect: Connect
) -> None:
    """An extension's method is answered in the eras its row names, a cacheable one with
    caching hints in 2026-07-28, one whose settings flag is not declared is -32601, and a
    server that did not install the extension does not serve it."""
    server = stamped_server()
    with trio.fail_after(10):
        session = await connect(server)
        modern = await connect(server, MODERN)
        legacy_now = await session.request("stamps/now")
        legacy_old = await session.request("stamps/old")
        legacy_new = await error_of(session, "stamps/new")
        modern_new = await modern.request("stamps/new")
        fancy = await error_of(session, "stamps/fancy")
        modern_now = await modern.request("stamps/now")
        modern_old = await error_of(modern, "stamps/old")
        other = await error_of(await connect(Server("bare")), "stamps/now")

    assert {"now": "2026-01-01T00:00:00Z"} == legacy_now == legacy_old
    assert -32601 == fancy["code"] == other["code"] == legacy_new["code"]
    assert {"now": "2026-01-01T00:00:00Z"} == {"now": modern_new["now"]}
    assert "complete" == modern_now["resultType"]
    assert {"ttlMs", "cacheScope"} <= set(modern_now)
    assert -32601 == modern_old["code"]
    assert "stamps/now" in MODERN_METHODS and "stamps/now" in CACHEABLE_METHODS
    assert "stamps/old" not in MODERN_METHODS
    assert Handler.EXTENSION is METHODS["stamps/now"].handler


@pytest.mark.spec("TM-EXT-WRAP", "TM-EXT-DEGRADE", "EX-DEGRADE", "TM-CLIENT-EXTENSIONS")
async def test_the_tool_call_wrapper_runs_only_for_a_client_that_declared_it(
    autojump_clock, connect: Connect
) -> None:
    """The extension's tool (added through the server's API) is listed; its call_tool wraps
    tools/call for a client whose capabilities declare the extension, in a session and in a
    2026-07-28 request, and the others get the core behaviour."""
    server = stamped_server()
    with trio.fail_after(10):
        with_ext = await connect(server, extensions=DECLARED)
        without = await connect(server)
        modern_with = await connect(server, MODERN, extensions=DECLARED)
        modern_without = await connect(server, MODERN)
        tools = await without.list_tools()
        wrapped = await with_ext.call_tool("echo", {"text": "a"})
        plain = await without.call_tool("stamp")
        modern_wrapped = await modern_with.call_tool("echo", {"text": "b"})
        modern_plain = await modern_without.call_tool("echo", {"text": "c"})

    assert "stamp" in {t["name"] for t in tools}
    assert "wrapped" == wrapped["_meta"][STAMPS]
    assert STAMPS not in (plain.get("_meta") or {})
    assert [{"type": "text", "text": "stamped"}] == plain["content"]
    assert "wrapped" == modern_wrapped["_meta"][STAMPS]
    assert STAMPS not in modern_plain["_meta"]


@pytest.mark.spec("TM-EXT-DEGRADE", "EX-DEGRADE", "TM-CLIENT-EXTENSIONS")
async def test_a_mandatory_extension_refuses_a_client_that_did_not_declare_it(
    autojump_clock, connect: Connect
) -> None:
    """A mandatory extension's method answers -32021, naming the extension, to a client
    without it, and answers a client that declared it."""
    server = stamped_server(Required())
    declared = {"com.example/required": {}}
    with trio.fail_after(10):
        refused = await error_of(await connect(server), "required/ping")
        served = await (await connect(server, extensions=declared)).request("required/ping")
        modern_refused = await error_of(await connect(server, MODERN), "required/ping")
        modern_served = await (await connect(server, MODERN, extensions=declared)).request(
            "required/ping")

    assert -32021 == refused["code"] == modern_refused["code"]
    assert True is modern_served["pong"]
    assert {"extensions": {"com.example/required": {}}} == refused["data"]["requiredCapabilities"]
    assert {"pong": True} == served


@pytest.mark.spec("TM-EXT-ID", "EX-ID")
def test_malformed_identifiers_and_clashes_are_refused() -> None:
    """An identifier without a vendor prefix is refused when the class is defined; a second
    extension of one identifier, a method the core serves or another extension's name is
    refused at install."""
    with pytest.raises(ValueError, match="vendor-prefix"):
        class NoPrefix(Extension):
            identifier: ClassVar[str] = "stamps"

    server = stamped_server()
    with pytest.raises(ValueError, match="installed already"):
        server.add_extension(Stamps())

    class Core(Extension):
        identifier: ClassVar[str] = "com.example/core"

        def methods(self) -> list[ExtensionMethod]:
            return [ExtensionMethod.make(self.identifier, "tools/list", Stamps().now)]

    class Thief(Extension):
        identifier: ClassVar[str] = "com.example/thief"

        def methods(self) -> list[ExtensionMethod]:
            return [ExtensionMethod.make(self.identifier, "stamps/now", Stamps().now)]

    with pytest.raises(ValueError, match="served already"):
        Server("core").add_extension(Core())
    with pytest.raises(ValueError, match="differs"):
        Server("thief").add_extension(Thief())


@pytest.mark.spec("TM-EXT-ROWS")
def test_the_table_takes_only_an_extensions_client_requests() -> None:
    """register refuses a core handler's row and anything but a request from the client."""
    with pytest.raises(ValueError, match="not an extension's method"):
        register([Method(name="x/y", kind=Kind.REQUEST, sent_by=Sender.CLIENT,
                         eras=frozenset({Era.LEGACY}), handler=Handler.APP)])
    with pytest.raises(ValueError, match="client requests"):
        register([Method(name="x/note", kind=Kind.NOTIFICATION, sent_by=Sender.CLIENT,
                         eras=frozenset({Era.LEGACY}), handler=Handler.EXTENSION,
                         extension="com.example/x")])


class Lazy(Extension):
    """Of 2026-07-28 alone, declared only while switched on."""

    identifier: ClassVar[str] = "com.example/lazy"
    eras: ClassVar[str] = "modern"

    def __init__(self) -> None:
        self.on = False

    def offered(self) -> bool:
        return self.on

    def methods(self) -> list[ExtensionMethod]:
        return [ExtensionMethod.make(self.identifier, "lazy/ping", self.ping, eras="modern")]

    async def ping(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        # TM-EXT-ENGINE: a third party's handler reaches the runtime's engines too.
        return {"tasksEngine": ctx.engine("io.modelcontextprotocol/tasks") is not None}


@pytest.mark.spec("TM-EXT-ERAS", "TM-EXT-OFFERED", "TM-EXT-DECLARED")
async def test_an_extension_is_declared_in_its_eras_while_it_is_offered(
    autojump_clock, connect: Connect
) -> None:
    """A 2026-07-28 extension is never in initialize's capabilities; in server/discover's
    only while offered() is true, and its method is served only then."""
    lazy = Lazy()
    server = stamped_server(lazy)
    with trio.fail_after(10):
        modern = await connect(server, MODERN)
        off_discover = await modern.request("server/discover")
        off_ping = await error_of(modern, "lazy/ping")
        lazy.on = True
        on_discover = await modern.request("server/discover")
        on_ping = await modern.request("lazy/ping")
        session = await connect(server)

    assert "extensions" not in off_discover["capabilities"]
    assert -32601 == off_ping["code"]
    assert {"com.example/lazy": {}} == on_discover["capabilities"]["extensions"]
    assert "complete" == on_ping["resultType"]
    assert "extensions" not in session.server_capabilities
    with pytest.raises(ValueError, match="eras"):
        type("Bad", (Extension,), {"identifier": "com.example/bad", "eras": "future"})


class Needs(Extension):
    """Asks a client to declare it for a call of the tool ``echo``."""

    identifier: ClassVar[str] = "com.example/needs"

    def tool_requirements(self, tool: str) -> Mapping[str, Any]:
        return {"extensions": {self.identifier: {}}} if tool == "echo" else {}


@pytest.mark.spec("TM-EXT-TOOLREQ")
async def test_an_extension_may_require_itself_for_a_tool_call(
    autojump_clock, connect: Connect
) -> None:
    """A 2026-07-28 call of a tool the extension names is refused, -32021 naming the
    extension, from a client without it, before the tool runs; a client with it is served."""
    server = stamped_server(Needs())
    declared = {"com.example/needs": {}}
    call = {"name": "echo", "arguments": {"text": "x"}}
    with trio.fail_after(10):
        refused = await error_of(await connect(server, MODERN), "tools/call", call)
        served = await (await connect(server, MODERN, extensions=declared)).call_tool(
            "echo", {"text": "x"})

    assert -32021 == refused["code"]
    assert {"extensions": declared} == refused["data"]["requiredCapabilities"]
    assert [{"type": "text", "text": "x"}] == served["content"]


class Runner(Extension):
    identifier: ClassVar[str] = "com.example/runner"

    def task_support(self, tool: str) -> Any:
        from trio_mcp.protocol._tasks import TaskSupport

        return TaskSupport.OPTIONAL


@pytest.mark.spec("TM-EXT-ENGINE", "TM-TASK-EXT")
async def test_the_tasks_extension_is_installed_by_a_task_tool_and_owns_the_engine(
    autojump_clock, connect: Connect
) -> None:
    """A tool that may be a task installs the tasks extension (one), the only extension that
    runs calls in the runtime's engine: a second is refused. Another extension's handler
    reaches the engine in a 2026-07-28 request."""
    from trio_mcp.app._tasks import Tasks

    lazy = Lazy()
    lazy.on = True
    server = stamped_server(lazy)
    assert "io.modelcontextprotocol/tasks" not in server.extensions

    @server.tool(task="optional")
    async def slow() -> str:
        """Slow."""
        return "done"

    @server.tool(task="required")
    async def slower() -> str:
        """Slower."""
        return "done"

    assert isinstance(server.extensions["io.modelcontextprotocol/tasks"], Tasks)
    with pytest.raises(ValueError, match="engine"):
        server.add_extension(Runner())
    with trio.fail_after(10):
        answer = await (await connect(server, MODERN)).request("lazy/ping")
    assert True is answer["tasksEngine"]

    # Installed by hand, before any task tool: not declared until one comes (TM-TASK-SERVED).
    early = Server("early", extensions=[Tasks()])
    with trio.fail_after(10):
        before = await (await connect(early, MODERN)).request("server/discover")

        @early.tool(task="optional")
        async def later() -> str:
            """Later."""
            return "done"

        after = await (await connect(early, MODERN)).request("server/discover")
    assert "extensions" not in before["capabilities"]
    assert {"io.modelcontextprotocol/tasks": {}} == after["capabilities"]["extensions"]
    assert 1 == len(early.extensions)
