"""Resources: registration, resources/list and templates/list (paginated), resources/read,
subscriptions and notifications."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from feat_support import error_of
from support.modern import modern_headers, modern_request

from trio_mcp import (
    Blob,
    Context,
    EmbeddedResource,
    Image,
    ResourceNotFound,
    Server,
    ServerConfig,
    Text,
)
from trio_mcp.app._resources import UriTemplate, to_contents
from trio_mcp.demo import server as demo


def resource_server() -> Server:
    server = Server("resource-tests")

    @server.resource("test://text", mime_type="text/plain", title="Text")
    async def text() -> str:
        """Some text."""
        return "hello"

    @server.resource("test://bytes", mime_type="image/png")
    async def raw() -> bytes:
        """Some bytes."""
        return b"\x89PNG"

    @server.resource("test://items/{item_id}/rev/{rev}")
    async def item(item_id: str, rev: int, ctx: Context) -> dict[str, Any]:
        """An item at a revision.

        Args:
            item_id: the item.
            rev: the revision number.
        """
        if item_id == "missing":
            raise ResourceNotFound
        return {"item": item_id, "rev": rev, "session": bool(ctx.session_id)}

    @server.resource("test://broken")
    async def broken() -> str:
        """Always fails."""
        raise RuntimeError("secret detail")

    return server


@pytest.mark.spec("U-RES-1")
async def test_the_capability_is_declared_only_with_resources(autojump_clock, connect):
    """A server with resources declares resources {subscribe, listChanged} (and completions,
    for its templates); one without declares no resources capability and answers the
    resources methods with -32601."""
    s = await connect(resource_server())
    caps = s.server_capabilities
    assert caps["resources"] == {"subscribe": True, "listChanged": True}
    assert caps["completions"] == {}
    b = await connect(Server("bare"))
    assert "resources" not in b.server_capabilities
    assert "completions" not in b.server_capabilities
    with trio.fail_after(10):
        for method in ("resources/list", "resources/templates/list", "resources/read"):
            error = await error_of(b, method, {"uri": "test://text"})
            assert error["code"] == -32601


async def test_list_and_templates_list(autojump_clock, connect):
    """resources/list gives the fixed resources (uri, name, title, description, mimeType);
    resources/templates/list gives the templates (uriTemplate, name, description)."""
    s = await connect(resource_server())
    with trio.fail_after(10):
        listed = await s.request("resources/list")
        assert [r["uri"] for r in listed["resources"]] == [
            "test://broken",
            "test://bytes",
            "test://text",
        ]
        assert listed["resources"][2] == {
            "uri": "test://text",
            "name": "text",
            "title": "Text",
            "description": "Some text.",
            "mimeType": "text/plain",
        }
        assert "nextCursor" not in listed
        templates = await s.request("resources/templates/list")
        assert templates == {
            "resourceTemplates": [
                {
                    "uriTemplate": "test://items/{item_id}/rev/{rev}",
                    "name": "item",
                    "description": "An item at a revision.",
                }
            ]
        }


@pytest.mark.spec("U-PAGE-2", "U-PAGE-4", "TM-PAGE-ORDER")
async def test_pagination_and_invalid_cursors(autojump_clock, connect):
    """Lists come in pages of the configured size with an opaque nextCursor that walks the
    whole list once; an invalid cursor (or one of another list) is -32602."""
    server = Server("many")
    for i in range(7):

        async def fn() -> str:
            """A numbered resource."""
            return "x"

        server.add_resource(fn, f"test://r/{i}", name=f"r{i}")
    s = await connect(server, config=ServerConfig(page_size=3))
    with trio.fail_after(10):
        seen: list[str] = []
        params: dict[str, Any] = {}
        pages = 0
        while True:
            page = await s.request("resources/list", params)
            pages += 1
            seen += [r["uri"] for r in page["resources"]]
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
        assert pages == 3
        assert seen == [f"test://r/{i}" for i in range(7)]
        for bad in ("garbage", 42, params["cursor"][:-4]):
            error = await error_of(s, "resources/list", {"cursor": bad})
            assert error["code"] == -32602
        tools_cursor = params["cursor"]
        error = await error_of(s, "resources/templates/list", {"cursor": tools_cursor})
        assert error["code"] == -32602


@pytest.mark.spec("U-RES-3")
async def test_read_text_blob_and_template(autojump_clock, connect):
    """resources/read returns text contents for a str, base64 blob contents for bytes, and
    for a template the function gets the URI's variables (converted to its types) and a
    JSON value becomes application/json text."""
    s = await connect(resource_server())
    with trio.fail_after(10):
        assert await s.request("resources/read", {"uri": "test://text"}) == {
            "contents": [{"uri": "test://text", "mimeType": "text/plain", "text": "hello"}]
        }
        [blob] = (await s.request("resources/read", {"uri": "test://bytes"}))["contents"]
        assert blob == {"uri": "test://bytes", "mimeType": "image/png", "blob": "iVBORw=="}
        assert base64.b64decode(blob["blob"]) == b"\x89PNG"
        uri = "test://items/a%20b/rev/3"
        [item] = (await s.request("resources/read", {"uri": uri}))["contents"]
        assert item["uri"] == uri and item["mimeType"] == "application/json"
        assert item["text"] == '{"item": "a b", "rev": 3, "session": true}'


@pytest.mark.spec("J-ERR-5", "U-RES-3")
@pytest.mark.parametrize(
    "uri",
    [
        "test://nothing",
        "test://items/missing/rev/1",  # the function raises ResourceNotFound
        "test://items/a/rev/x",  # rev is an int
        "test://items/a/b/rev/1",  # a variable is one segment
        "test://text/",
    ],
)
async def test_a_missing_resource_is_32002_with_its_uri(autojump_clock, connect, uri):
    """Reading a URI that names no resource is error -32002 with data {uri}."""
    s = await connect(resource_server())
    with trio.fail_after(10):
        error = await error_of(s, "resources/read", {"uri": uri})
        assert error["code"] == -32002
        assert error["data"] == {"uri": uri}


@pytest.mark.spec("J-ERR-5")
async def test_a_failing_resource_is_an_internal_error(autojump_clock, connect):
    """A resource function that raises gives -32603, without its details on the wire."""
    s = await connect(resource_server())
    with trio.fail_after(10):
        error = await error_of(s, "resources/read", {"uri": "test://broken"})
        assert error["code"] == -32603
        assert "secret" not in str(error)


@pytest.mark.parametrize("params", [{}, {"uri": 3}, {"uri": ""}])
async def test_a_read_without_a_uri_is_invalid_params(autojump_clock, connect, params):
    """resources/read, subscribe and unsubscribe need a uri string: else -32602."""
    s = await connect(resource_server())
    with trio.fail_after(10):
        for method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            assert (await error_of(s, method, params))["code"] == -32602


async def test_subscriptions_and_updates(autojump_clock, mem):
    """resources/subscribe and unsubscribe answer {}; notify_resource_updated sends
    notifications/resources/updated {uri} on the GET stream of subscribed sessions only,
    and not after unsubscribing. Subscribing to an unknown URI is -32002."""
    server = resource_server()
    ms = await mem(server)
    a = await ms.open_session()
    b = await ms.open_session()
    with trio.fail_after(10):
        a_get = await a.get()
        b_get = await b.get()
        assert await a.result("resources/subscribe", {"uri": "test://text"}) == {}
        assert await a.result("resources/subscribe", {"uri": "test://items/1/rev/2"}) == {}
        assert (await a.error("resources/subscribe", {"uri": "test://none"}))["code"] == -32002
        assert server.notify_resource_updated("test://text") == 1
        assert server.notify_resource_updated("test://bytes") == 0
        assert await a_get.next_message() == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "test://text"},
        }
        assert await a.result("resources/unsubscribe", {"uri": "test://text"}) == {}
        assert await a.result("resources/unsubscribe", {"uri": "test://text"}) == {}
        assert server.notify_resource_updated("test://text") == 0
        assert server.notify_resource_updated("test://items/1/rev/2") == 1
        message = await a_get.next_message()
        assert message is not None and message["params"] == {"uri": "test://items/1/rev/2"}
        with trio.move_on_after(1):
            await b_get.next_message()
            raise AssertionError("an unsubscribed session got a notification")


@pytest.mark.spec("U-RES-2", "T-GET-5")
async def test_list_changed_on_add_and_remove(autojump_clock, mem):
    """Adding or removing a resource or template sends notifications/resources/list_changed
    on every session's GET stream; the lists follow."""
    server = resource_server()
    ms = await mem(server)
    s = await ms.open_session()
    with trio.fail_after(10):
        get = await s.get()

        @server.resource("test://new")
        async def new() -> str:
            """New."""
            return "new"

        server.remove_resource("test://items/{item_id}/rev/{rev}")
        for _ in range(2):
            assert await get.next_message() == {
                "jsonrpc": "2.0",
                "method": "notifications/resources/list_changed",
            }
        assert "test://new" in [r["uri"] for r in (await s.result("resources/list"))["resources"]]
        assert await s.result("resources/templates/list") == {"resourceTemplates": []}


