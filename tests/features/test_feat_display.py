# What a client shows (issue 40, spec/handlers.md TM-HAND-DISPLAY): icons and websiteUrl on the
# server, icons on tools, resources, templates and prompts, and typed tool annotations, in
# both eras.
from __future__ import annotations

import pytest
import trio
from support.client import open_session
from support.eras import ERAS, LEGACY, rpc
from support.fixtures import StartServer
from support.modern import modern_request, post

from trio_mcp import Icon, Server, ToolAnnotations

TIMEOUT = 20

pytestmark = pytest.mark.spec("TM-HAND-DISPLAY")

LOGO = Icon(src="https://example.com/logo.png", mime_type="image/png", sizes=("48x48",))
DARK = Icon(src="data:image/svg+xml;base64,PHN2Zy8+", sizes=("any",), theme="dark")


def shown_server() -> Server:
    server = Server("shown", website_url="https://example.com", icons=[LOGO, DARK])

    @server.tool(icons=[LOGO], annotations=ToolAnnotations(
        title="Delete a file", destructive_hint=True, idempotent_hint=True))
    async def delete(path: str) -> str:
        """Delete a file."""
        return path

    @server.tool(annotations={"readOnlyHint": True})
    async def look(path: str) -> str:
        """Look at a file."""
        return path

    @server.resource("notes://{name}", icons=[DARK])
    async def note(name: str) -> str:
        """A note."""
        return name

    @server.prompt(icons=[LOGO])
    async def greet() -> str:
        """A greeting."""
        return "hi"

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_icons_website_and_typed_annotations_reach_the_client(
    live_server: StartServer, era: str
) -> None:
    """serverInfo carries websiteUrl and icons; tools/list carries a tool's icons and its
    typed annotations in the wire's camelCase (a hint left None is left out); templates
    and prompts carry their icons."""
    live = await live_server(shown_server())
    with trio.fail_after(TIMEOUT):
        if era == LEGACY:
            info = (await open_session(live.url)).initialize_result["serverInfo"]
        else:
            discovered = (await post(live.url, modern_request("server/discover"))).json()
            info = discovered["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
        tools = (await rpc(live.url, era, "tools/list"))["result"]["tools"]
        templates = (await rpc(live.url, era, "resources/templates/list"))["result"]
        prompts = (await rpc(live.url, era, "prompts/list"))["result"]["prompts"]
    assert "https://example.com" == info["websiteUrl"]
    assert [LOGO.to_dict(), DARK.to_dict()] == info["icons"]
    assert {"src": "https://example.com/logo.png", "mimeType": "image/png",
            "sizes": ["48x48"]} == LOGO.to_dict()
    by_name = {t["name"]: t for t in tools}
    assert {"title": "Delete a file", "destructiveHint": True, "idempotentHint": True} == (
        by_name["delete"]["annotations"]
    )
    assert [LOGO.to_dict()] == by_name["delete"]["icons"]
    assert {"readOnlyHint": True} == by_name["look"]["annotations"]
    assert "icons" not in by_name["look"]
    assert [DARK.to_dict()] == templates["resourceTemplates"][0]["icons"]
    assert [LOGO.to_dict()] == prompts[0]["icons"]


def test_an_icon_that_is_no_web_or_data_uri_is_refused() -> None:
    """An icon's src is an https, http or data URI (a file: or javascript: one would have a
    client read the disk or run code to show a picture); websiteUrl is a web URL."""
    for src in ("file:///etc/passwd", "javascript:alert(1)", "/relative.png"):
        with pytest.raises(ValueError, match="https, http or data URI"):
            Icon(src=src)
    with pytest.raises(ValueError, match="website_url"):
        Server("x", website_url="ftp://example.com")
    with pytest.raises(TypeError, match="Icon values"):
        Server("x", icons=[{"src": "https://x"}])  # type: ignore[list-item]
