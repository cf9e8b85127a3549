"""MCP Apps (io.modelcontextprotocol/ui, spec/apps.md): app tools listed with their
``_meta.ui``, ``ui://`` pages read as ``text/html;profile=mcp-app`` with their CSP and
permissions, the extension declared in both eras, the text a host without it sees, and what
registration refuses (traversal, oversize pages, CSP entries that are not origins). In both
eras, through trio_mcp.Client(server) declaring the extension as a host does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from feat_support import Connect, InProcess
from support.docs import code_blocks
from support.eras import ERAS, LEGACY, rpc
from support.fixtures import HTTP_SERVERS, start_live
from support.modern import MODERN

from trio_mcp import AppCsp, AppPermissions, Context, Server, ToolResult, apps_supported
from trio_mcp._demo_page import DICE_PAGE
from trio_mcp.app._apps import APP_MIME_TYPE, APPS_EXTENSION, MAX_APP_HTML
from trio_mcp.demo import server as demo

DICE = "ui://trio-mcp-demo/dice.html"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "apps.md"
#: What a host with MCP Apps declares (the extension's settings: the MIME types it renders).
UI_CAPS: dict[str, Any] = {"extensions": {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}}
#: The same, as trio_mcp.Client's ``extensions``.
UI: dict[str, Any] = UI_CAPS["extensions"]

PAGE = "<!DOCTYPE html><html><head><title>t</title></head><body><p id=x>hi</p></body></html>"


def app_server(page: str = PAGE, *, max_bytes: int = MAX_APP_HTML) -> Server:
    server = Server("apps-tests")

    @server.app_tool(resource_uri="ui://apps-tests/board.html", visibility=["app"])
    async def refresh() -> ToolResult:
        """Refresh the board (the page calls it; the model does not see it)."""
        return ToolResult(structured={"n": 1})

    server.add_app_resource(
        "ui://apps-tests/board.html",
        page,
        title="Board",
        description="A board.",
        csp={"connectDomains": ["https://api.example.com"],
             "resourceDomains": ["https://*.cdn.example.com"]},
        permissions=AppPermissions(clipboard_write=True),
        domain="board.example-content.com",
        prefers_border=False,
        max_bytes=max_bytes,
    )
    return server


@pytest.mark.spec("UI-TOOL-META", "TM-APPS-LEGACYKEY")
@pytest.mark.parametrize("era", ERAS)
async def test_an_app_tool_is_listed_with_its_ui_meta(connect: Connect, era: str) -> None:
    """tools/list gives an app tool ``_meta.ui.resourceUri`` (and ``visibility``), and the
    flat ``ui/resourceUri`` older hosts read, in both eras."""
    served = InProcess(connect, demo)
    answer = await served.rpc(era, "tools/list", extensions=UI)
    tools = {t["name"]: t for t in answer["result"]["tools"]}
    meta = tools["roll_dice"]["_meta"]
    assert meta["ui"] == {"resourceUri": DICE, "visibility": ["model", "app"]}
    assert meta["ui/resourceUri"] == DICE
    # A tool that is not an app tool carries no ui metadata.
    assert "_meta" not in tools["echo"] or "ui" not in tools["echo"]["_meta"]


@pytest.mark.spec("UI-RES-MIME", "UI-RES-URI", "TM-APPS-LIST")
@pytest.mark.parametrize("era", ERAS)
async def test_the_demo_page_is_read_as_mcp_app_html(connect: Connect, era: str) -> None:
    """resources/read of the page an app tool names answers the HTML document, with the MIME
    type ``text/html;profile=mcp-app``; resources/list shows it with that type too."""
    served = InProcess(connect, demo)
    listed = (await served.rpc(era, "resources/list"))["result"]["resources"]
    [entry] = [r for r in listed if r["uri"] == DICE]
    assert entry["mimeType"] == APP_MIME_TYPE
    answer = await served.rpc(era, "resources/read", {"uri": DICE}, extensions=UI)
    [contents] = answer["result"]["contents"]
    assert contents["uri"] == DICE
    assert contents["mimeType"] == APP_MIME_TYPE
    assert contents["text"] == DICE_PAGE
    assert contents["_meta"] == {"ui": {"prefersBorder": True}}


@pytest.mark.spec("UI-RES-META", "TM-APPS-CSP", "TM-APPS-LIST")
@pytest.mark.parametrize("era", ERAS)
async def test_a_pages_csp_and_permissions_are_its_ui_meta(
    connect: Connect, era: str
) -> None:
    """A page's CSP origins, permissions, domain and border preference are ``_meta.ui`` of its
    contents and of its listing, in the spec's camelCase."""
    served = InProcess(connect, app_server())
    ui = {
        "csp": {"connectDomains": ["https://api.example.com"],
                "resourceDomains": ["https://*.cdn.example.com"]},
        "permissions": {"clipboardWrite": {}},
        "domain": "board.example-content.com",
        "prefersBorder": False,
    }
    answer = await served.rpc(era, "resources/read", {"uri": "ui://apps-tests/board.html"})
    [contents] = answer["result"]["contents"]
    assert (contents["mimeType"], contents["text"], contents["_meta"]) == (
        APP_MIME_TYPE, PAGE, {"ui": ui}
    )
    [entry] = (await served.rpc(era, "resources/list"))["result"]["resources"]
    assert entry == {
        "uri": "ui://apps-tests/board.html", "name": "ui://apps-tests/board.html",
        "title": "Board", "description": "A board.", "mimeType": APP_MIME_TYPE,
        "_meta": {"ui": ui},
    }
    tools = (await served.rpc(era, "tools/list"))["result"]["tools"]
    assert tools[0]["_meta"]["ui"]["visibility"] == ["app"]