def test_registration_checks_parameters():
    """A fixed resource takes no parameters; a template's parameters are its variables;
    the URI template's operators must be supported ones; a resource function is no generator."""
    server = Server("t")
    with pytest.raises(TypeError, match="fixed resource takes none"):

        @server.resource("test://fixed")
        async def fixed(x: str) -> str:
            return x

    with pytest.raises(TypeError, match="must be its variables"):

        @server.resource("test://{a}/{b}")
        async def partial(a: str) -> str:
            return a

    with pytest.raises(ValueError, match="not supported"):

        @server.resource("test://{;path}")
        async def matrix(path: str) -> str:
            return path

    with pytest.raises(TypeError, match="generator"):

        @server.resource("test://sync")
        def sync() -> Iterator[str]:
            yield "x"

    assert server.resources == {} and server.resource_templates == {}


def test_uri_templates_match_and_expand():
    """Level 1 templates: each {var} matches one percent-decoded segment, and expansion
    percent-encodes the value, so expand and match round-trip."""
    t = UriTemplate.parse("file:///{dir}/{name}.txt")
    assert t.variables == ("dir", "name")
    assert t.match("file:///docs/read%20me.txt") == {"dir": "docs", "name": "read me"}
    assert t.match("file:///a/b/c.txt") is None
    assert t.match("file:///docs/x.md") is None
    uri = t.expand(dir="a/b", name="ü ?")
    assert uri == "file:///a%2Fb/%C3%BC%20%3F.txt"
    assert t.match(uri) == {"dir": "a/b", "name": "ü ?"}
    with pytest.raises(ValueError, match="twice"):
        UriTemplate.parse("x://{a}/{a}")
    with pytest.raises(ValueError, match="unbalanced"):
        UriTemplate.parse("x://{a}/}")


