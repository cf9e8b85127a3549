"""The extension API (SEP-2133, spec/extensions.md): an extension's identifier and settings
under capabilities.extensions in both eras, its methods as rows of the method table, its
tools/call wrapper, and what a client that did not declare it gets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
import trio
from feat_support import MemoryServer
from support.modern import modern_headers, modern_request

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
DECLARED = {"extensions": {STAMPS: {}}}


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


async def modern(
    ms: MemoryServer, method: str, params: Mapping[str, Any] | None = None,
    capabilities: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One 2026-07-28 request, its response (result or error)."""
    message = modern_request(method, params, capabilities=capabilities)
    ex = await ms.request("POST", modern_headers(message), json.dumps(message).encode())
    answer = await ex.next_message()
    assert answer is not None
    return answer


@pytest.mark.spec("EX-DECLARE", "EX-OPTIN")
async def test_the_extension_and_its_settings_are_declared_in_both_eras(autojump_clock, mem):
    """initialize's result and server/discover's both carry capabilities.extensions with the
    extension's settings; a server without one declares none."""
    ms = await mem(stamped_server())
    bare = await mem(Server("bare"))
    with trio.fail_after(10):
        session = await ms.open_session()
        discovered = await modern(ms, "server/discover")
        plain = await bare.open_session()

    assert {STAMPS: {"format": "iso"}} == session.initialize_result["capabilities"]["extensions"]
    assert {STAMPS: {"format": "iso"}} == discovered["result"]["capabilities"]["extensions"]
    assert "extensions" not in plain.initialize_result["capabilities"]


@pytest.mark.spec("TM-EXT-ROWS", "TM-EXT-DECLARED", "EX-OPTIN")
async def test_an_extension_method_follows_its_row_in_both_eras(autojump_clock, mem):
    """An extension's method is answered in the eras its row names, a cacheable one with
    caching hints in 2026-07-28, one whose settings flag is not declared is -32601, and a
    server that did not install the extension does not serve it."""
    ms = await mem(stamped_server())
    bare = await mem(Server("bare"))
    with trio.fail_after(10):
        session = await ms.open_session()
        legacy_now = await session.result("stamps/now")
        legacy_old = await session.result("stamps/old")
        legacy_new = await session.error("stamps/new")
        modern_new = await modern(ms, "stamps/new")
        fancy = await session.error("stamps/fancy")
        modern_now = await modern(ms, "stamps/now")
        modern_old = await modern(ms, "stamps/old")
        other = await (await bare.open_session()).error("stamps/now")

    assert {"now": "2026-01-01T00:00:00Z"} == legacy_now == legacy_old
    assert -32601 == fancy["code"] == other["code"] == legacy_new["code"]
    assert {"now": "2026-01-01T00:00:00Z"} == {"now": modern_new["result"]["now"]}
    assert "complete" == modern_now["result"]["resultType"]
    assert {"ttlMs", "cacheScope"} <= set(modern_now["result"])
    assert -32601 == modern_old["error"]["code"]
    assert "stamps/now" in MODERN_METHODS and "stamps/now" in CACHEABLE_METHODS
    assert "stamps/old" not in MODERN_METHODS
    assert Handler.EXTENSION is METHODS["stamps/now"].handler


@pytest.mark.spec("TM-EXT-WRAP", "TM-EXT-DEGRADE", "EX-DEGRADE")
async def test_the_tool_call_wrapper_runs_only_for_a_client_that_declared_it(autojump_clock, mem):
    """The extension's tool (added through the server's API) is listed; its call_tool wraps
    tools/call for a client whose capabilities declare the extension, in a session and in a
    2026-07-28 request, and the others get the core behaviour."""
    ms = await mem(stamped_server())
    with trio.fail_after(10):
        with_ext = await ms.open_session(DECLARED)
        without = await ms.open_session()
        tools = await without.result("tools/list")
        wrapped = await with_ext.result("tools/call", {"name": "echo", "arguments": {"text": "a"}})
        plain = await without.result("tools/call", {"name": "stamp", "arguments": {}})
        modern_wrapped = await modern(
            ms, "tools/call", {"name": "echo", "arguments": {"text": "b"}}, capabilities=DECLARED
        )
        modern_plain = await modern(ms, "tools/call", {"name": "echo", "arguments": {"text": "c"}})

    assert "stamp" in {t["name"] for t in tools["tools"]}
    assert "wrapped" == wrapped["_meta"][STAMPS]
    assert STAMPS not in (plain.get("_meta") or {})
    assert [{"type": "text", "text": "stamped"}] == plain["content"]
    assert "wrapped" == modern_wrapped["result"]["_meta"][STAMPS]
    assert STAMPS not in modern_plain["result"]["_meta"]