@pytest.mark.spec("UI-CAP", "TM-APPS-DECLARE")
async def test_the_extension_is_declared_in_both_eras(connect: Connect) -> None:
    """The legacy initialize result and the 2026-07-28 server/discover result declare
    ``io.modelcontextprotocol/ui`` under ``capabilities.extensions``; a server with no app
    declares no extension."""
    served = InProcess(connect, demo)
    legacy = (await served.client(LEGACY, extensions=UI)).server_capabilities
    assert legacy["extensions"][APPS_EXTENSION] == {}
    discover = await served.rpc(MODERN, "server/discover", extensions=UI)
    assert discover["result"]["capabilities"]["extensions"][APPS_EXTENSION] == {}
    assert "extensions" not in Server("plain").capabilities()


@pytest.mark.spec("UI-FALLBACK", "UI-CAP-CLIENT", "UI-CHECK")
@pytest.mark.parametrize("era", ERAS)
async def test_a_host_without_the_extension_gets_the_roll_as_text(
    connect: Connect, era: str
) -> None:
    """An app tool's result has meaningful text for every client; a client that did not
    declare the extension (or declared it without the HTML profile) is told in the text what
    the page would have shown, one that did gets the same result with its structured data."""
    served = InProcess(connect, demo)
    args = {"name": "roll_dice", "arguments": {"sides": 6, "count": 3}}
    plain = (await served.rpc(era, "tools/call", args))["result"]
    other = {APPS_EXTENSION: {"mimeTypes": ["text/uri-list"]}}
    other_profile = (await served.rpc(era, "tools/call", args, extensions=other))["result"]
    ui = (await served.rpc(era, "tools/call", args, extensions=UI))["result"]
    for result in (plain, other_profile, ui):
        [text] = result["content"]
        rolls = result["structuredContent"]["rolls"]
        assert len(rolls) == 3 and all(1 <= r <= 6 for r in rolls)
        assert text["text"].startswith(f"Rolled {' + '.join(map(str, rolls))} = {sum(rolls)}")
    assert "MCP Apps" in plain["content"][0]["text"]
    assert "MCP Apps" in other_profile["content"][0]["text"]
    assert "MCP Apps" not in ui["content"][0]["text"]


