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