#: Template variables that decode to an absolute path, step up, or hold a NUL: a handler
#: that joins them to a directory would leave it.
TRAVERSALS = [
    ("step-up", "..%2F..%2Fetc"),
    ("bare-step-up", ".."),
    ("encoded-step-up", "%2E%2E"),
    ("absolute", "%2Fetc%2Fpasswd"),
    ("backslash-step-up", "..%5C..%5Cwindows"),
    ("backslash-absolute", "%5Cwindows"),
    ("step-up-inside", "a%2F..%2F..%2Fb"),
    ("nul", "a%00b"),
]


@pytest.mark.spec("MU-RES-4", "U-RES-3")
@pytest.mark.parametrize("value", [t[1] for t in TRAVERSALS], ids=[t[0] for t in TRAVERSALS])
def test_a_template_variable_that_walks_out_of_a_directory_matches_nothing(value):
    """A {var} decoding to an absolute path, a .. step or a NUL names nothing."""
    t = UriTemplate.parse("file:///srv/{name}/data")

    assert t.match(f"file:///srv/{value}/data") is None


@pytest.mark.spec("MU-RES-4")
@pytest.mark.parametrize(
    ("value", "decoded"),
    [("a%2Fb", "a/b"), ("...", "..."), ("a..b", "a..b"), ("..a", "..a"), ("%2E", ".")],
)
def test_a_template_variable_that_stays_inside_still_matches(value, decoded):
    """An encoded / inside a name, or dots that are not a step up, still match."""
    t = UriTemplate.parse("file:///srv/{name}/data")

    assert {"name": decoded} == t.match(f"file:///srv/{value}/data")


def _modern_read(uri: str, rid: str) -> tuple[list[tuple[str, str]], bytes]:
    message = modern_request("resources/read", {"uri": uri}, id=rid)
    return modern_headers(message), json.dumps(message).encode()