@pytest.mark.spec("TM-APPS-URI")
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("uri", [
    "ui://trio-mcp-demo/../trio-mcp-demo/dice.html",
    "ui://trio-mcp-demo/%2e%2e/dice.html",
    "ui://trio-mcp-demo/dice.html/..",
    "ui://trio-mcp-demo//dice.html",
    "ui://trio-mcp-demo/dice.html?x=1",
    "ui://trio-mcp-demo/DICE.html",
])
async def test_a_read_of_another_spelling_of_a_page_names_nothing(
    connect: Connect, era: str, uri: str
) -> None:
    """A ``ui://`` URI is the page's exact name: a traversal, an empty segment, a query or
    another case reads nothing (resource not found: -32002, -32602 in 2026-07-28)."""
    served = InProcess(connect, demo)
    answer = await served.rpc(era, "resources/read", {"uri": uri})
    assert answer["error"]["code"] == {LEGACY: -32002, MODERN: -32602}[era], answer
    assert answer["error"]["data"] == {"uri": uri}


@pytest.mark.spec("TM-APPS-URI")
@pytest.mark.parametrize("uri", [
    "ui://x/../y.html", "ui://x/%2E%2e/y.html", "ui://x/./y.html", "ui://../y.html",
    "ui://x/a%2Fb.html", "ui://x/a%5cb.html", "ui://x/a%00.html", "ui:///y.html",
    "ui://x//y.html", "ui://x/y.html?v=1", "ui://x/y.html#top", "ui://x/y z.html",
    "ui://x/{y}.html", "http://x/y.html", "file:///etc/passwd", "ui://x/" + "a" * 2048,
])
def test_a_page_uri_that_is_not_one_ui_name_is_refused(uri: str) -> None:
    """add_app_resource and app_tool refuse a URI that is not ``ui://`` with an authority,
    or that steps out of a directory (raw or percent-encoded), encodes a slash or NUL, has an
    empty segment, a query or a fragment."""
    server = Server("x")
    with pytest.raises(ValueError):
        server.add_app_resource(uri, PAGE)
    with pytest.raises(ValueError):
        server.app_tool(resource_uri=uri)
    assert not server.resources and "extensions" not in server.capabilities()


@pytest.mark.spec("TM-APPS-CSP")
@pytest.mark.parametrize("entry", [
    "https://a.example.com; script-src *",  # a second directive smuggled into the policy
    "https://a.example.com 'unsafe-eval'",
    "*", "'self'", "'unsafe-inline'", "data:", "https:", "javascript:alert(1)",
    "https://a.example.com/path", "https://a.example.com?q", "ftp://a.example.com",
    "https://a.example.com:99999", "https://-a.example.com", "https://a..example.com",
    "https://a.example.com\n", "https://*", "https://a.*.example.com", "",
    "https://" + "a." * 200 + "example.com", "https://" + "a" * 64 + ".example.com",
])
def test_a_csp_entry_that_is_not_an_origin_is_refused(entry: str) -> None:
    """Each CSP entry is an origin (scheme, host with an optional leading ``*.`` label,
    optional port) and nothing else, so that a host joining the lists into a policy gets no
    keyword, wildcard, path or extra directive from the server's input."""
    with pytest.raises(ValueError, match="not an origin"):
        AppCsp(connect_domains=[entry])
    with pytest.raises(ValueError, match="not an origin"):
        Server("x").add_app_resource("ui://x/p.html", PAGE, csp={"frameDomains": [entry]})


@pytest.mark.spec("TM-APPS-CSP")
def test_csp_and_permissions_are_checked_as_a_whole() -> None:
    """An unknown CSP field or permission is refused, not dropped; a list given as one string
    is refused; more than 64 origins in a list is refused; good entries keep their order."""
    with pytest.raises(ValueError, match="unknown"):
        AppCsp.of({"scriptDomains": ["https://a.example.com"]})
    with pytest.raises(TypeError):
        AppCsp.of({"connectDomains": "https://a.example.com"})
    with pytest.raises(ValueError, match="64"):
        AppCsp(connect_domains=[f"https://h{i}.example.com" for i in range(65)])
    with pytest.raises(ValueError, match="unknown"):
        AppPermissions.of(["camera", "usb"])
    with pytest.raises(ValueError):
        AppPermissions.of({"camera": "yes"})
    with pytest.raises(ValueError, match="unknown"):
        AppPermissions.of({"usb": None})
    with pytest.raises(ValueError, match="host name"):
        Server("x").add_app_resource("ui://x/p.html", PAGE, domain="a.example.com/evil")
    good = AppCsp.of({"connect_domains": ["wss://rt.example.com:8443", "http://localhost:3000"],
                      "baseUriDomains": ["https://cdn.example.com"]})
    assert good.to_dict() == {
        "connectDomains": ["wss://rt.example.com:8443", "http://localhost:3000"],
        "baseUriDomains": ["https://cdn.example.com"],
    }
    assert AppPermissions.of({"camera": {}, "geolocation": {}}).to_dict() == {
        "camera": {}, "geolocation": {}
    }


