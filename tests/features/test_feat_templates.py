# Resource templates beyond level 1 (issue 40, spec/handlers.md TM-HAND-TEMPLATE): the RFC
# 6570 expressions a resource URI uses, matched with their values decoded, expanded, and
# screened for a walk out of a directory unless the resource opts out; read end to end in
# both eras through trio_mcp.Client(server).

from __future__ import annotations

from typing import Any

import pytest
import trio
from feat_support import Connect, InProcess
from support.eras import ERAS

from trio_mcp import Server
from trio_mcp.app._uritemplate import UriTemplate

TIMEOUT = 20

pytestmark = pytest.mark.spec("TM-HAND-TEMPLATE")


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("file:///{+path}", "file:///docs/guide/intro.md", {"path": "docs/guide/intro.md"}),
        ("file:///{+path}", "file:///a%20b/c", {"path": "a b/c"}),
        ("repo://x{/parts*}", "repo://x/src/app/main.py", {"parts": ["src", "app", "main.py"]}),
        ("repo://x{/owner,name}", "repo://x/trio/mcp", {"owner": "trio", "name": "mcp"}),
        ("logs://app{.ext}", "logs://app.json", {"ext": "json"}),
        ("doc://page{#section}", "doc://page#intro", {"section": "intro"}),
        ("search://items{?q,limit}", "search://items?limit=5&q=a%20b", {"q": "a b", "limit": "5"}),
        ("search://items{?q,limit}", "search://items", {}),
        ("search://items{?q}{&page}", "search://items?q=x&page=2", {"q": "x", "page": "2"}),
        ("user://{id}/posts{?sort}", "user://7/posts?sort=new&other=1", {"id": "7", "sort": "new"}),
    ],
)
def test_level_4_expressions_match_with_their_values_decoded(
    template: str, uri: str, expected: dict[str, Any]
) -> None:
    """{+var} takes a path, {/var*} a list of segments, {?a,b} and {&c} query parameters in
    any order (others ignored), each value percent-decoded."""
    assert expected == UriTemplate.parse(template).match(uri)


@pytest.mark.parametrize(
    ("template", "values"),
    [
        ("file:///{+path}", {"path": "a b/c.md"}),
        ("repo://x{/parts*}", {"parts": ["src", "a b"]}),
        ("search://items{?q,limit}", {"q": "a&b", "limit": "5"}),
        ("logs://app{.ext}", {"ext": "json"}),
        ("user://{id}", {"id": "a/b"}),
    ],
)
def test_expansion_and_matching_round_trip(template: str, values: dict[str, Any]) -> None:
    """A URI expanded from values matches back to those values."""
    parsed = UriTemplate.parse(template)
    assert values == parsed.match(parsed.expand(**values))


@pytest.mark.parametrize(
    "uri",
    [
        "file:///docs/../../etc/passwd", "file:///%2E%2E/x", "file:////etc/passwd",
        "file:///C:/windows", "file:///a%00b", "file:///a/..%5C..%5Cb",
    ],
)
def test_a_path_value_that_walks_out_is_screened(uri: str) -> None:
    """A {+path} value holding a .. step, an absolute path (/x, C:/x) or a NUL matches
    nothing, unless screening is turned off."""
    template = UriTemplate.parse("file:///{+path}")
    assert template.match(uri) is None
    assert template.match(uri, screen=False) is not None


def test_unsupported_expressions_are_refused_naming_them() -> None:
    """Operators the resource URIs do not need (;), prefixes (:3), an exploded variable
    outside {/...*}, and literals after the query are refused at registration."""
    for template, message in [
        ("x://{;a}", "not supported"), ("x://{a:3}", "prefixes"), ("x://{+a*}", "explode"),
        ("x://a{?q}/b", "come last"),
    ]:
        with pytest.raises(ValueError, match=message):
            UriTemplate.parse(template)


def files_server() -> Server:
    server = Server("files")
    store = {"docs/intro.md": "Hello", "docs/deep/x.md": "Deep"}

    @server.resource("file:///{+path}")
    async def file(path: str) -> str:
        """A file under the root."""
        return store[path]

    @server.resource("tree://root{/parts*}")
    async def tree(parts: list[str]) -> str:
        """The path's segments."""
        return "|".join(parts)

    @server.resource("search://notes{?q,limit}")
    async def search(q: str, limit: int = 10) -> str:
        """A search."""
        return f"{q}:{limit}"

    @server.resource("raw://{+path}", screen_paths=False)
    async def raw(path: str) -> str:
        """Opted out of screening: gets what was written."""
        return path

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_templates_read_end_to_end_and_a_traversal_is_not_found(
    connect: Connect, era: str
) -> None:
    """Reads through {+path}, {/parts*} and {?q,limit} reach their functions with the values
    converted; a traversal through {+path} is not found; a missing required query parameter
    names nothing; a resource that opted out gets the raw value."""
    served = InProcess(connect, files_server())
    with trio.fail_after(TIMEOUT):
        reads = {uri: await served.rpc(era, "resources/read", {"uri": uri}) for uri in (
            "file:///docs/deep/x.md", "tree://root/a/b%20c", "search://notes?limit=3&q=trio",
            "file:///docs/../../etc/passwd", "search://notes?limit=3", "raw://../up",
        )}
        listed = await served.rpc(era, "resources/templates/list")

    def text(uri: str) -> str:
        return str(reads[uri]["result"]["contents"][0]["text"])

    assert "Deep" == text("file:///docs/deep/x.md")
    assert "a|b c" == text("tree://root/a/b%20c")
    assert "trio:3" == text("search://notes?limit=3&q=trio")
    assert "../up" == text("raw://../up")
    for missing in ("file:///docs/../../etc/passwd", "search://notes?limit=3"):
        assert reads[missing]["error"]["code"] in (-32002, -32602), reads[missing]
    assert {"file:///{+path}", "tree://root{/parts*}", "search://notes{?q,limit}",
            "raw://{+path}"} == {t["uriTemplate"] for t in listed["result"]["resourceTemplates"]}


async def test_a_template_variable_completes(connect: Connect) -> None:
    """completion/complete names a level 4 template's variables as it does level 1's."""
    server = files_server()

    @server.completion("resource", "file:///{+path}", "path")
    async def paths(value: str) -> list[str]:
        return [p for p in ("docs/intro.md", "docs/deep/x.md") if p.startswith(value)]

    served = InProcess(connect, server)
    with trio.fail_after(TIMEOUT):
        answer = await served.rpc(ERAS[1], "completion/complete", {
            "ref": {"type": "ref/resource", "uri": "file:///{+path}"},
            "argument": {"name": "path", "value": "docs/d"},
        })
    assert ["docs/deep/x.md"] == answer["result"]["completion"]["values"]
