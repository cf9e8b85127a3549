"""The skills extension (SEP-2640, spec/extensions.md): skills from a folder tree or from
code, skills/list, skills/get, resources/directory/read, digests and sizes, frontmatter
checked at load, and what a hostile tree or URI gets."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
from feat_support import InProcess, error_of
from support.eras import LEGACY
from support.modern import MODERN

from trio_mcp import Server, ServerConfig, Skill, SkillError, SkillLimits, Skills
from trio_mcp.demo import server as demo

SKILL_MD = "---\nname: {name}\ndescription: {description}\n{extra}---\n\n# {name}\n\nBody.\n"


def skill_md(name: str, description: str = "Does a thing", extra: str = "") -> str:
    return SKILL_MD.format(name=name, description=description, extra=extra)


def write(root: Path, files: Mapping[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def sha(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def tree(tmp_path: Path) -> Path:
    return write(tmp_path / "skills", {
        "pdf-processing/SKILL.md": skill_md(
            "pdf-processing", "Extract, fill, and assemble PDF documents",
            "license: Apache-2.0\nmetadata:\n  version: \"2.1.0\"\nflag: yes\nwhen: 2026-01-01\n",
        ),
        "pdf-processing/references/FORMS.md": "# Forms\n",
        "pdf-processing/templates/regional/eu-invoice.md": "# EU\n",
        "pdf-processing/scripts/blob.bin": b"\x00\xff\xfe",
        "acme/billing/refunds/SKILL.md": skill_md("refunds", "Process refunds"),
        "acme/billing/refunds/examples/email.md": "Dear customer,\n",
        "acme/billing/refunds/.git/config": "[core]\n",
        "acme/billing/refunds/.DS_Store": b"\0",
    })


@pytest.fixture
def skills_tree(tmp_path: Path) -> Path:
    return tree(tmp_path)


@pytest.mark.spec("TM-SKILL-TREE", "SK-ENTRY", "SK-DIGEST", "SK-FRONTMATTER", "TM-SKILL-YAML")
def test_a_tree_loads_every_skill_with_its_files_digested(skills_tree: Path) -> None:
    """Each folder with a SKILL.md is a skill at its path under the root; its entry lists
    every file once, SKILL.md first, with the SHA-256 of its raw bytes and their count (no
    dotfile or dot-folder); the frontmatter is every field as YAML 1.2 reads it (yes and
    dates stay strings)."""
    skills = Skills(skills_tree).skills
    pdf = skills["skill://pdf-processing/SKILL.md"].entry()
    refunds = skills["skill://acme/billing/refunds/SKILL.md"].entry()
    md = (skills_tree / "pdf-processing/SKILL.md").read_bytes()

    assert {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents",
            "license": "Apache-2.0", "metadata": {"version": "2.1.0"}, "flag": "yes",
            "when": "2026-01-01"} == pdf["frontmatter"]
    assert [
        {"uri": "skill://pdf-processing/SKILL.md", "digest": sha(md), "size": len(md)},
        {"uri": "skill://pdf-processing/references/FORMS.md", "digest": sha("# Forms\n"),
         "size": 8},
        {"uri": "skill://pdf-processing/scripts/blob.bin", "digest": sha(b"\x00\xff\xfe"),
         "size": 3},
        {"uri": "skill://pdf-processing/templates/regional/eu-invoice.md",
         "digest": sha("# EU\n"), "size": 5},
    ] == pdf["resources"]
    assert ["skill://acme/billing/refunds/SKILL.md",
            "skill://acme/billing/refunds/examples/email.md"] == [
        r["uri"] for r in refunds["resources"]]


@pytest.mark.spec("SK-CAPABILITY", "SK-LIST", "SK-GET", "SK-RESOURCES", "SK-METADATA")
async def test_list_get_and_read_in_both_eras(autojump_clock, connect, skills_tree: Path):
    """The server declares the extension with directoryRead; skills/list pages the entries
    (none split), skills/get answers a served skill and -32602 for another URI, with
    caching hints in 2026-07-28; SKILL.md reads back as text/markdown with the listed bytes,
    a binary file as a blob; SKILL.md's resource is named and described by its
    frontmatter."""
    server = Server("skills", extensions=[Skills(skills_tree)])
    served = InProcess(connect, server, config=ServerConfig(page_size=1))
    with trio.fail_after(10):
        session = await served.client(LEGACY)
        first = await session.request("skills/list")
        second = await session.request("skills/list", {"cursor": first["nextCursor"]})
        got = await session.request("skills/get", {"uri": "skill://pdf-processing/SKILL.md"})
        unknown = await error_of(session, "skills/get", {"uri": "skill://nope/SKILL.md"})
        read = await session.read_resource("skill://pdf-processing/SKILL.md")
        blob = await session.read_resource("skill://pdf-processing/scripts/blob.bin")
        listed = await session.list_resources()
        modern_get = await served.rpc(MODERN, "skills/get",
                                      {"uri": "skill://pdf-processing/SKILL.md"})
        modern_list = await served.rpc(MODERN, "skills/list")
        modern_unknown = await served.rpc(MODERN, "skills/get", {"uri": 7})

    caps = session.server_capabilities
    assert {"io.modelcontextprotocol/skills": {"directoryRead": True}} == caps["extensions"]
    assert "resources" in caps
    assert ["skill://acme/billing/refunds/SKILL.md"] == [s["uri"] for s in first["skills"]]
    assert ["skill://pdf-processing/SKILL.md"] == [s["uri"] for s in second["skills"]]
    assert "nextCursor" not in second and "nextCursor" not in got
    assert second["skills"][0] == got["skill"]
    assert -32602 == unknown["code"] == modern_unknown["error"]["code"]
    [content] = read["contents"]
    assert "text/markdown" == content["mimeType"]
    md = (skills_tree / "pdf-processing/SKILL.md").read_bytes()
    assert got["skill"]["resources"][0]["digest"] == sha(content["text"].encode()) == sha(md)
    assert b"\x00\xff\xfe" == base64.b64decode(blob["contents"][0]["blob"])
    [md_resource] = [r for r in listed if r["uri"] == "skill://pdf-processing/SKILL.md"]
    assert ("pdf-processing", "Extract, fill, and assemble PDF documents", "text/markdown") == (
        md_resource["name"], md_resource["description"], md_resource["mimeType"])
    assert {"ttlMs", "cacheScope"} <= set(modern_get["result"]) & set(modern_list["result"])


@pytest.mark.spec("SK-DIRECTORY")
async def test_directory_read_lists_direct_children_and_refuses_the_rest(
    autojump_clock, connect, skills_tree: Path
):
    """resources/directory/read lists a folder's direct children (subfolders as
    inode/directory), pages them, and answers -32602 for a file, an unknown URI, a trailing
    slash and any walk out of the tree; without directoryRead it is not a method."""
    with trio.fail_after(10):
        session = await connect(Server("skills", extensions=[Skills(skills_tree)]),
                                config=ServerConfig(page_size=2))
        off = await connect(Server("off", extensions=[Skills(skills_tree, directory_read=False)]))
        first = await session.request("resources/directory/read",
                                     {"uri": "skill://pdf-processing"})
        rest = await session.request("resources/directory/read",
                                    {"uri": "skill://pdf-processing",
                                     "cursor": first["nextCursor"]})
        regional = await session.request("resources/directory/read",
                                        {"uri": "skill://pdf-processing/templates"})
        refused = [
            (await error_of(session, "resources/directory/read", {"uri": uri}))["code"]
            for uri in ("skill://pdf-processing/SKILL.md", "skill://pdf-processing/",
                        "skill://pdf-processing/../acme", "skill://pdf-processing/%2e%2e",
                        "file:///etc", "skill://acme/billing/refunds/../../../..", None)
        ]
        traversal = await error_of(
            session, "resources/read", {"uri": "skill://pdf-processing/../../etc/passwd"})
        not_served = await error_of(
            off, "resources/directory/read", {"uri": "skill://pdf-processing"})

    children = first["resources"] + rest["resources"]
    assert [
        ("skill://pdf-processing/SKILL.md", "text/markdown"),
        ("skill://pdf-processing/references", "inode/directory"),
        ("skill://pdf-processing/scripts", "inode/directory"),
        ("skill://pdf-processing/templates", "inode/directory"),
    ] == [(c["uri"], c["mimeType"]) for c in children]
    assert [("skill://pdf-processing/templates/regional", "inode/directory")] == [
        (c["uri"], c["mimeType"]) for c in regional["resources"]]
    assert {-32602} == set(refused)
    assert traversal["code"] in (-32002, -32602)
    assert -32601 == not_served["code"]


@pytest.mark.spec("SK-FORMAT", "SK-NAME", "SK-RESERVED", "TM-SKILL-LOAD", "SK-FRONTMATTER",
                  "TM-SKILL-YAML")
@pytest.mark.parametrize(("files", "message"), [
    ({"x/README.md": "no skill"}, None),
    ({"Bad/SKILL.md": skill_md("Bad")}, r"Bad/SKILL.md: frontmatter field 'name': 'Bad'"),
    ({"a/SKILL.md": skill_md("b")}, r"a/SKILL.md: frontmatter field 'name': 'b' is not the"),
    ({"a--b/SKILL.md": skill_md("a--b")}, r"field 'name'"),
    ({"a/SKILL.md": "# no frontmatter\n"}, r"a/SKILL.md: does not begin with YAML frontmatter"),
    ({"a/SKILL.md": "---\nname: a\n---\n"}, r"a/SKILL.md: frontmatter field 'description'"),
    ({"a/SKILL.md": skill_md("a", extra="license: 3\n")}, r"field 'license' is a string"),
    ({"a/SKILL.md": skill_md("a", extra="metadata:\n  io.modelcontextprotocol/x: y\n")},
     r"field 'metadata.io.modelcontextprotocol/x'"),
    ({"a/SKILL.md": skill_md("a", extra="metadata:\n  n: 1\n")}, r"field 'metadata.n'"),
    ({"a/SKILL.md": skill_md("a", extra="x: !!float .nan\n")}, r"field 'x'"),
    ({"a/SKILL.md": skill_md("a", extra="a: &x [1]\nb: *x\n")}, r"aliases are not accepted"),
    ({"a/SKILL.md": skill_md("a", extra="x: [unclosed\n")}, r"a/SKILL.md: frontmatter is not"),
    ({"a/SKILL.md": b"---\nname: a\xff\n---\n"}, r"a/SKILL.md: not UTF-8"),
    ({"a/SKILL.md": skill_md("a", "d" * 1025)}, r"field 'description': more than 1024"),
    ({"a/SKILL.md": skill_md("a"), "a/my notes.md": "x"},
     r"my notes.md: file path segment 'my notes.md' is not a plain URI segment"),
    ({"a/SKILL.md": skill_md("a", extra="x: " + "[" * 5000 + "]" * 5000 + "\n")},
     r"a/SKILL.md: frontmatter nested too deeply"),
])
def test_a_bad_skill_is_refused_at_load_naming_file_and_field(
    tmp_path: Path, files: Mapping[str, str | bytes], message: str | None
) -> None:
    """Frontmatter that breaks the Agent Skills format or that JSON cannot carry stops the
    load with a SkillError naming the file and the field; a folder without SKILL.md is no
    skill."""
    root = write(tmp_path / "t", files)
    if message is None:
        assert {} == Skills(root).skills
        return
    with pytest.raises(SkillError, match=message):
        Skills(root)


@pytest.mark.spec("TM-SKILL-BOUNDS")
def test_a_hostile_tree_is_refused_cleanly(tmp_path: Path) -> None:
    """A symlink out of the tree, a symlinked folder, a FIFO, a file over a skill's size, a
    skill of more files than allowed and a tree of 10,000 files are each refused with a
    SkillError naming the path, without reading what lies outside."""
    outside = write(tmp_path / "outside", {"secret.txt": "secret"})

    def fresh(name: str) -> Path:
        return write(tmp_path / name, {"a/SKILL.md": skill_md("a")})

    out = fresh("symlink-out")
    (out / "a" / "leak.txt").symlink_to(outside / "secret.txt")
    loop = fresh("symlink-dir")
    (loop / "a" / "again").symlink_to(loop / "a", target_is_directory=True)
    fifo = fresh("fifo")
    os.mkfifo(fifo / "a" / "pipe")
    big = fresh("big")
    (big / "a" / "huge.bin").write_bytes(b"\0" * 2048)
    many = fresh("many")
    for i in range(20):
        (many / "a" / f"f{i}.md").write_text("x")
    vast = tmp_path / "vast" / "a"
    vast.mkdir(parents=True)
    for i in range(10_000):
        (vast / f"{i}.md").touch()

    with pytest.raises(SkillError, match=r"leak.txt: a symlink out of the skill tree"):
        Skills(out)
    with pytest.raises(SkillError, match=r"again: a symlink to a folder"):
        Skills(loop)
    with pytest.raises(SkillError, match=r"pipe: not a regular file"):
        Skills(fifo)
    with pytest.raises(SkillError, match=r"huge.bin: 2048 bytes"):
        Skills(big, limits=SkillLimits(bytes_per_skill=1024))
    with pytest.raises(SkillError, match=r"21 files, more than the 10"):
        Skills(many, limits=SkillLimits(files_per_skill=10))
    with pytest.raises(SkillError, match=r"more than 4096 files and folders"):
        Skills(tmp_path / "vast")
    inside = fresh("inside")
    (inside / "a" / "alias.md").symlink_to(inside / "a" / "SKILL.md")
    assert 2 == len(Skills(inside).skills["skill://a/SKILL.md"].files)


@pytest.mark.spec("TM-SKILL-TREE", "TM-SKILL-LOAD")
def test_skills_from_code_follow_the_same_rules() -> None:
    """Skill.from_files builds a skill in code under the tree's rules: its path's last
    segment is its name, SKILL.md is required, a path may not step out."""
    skill = Skill.from_files("acme/tools", {"SKILL.md": skill_md("tools"), "a/b.txt": "b"})
    assert "skill://acme/tools/SKILL.md" == skill.uri
    with pytest.raises(SkillError, match=r"SKILL.md: missing"):
        Skill.from_files("x", {"a.md": "a"})
    with pytest.raises(SkillError, match=r"segment '..'"):
        Skill.from_files("x", {"SKILL.md": skill_md("x"), "../y": "y"})
    with pytest.raises(SkillError, match=r"two skills at one URI"):
        Skills(skill, skill)


@pytest.mark.spec("SK-CAPABILITY", "SK-LIST")
async def test_the_demo_serves_two_skills(autojump_clock, connect):
    """The demo declares the skills extension and lists two skills, each with a subfolder."""
    with trio.fail_after(10):
        listed = await (await connect(demo, MODERN)).request("skills/list")

    assert 2 == len(listed["skills"])
    assert all(any(r["uri"].count("/") > 3 for r in s["resources"]) for s in listed["skills"])


@pytest.mark.spec("SK-CAPABILITY", "SK-LIST")
async def test_a_server_with_no_skill_yet_declares_resources_and_lists_none(
    autojump_clock, connect
):
    """Skills() with no skill still declares the extension and the resources capability its
    files are read through, and skills/list answers an empty list."""
    served = InProcess(connect, Server("empty", extensions=[Skills()]))
    with trio.fail_after(10):
        session = await served.client(LEGACY)
        listed = await session.request("skills/list")
        discovered = (await served.rpc(MODERN, "server/discover"))["result"]

    assert "resources" in session.server_capabilities
    assert "resources" in discovered["capabilities"]
    assert {"directoryRead": True} == discovered["capabilities"]["extensions"][
        "io.modelcontextprotocol/skills"]
    assert [] == listed["skills"]