@pytest.mark.spec("TM-APPS-SIZE", "UI-RES-HTML")
def test_a_page_over_the_size_bound_or_not_html_is_refused() -> None:
    """A page over 2 MiB of UTF-8 (or over ``max_bytes``) is refused at registration, naming
    its size; so is a fragment that is not an HTML document, bytes, and text that is not
    Unicode."""
    server = Server("x")
    big = "<!DOCTYPE html>" + "é" * (MAX_APP_HTML // 2)  # 2 bytes each: just over
    with pytest.raises(ValueError, match="bytes, more than"):
        server.add_app_resource("ui://x/big.html", big)
    with pytest.raises(ValueError, match="more than 100"):
        server.add_app_resource("ui://x/p.html", PAGE * 2, max_bytes=100)
    with pytest.raises(ValueError, match="HTML document"):
        server.add_app_resource("ui://x/p.html", "<p>a fragment</p>")
    with pytest.raises(TypeError):
        server.add_app_resource("ui://x/p.html", PAGE.encode())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Unicode"):
        server.add_app_resource("ui://x/p.html", PAGE + "\ud800")
    assert not server.resources


@pytest.mark.spec("TM-APPS-SIZE")
@pytest.mark.parametrize("era", ERAS)
async def test_a_page_near_the_bound_is_read_whole(connect: Connect, era: str) -> None:
    """A page just under 2 MiB is served whole, byte for byte, in both eras."""
    filler = "x" * (MAX_APP_HTML - len(PAGE) - 64)
    page = PAGE.replace("hi", filler)
    served = InProcess(connect, app_server(page))
    answer = await served.rpc(era, "resources/read", {"uri": "ui://apps-tests/board.html"})
    assert answer["result"]["contents"][0]["text"] == page


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, through any exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


@pytest.mark.spec("UI-TOOL-EXISTS")
@pytest.mark.parametrize("http_server", HTTP_SERVERS)
async def test_an_app_tool_whose_page_is_missing_stops_serving(http_server: str) -> None:
    """An app tool naming a ``ui://`` page that is not registered is a mistake found when
    serving starts, with the tool and URI named, rather than a not-found a host meets later;
    once the page is registered, the same server serves."""
    server = Server("x")

    @server.app_tool(resource_uri="ui://x/missing.html")
    async def show() -> str:
        """Show."""
        return "shown"

    errors: list[BaseException] = []
    with trio.fail_after(30):
        try:
            async with trio.open_nursery() as nursery:
                await start_live(nursery, server, http_server=http_server)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            errors = leaves(group)
        except ValueError as exc:
            errors = [exc]
    assert [str(e) for e in errors if isinstance(e, ValueError)] == [
        "app tool(s) name a ui:// resource that is not registered: show -> ui://x/missing.html "
        "(register it with server.add_app_resource)"
    ], errors

    server.add_app_resource("ui://x/missing.html", PAGE)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            live = await start_live(nursery, server, http_server=http_server)
            result = await rpc(live.url, MODERN, "tools/call", {"name": "show", "arguments": {}})
            assert result["result"]["content"] == [{"type": "text", "text": "shown"}]
            nursery.cancel_scope.cancel()


@pytest.mark.spec("UI-TOOL-META")
def test_app_tool_arguments_are_checked() -> None:
    """``visibility`` is a non-empty list of "model" and "app"; ``meta`` may not set ``ui``
    itself; removing an app tool forgets its page binding."""
    server = Server("x")
    for visibility in (["user"], [], "app"):
        with pytest.raises((ValueError, TypeError)):
            server.app_tool(resource_uri="ui://x/p.html", visibility=visibility)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"_meta\.ui"):
        server.app_tool(resource_uri="ui://x/p.html", meta={"ui": {}})

    @server.app_tool(resource_uri="ui://x/p.html", meta={"x-other": 1})
    async def show() -> str:
        """Show."""
        return "shown"

    assert server.tools["show"].to_dict()["_meta"]["x-other"] == 1
    assert server.capabilities()["extensions"] == {APPS_EXTENSION: {}}
    server.remove_tool("show")
    # No app tool is left to miss its page, and nothing of the extension is declared.
    assert "extensions" not in server.capabilities()