@pytest.mark.spec("TM-EXT-DEGRADE", "EX-DEGRADE")
async def test_a_mandatory_extension_refuses_a_client_that_did_not_declare_it(autojump_clock, mem):
    """A mandatory extension's method answers -32021, naming the extension, to a client
    without it, and answers a client that declared it."""
    ms = await mem(stamped_server(Required()))
    with trio.fail_after(10):
        refused = await (await ms.open_session()).error("required/ping")
        served = await (await ms.open_session(
            {"extensions": {"com.example/required": {}}}
        )).result("required/ping")
        modern_refused = await modern(ms, "required/ping")

    assert -32021 == refused["code"] == modern_refused["error"]["code"]
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
async def test_an_extension_is_declared_in_its_eras_while_it_is_offered(autojump_clock, mem):
    """A 2026-07-28 extension is never in initialize's capabilities; in server/discover's
    only while offered() is true, and its method is served only then."""
    lazy = Lazy()
    ms = await mem(stamped_server(lazy))
    with trio.fail_after(10):
        off_discover = await modern(ms, "server/discover")
        off_ping = await modern(ms, "lazy/ping")
        lazy.on = True
        on_discover = await modern(ms, "server/discover")
        on_ping = await modern(ms, "lazy/ping")
        session = await ms.open_session()

    assert "extensions" not in off_discover["result"]["capabilities"]
    assert -32601 == off_ping["error"]["code"]
    assert {"com.example/lazy": {}} == on_discover["result"]["capabilities"]["extensions"]
    assert "complete" == on_ping["result"]["resultType"]
    assert "extensions" not in session.initialize_result["capabilities"]
    with pytest.raises(ValueError, match="eras"):
        type("Bad", (Extension,), {"identifier": "com.example/bad", "eras": "future"})


class Needs(Extension):
    """Asks a client to declare it for a call of the tool ``echo``."""

    identifier: ClassVar[str] = "com.example/needs"

    def tool_requirements(self, tool: str) -> Mapping[str, Any]:
        return {"extensions": {self.identifier: {}}} if tool == "echo" else {}


@pytest.mark.spec("TM-EXT-TOOLREQ")
async def test_an_extension_may_require_itself_for_a_tool_call(autojump_clock, mem):
    """A 2026-07-28 call of a tool the extension names is refused, 400 and -32021 naming the
    extension, from a client without it, before the tool runs; other tools are not."""
    ms = await mem(stamped_server(Needs()))
    declared = {"extensions": {"com.example/needs": {}}}
    call = {"name": "echo", "arguments": {"text": "x"}}
    with trio.fail_after(10):
        message = modern_request("tools/call", call)
        refused_ex = await ms.request("POST", modern_headers(message), json.dumps(message).encode())
        refused = await refused_ex.next_message()
        served = await modern(ms, "tools/call", call, capabilities=declared)

    assert refused is not None and 400 == refused_ex.status
    assert -32021 == refused["error"]["code"]
    assert declared == refused["error"]["data"]["requiredCapabilities"]
    assert [{"type": "text", "text": "x"}] == served["result"]["content"]


class Runner(Extension):
    identifier: ClassVar[str] = "com.example/runner"

    def task_support(self, tool: str) -> Any:
        from trio_mcp.protocol._tasks import TaskSupport

        return TaskSupport.OPTIONAL


@pytest.mark.spec("TM-EXT-ENGINE", "TM-TASK-EXT")
async def test_the_tasks_extension_is_installed_by_a_task_tool_and_owns_the_engine(
    autojump_clock, mem
):
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
    ms = await mem(server)
    with trio.fail_after(10):
        answer = await modern(ms, "lazy/ping")
    assert {"tasksEngine": True} == {"tasksEngine": answer["result"]["tasksEngine"]}