@pytest.mark.spec("MU-RES-4", "MU-RES-2", "J-ERR-5", "U-RES-3")
@pytest.mark.parametrize("value", [t[1] for t in TRAVERSALS], ids=[t[0] for t in TRAVERSALS])
async def test_reading_a_traversal_through_a_template_is_not_found_in_either_era(
    autojump_clock, mem, value
):
    """The demo's test://template/{id}/data: -32602 for a modern read, -32002 legacy."""
    ms = await mem(demo)
    uri = f"test://template/{value}/data"
    with trio.fail_after(10):
        headers, body = _modern_read(uri, "read-1")
        modern = await (await ms.request("POST", headers, body)).next_message()
        s = await ms.open_session()
        legacy = await s.error("resources/read", {"uri": uri})

    assert modern is not None and "read-1" == modern["id"]
    assert {"code": -32602, "data": {"uri": uri}} == {
        k: v for k, v in modern["error"].items() if k != "message"
    }
    assert -32002 == legacy["code"]
    assert {"uri": uri} == legacy["data"]


@pytest.mark.spec("MU-RES-4")
async def test_an_encoded_slash_in_a_template_variable_still_reads(autojump_clock, mem):
    """test://template/a%2Fb/data reads item "a/b" in either era: only traversal is refused."""
    ms = await mem(demo)
    uri = "test://template/a%2Fb/data"
    with trio.fail_after(10):
        headers, body = _modern_read(uri, "read-2")
        modern = await (await ms.request("POST", headers, body)).next_message()
        s = await ms.open_session()
        legacy = await s.result("resources/read", {"uri": uri})

    assert modern is not None and "read-2" == modern["id"]
    for contents in (modern["result"]["contents"], legacy["contents"]):
        [item] = contents
        assert uri == item["uri"]
        assert "a/b" == json.loads(item["text"])["id"]


def test_return_values_become_contents():
    """str is text, bytes a blob, Text/Blob/EmbeddedResource/Image are themselves, lists give
    several contents, None none, other values JSON text."""
    u = "x://u"
    assert to_contents(u, None) == []
    assert to_contents(u, Text("t")) == [{"uri": u, "mimeType": "text/plain", "text": "t"}]
    assert to_contents(u, "t", "text/markdown")[0]["mimeType"] == "text/markdown"
    assert to_contents(u, b"\x00") == [
        {"uri": u, "mimeType": "application/octet-stream", "blob": "AA=="}
    ]
    assert to_contents(u, Blob(uri="x://b", data=b"\x01", mime_type=None)) == [
        {"uri": "x://b", "blob": "AQ=="}
    ]
    assert to_contents(u, EmbeddedResource(uri="x://e", text="e", mime_type="text/csv")) == [
        {"uri": "x://e", "mimeType": "text/csv", "text": "e"}
    ]
    assert to_contents(u, Image(b"\x02", "image/gif")) == [
        {"uri": u, "mimeType": "image/gif", "blob": "Ag=="}
    ]
    assert [c.get("text") for c in to_contents(u, ["a", "b"])] == ["a", "b"]
    assert to_contents(u, [1, 2]) == [{"uri": u, "mimeType": "application/json", "text": "[1, 2]"}]
    assert to_contents(u, {"k": "v"})[0]["text"] == '{"k": "v"}'


@pytest.mark.spec("U-RES-6", "U-RES-3")
@pytest.mark.parametrize(
    "uri", ["no-scheme/static", "/etc/static", "test://with space", "1x://digit-first",
            "test://{name} and more"],
)
def test_a_resource_uri_that_is_not_an_rfc_3986_uri_is_refused_at_registration(uri: str) -> None:
    """A resource (or template, once its {var} expressions are taken out) is registered only
    under a URI as RFC 3986 has it: a scheme first, and no character a URI cannot hold."""
    server = Server("uris")

    async def read() -> str:
        return "x"

    async def read_name(name: str) -> str:
        return name

    with pytest.raises(ValueError, match="not a URI"):
        server.add_resource(read_name if "{" in uri else read, uri)


@pytest.mark.spec("U-RES-6")
def test_custom_schemes_and_templates_that_follow_rfc_3986_register() -> None:
    """Custom schemes such as test: and a+b.c-d:, and templates, register."""
    server = Server("uris")

    async def read() -> str:
        return "x"

    async def read_id(id: str) -> str:
        return id

    server.add_resource(read, "test://static")
    server.add_resource(read, "a+b.c-d:opaque/path?q=1#f")
    server.add_resource(read_id, "file:///data/{id}.txt")

    assert {"test://static", "a+b.c-d:opaque/path?q=1#f"} == set(server.resources)
    assert {"file:///data/{id}.txt"} == set(server.resource_templates)