def test_apps_supported_reads_the_declared_extension() -> None:
    """``apps_supported`` holds for capabilities that declare the extension with the HTML
    profile, and for nothing else."""
    assert apps_supported(UI_CAPS)
    assert not apps_supported({})
    assert not apps_supported({"extensions": {APPS_EXTENSION: {}}})
    assert not apps_supported({"extensions": {APPS_EXTENSION: {"mimeTypes": "text/html"}}})
    assert not apps_supported({"extensions": []})


@pytest.mark.spec("UI-FALLBACK", "UI-RES-META")
@pytest.mark.parametrize("era", ERAS)
async def test_the_docs_example_serves_what_the_page_says(
    connect: Connect, era: str
) -> None:
    """docs/apps.md's example, run as written (its page given), lists the tool with its page,
    serves the page with the CSP and permission it shows, and answers in text with and
    without the extension."""
    [block] = [b for b in code_blocks(DOCS.read_text("utf-8"), "python") if "app_tool" in b]
    scope: dict[str, Any] = {"DASHBOARD_HTML": PAGE}
    exec(block, scope)
    served = InProcess(connect, scope["server"])
    [tool] = (await served.rpc(era, "tools/list"))["result"]["tools"]
    assert tool["_meta"]["ui"] == {"resourceUri": "ui://weather/dashboard.html"}
    read = await served.rpc(era, "resources/read", {"uri": "ui://weather/dashboard.html"})
    [contents] = read["result"]["contents"]
    assert contents["_meta"]["ui"] == {
        "csp": {"connectDomains": ["https://api.weather.example"]},
        "permissions": {"geolocation": {}},
        "prefersBorder": True,
    }
    call = {"name": "forecast", "arguments": {"city": "Lyon"}}
    plain = (await served.rpc(era, "tools/call", call))["result"]
    ui = (await served.rpc(era, "tools/call", call, extensions=UI))["result"]
    assert plain["content"][0]["text"].startswith("Lyon: high 21, low 12. (A host")
    assert ui["content"] == [{"type": "text", "text": "Lyon: high 21, low 12."}]
    assert ui["structuredContent"] == {"city": "Lyon", "high": 21, "low": 12}


@pytest.mark.spec("UI-TOOL-META", "UI-FALLBACK")
@pytest.mark.parametrize("era", ERAS)
async def test_one_decorator_on_two_plain_functions_binds_each(
    connect: Connect, era: str
) -> None:
    """An ``app_tool`` decorator applied to two functions registers both with their page,
    and a plain ``def`` app tool, run in a worker thread, reads ``apps_supported(ctx)``."""
    server = Server("x")
    shows = server.app_tool(resource_uri="ui://x/p.html", visibility=["model"])

    @shows
    def first(ctx: Context) -> str:
        """First."""
        return f"first {apps_supported(ctx)}"

    @shows
    def second(ctx: Context) -> str:
        """Second."""
        return f"second {apps_supported(ctx)}"

    server.add_app_resource("ui://x/p.html", PAGE)
    served = InProcess(connect, server)
    tools = (await served.rpc(era, "tools/list"))["result"]["tools"]
    assert [(t["name"], t["_meta"]["ui"]["resourceUri"]) for t in tools] == [
        ("first", "ui://x/p.html"), ("second", "ui://x/p.html"),
    ]
    for name, caps, said in [("first", UI, "first True"), ("second", {}, "second False")]:
        call = {"name": name, "arguments": {}}
        result = (await served.rpc(era, "tools/call", call, extensions=caps))["result"]
        assert result["content"] == [{"type": "text", "text": said}]
