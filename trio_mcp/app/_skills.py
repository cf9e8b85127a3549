# The Skills extension (SEP-2640, io.modelcontextprotocol/skills): Agent Skills (a folder with
# a SKILL.md that begins with YAML frontmatter, plus files) served as skill:// resources, with
# skills/list, skills/get and resources/directory/read. Skills come from a directory tree or
# from code; everything is read, checked and digested once, when the extension is made, so a
# bad skill fails the server's start with the file and field named, and nothing a client
# sends ever reaches the file system (TM-SKILL-LOAD). Rules: spec/extensions.md.
from __future__ import annotations

import hashlib
import math
import mimetypes
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import yaml

from ..protocol import ErrorCode, RemoteProtocolError
from ._context import Context
from ._extension import Extension, ExtensionMethod
from ._pagination import list_result

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["SKILLS_EXTENSION", "Skill", "SkillError", "SkillLimits", "Skills"]

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
SKILL_MD = "SKILL.md"
DIRECTORY_MIME = "inode/directory"
#: Agent Skills: 1-64 lowercase alphanumerics and hyphens, no hyphen first, last or doubled.
_NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
#: A path segment the skill:// URI carries as it is: RFC 3986 unreserved characters.
_SEGMENT = re.compile(r"^[A-Za-z0-9._~-]+$")
_FRONTMATTER = re.compile(r"^---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


class SkillError(ValueError):
    """A skill that cannot be served: the message names the file and, for frontmatter, the
    field."""


@attrs.frozen(kw_only=True)
class SkillLimits:
    """What a skill tree may hold (TM-SKILL-BOUNDS). The per-skill bounds are SEP-2640's
    (512 files, 16 MiB); the tree's keep a mistaken root (``/``, a home directory) from
    being walked and held in memory."""

    files_per_skill: int = 512
    bytes_per_skill: int = 16 * 1024 * 1024
    #: Files and folders walked in one tree, and their depth.
    entries: int = 4096
    depth: int = 16
    #: Everything the extension holds, over all skills.
    total_bytes: int = 64 * 1024 * 1024
    #: The frontmatter block of a SKILL.md.
    frontmatter_bytes: int = 64 * 1024


@attrs.frozen
class SkillFile:
    """One file of a skill: its path in the skill (``references/FORMS.md``) and bytes."""

    path: str
    data: bytes = attrs.field(repr=False)
    digest: str
    mime_type: str

    @property
    def size(self) -> int:
        return len(self.data)


@attrs.frozen(kw_only=True)
class Skill:
    """A skill: its skill-path (``git-workflow``, ``acme/billing/refunds``), its
    frontmatter as parsed, and its files, SKILL.md first."""

    path: str
    frontmatter: Mapping[str, Any]
    files: tuple[SkillFile, ...]
    body: str = attrs.field(repr=False)

    @classmethod
    def from_files(
        cls,
        path: str,
        files: Mapping[str, bytes | str],
        *,
        origin: str | None = None,
        limits: SkillLimits | None = None,
    ) -> Skill:
        """A skill from code: ``files`` maps each path in the skill (``SKILL.md``,
        ``references/guide.md``) to its bytes or text (UTF-8).

        Raises:
            SkillError: naming the file (under ``origin``, by default ``skill://path``) and
                the field that is wrong.
        """
        limits = limits or SkillLimits()
        where = origin or f"skill://{path}"
        _check_skill_path(path, where)
        if len(files) > limits.files_per_skill:
            raise SkillError(
                f"{where}: {len(files)} files, more than the {limits.files_per_skill} a skill "
                "may hold"
            )
        made: list[SkillFile] = []
        total = 0
        for name, content in files.items():
            _check_file_path(name, f"{where}/{name}")
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            total += len(data)
            if total > limits.bytes_per_skill:
                raise SkillError(
                    f"{where}: more than {limits.bytes_per_skill} bytes of files (at {name})"
                )
            made.append(_file(name, data))
        skill_md = next((f for f in made if f.path == SKILL_MD), None)
        if skill_md is None:
            raise SkillError(f"{where}/{SKILL_MD}: missing; every skill has one at its root")
        frontmatter, body = parse_frontmatter(
            skill_md.data, f"{where}/{SKILL_MD}", limits.frontmatter_bytes
        )
        check_frontmatter(frontmatter, f"{where}/{SKILL_MD}", PurePosixPath(path).name)
        ordered = (skill_md, *sorted((f for f in made if f is not skill_md), key=lambda f: f.path))
        return cls(path=path, frontmatter=frontmatter, files=ordered, body=body)

    @property
    def name(self) -> str:
        return str(self.frontmatter["name"])

    @property
    def root(self) -> str:
        """The skill's directory resource, ``skill://<skill-path>`` (no trailing slash)."""
        return f"skill://{self.path}"

    @property
    def uri(self) -> str:
        return f"{self.root}/{SKILL_MD}"

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def entry(self) -> dict[str, Any]:
        """SK-ENTRY: the skills/list and skills/get entry: uri, the frontmatter verbatim, and
        every file with its digest and size."""
        return {
            "uri": self.uri,
            "frontmatter": _json_copy(self.frontmatter),
            "resources": [
                {"uri": f"{self.root}/{f.path}", "digest": f.digest, "size": f.size}
                for f in self.files
            ],
        }


def _file(path: str, data: bytes) -> SkillFile:
    if path == SKILL_MD or path.endswith(f"/{SKILL_MD}"):
        mime = "text/markdown"
    else:
        mime = mimetypes.guess_type(path)[0] or (
            "text/plain" if _is_text(data) else "application/octet-stream"
        )
    # SK-DIGEST: SHA-256 of the raw bytes, sha256:{64 lowercase hex}.
    return SkillFile(path, data, "sha256:" + hashlib.sha256(data).hexdigest(), mime)


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _check_skill_path(path: object, where: str) -> None:
    if not isinstance(path, str) or not path:
        raise SkillError(f"{where}: a skill path is a non-empty string")
    for segment in path.split("/"):
        if not _SEGMENT.match(segment) or segment in (".", ".."):
            raise SkillError(
                f"{where}: skill path segment {segment!r} is not a plain URI segment "
                "(letters, digits, '.', '_', '~', '-')"
            )


def _check_file_path(path: object, where: str) -> None:
    if not isinstance(path, str) or not path:
        raise SkillError(f"{where}: a file path is a non-empty string")
    for segment in path.split("/"):
        if not _SEGMENT.match(segment) or segment in (".", ".."):
            raise SkillError(
                f"{where}: file path segment {segment!r} is not a plain URI segment "
                "(letters, digits, '.', '_', '~', '-')"
            )


# -- frontmatter ------------------------------------------------------------------------------


_YAML11_ONLY = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("bool", "timestamp", "int", "float")
)


class _FrontmatterLoader(yaml.SafeLoader):
    """YAML as the JSON data model: true/false only as booleans (``yes``/``on`` stay
    strings, as in YAML 1.2 and the TypeScript hosts' parser), dates left as strings, and
    no aliases (a few bytes of anchors can stand for a structure too big to render)."""

    yaml_implicit_resolvers = {  # noqa: RUF012 - PyYAML's own class attribute
        key: [(tag, regexp) for tag, regexp in resolvers
              if tag not in _YAML11_ONLY]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases are not accepted in frontmatter", event.start_mark
            )
        return super().compose_node(parent, index)


# YAML 1.2's core schema for the scalars YAML 1.1 reads otherwise (``yes``, ``1:20``, ``010``,
# ``2026-01-01``): what a host's YAML 1.2 parser reads from the same SKILL.md (TM-SKILL-YAML).
_FrontmatterLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
_FrontmatterLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_FrontmatterLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


def parse_frontmatter(data: bytes, where: str, limit: int) -> tuple[dict[str, Any], str]:
    """SK-FRONTMATTER: the YAML frontmatter a SKILL.md begins with, and the body after it.

    Raises:
        SkillError: no frontmatter block, one over ``limit`` bytes, YAML that does not parse
            or is not a mapping of JSON values.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    text = text.removeprefix("\ufeff")
    match = _FRONTMATTER.match(text)
    if match is None:
        raise SkillError(
            f"{where}: does not begin with YAML frontmatter (a '---' line, the YAML, a '---' "
            "line)"
        )
    block = match.group(1)
    if len(block.encode("utf-8")) > limit:
        raise SkillError(f"{where}: frontmatter of more than {limit} bytes")
    try:
        value = yaml.load(block, Loader=_FrontmatterLoader)  # a SafeLoader: no Python objects
        if not isinstance(value, dict):
            raise SkillError(f"{where}: frontmatter is not a mapping of fields")
        _check_json(value, where, "")
    except RecursionError:
        # PyYAML's composer and the check recurse: [[[[...]]]] within the size limit.
        raise SkillError(f"{where}: frontmatter nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (frontmatter line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SkillError(f"{where}: frontmatter is not valid YAML{line}: {problem}") from None
    return value, text[match.end():]


def _check_json(value: Any, where: str, field: str) -> None:
    """That ``value`` is JSON as it is (what skills/list carries verbatim)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SkillError(
                    f"{where}: frontmatter field {field or '(top level)'}: key {key!r} is not "
                    "a string"
                )
            _check_json(item, where, f"{field}.{key}" if field else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, where, f"{field}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise SkillError(f"{where}: frontmatter field {field!r}: {value} is not a JSON number")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        raise SkillError(
            f"{where}: frontmatter field {field!r}: a {type(value).__name__} is not a JSON value"
        )


def check_frontmatter(frontmatter: Mapping[str, Any], where: str, directory: str) -> None:
    """SK-NAME, SK-FORMAT: the Agent Skills fields: ``name`` (the naming rules, and the
    skill's folder), ``description`` (1-1024 characters), and the optional ``license``,
    ``compatibility`` (up to 500), ``allowed-tools`` strings and ``metadata`` (strings by
    string keys, none under the reserved io.modelcontextprotocol/ prefix).

    Raises:
        SkillError: naming ``where`` and the field.
    """
    name = frontmatter.get("name")
    if not isinstance(name, str) or not name:
        raise SkillError(f"{where}: frontmatter field 'name' is required (a string)")
    if not _NAME.match(name):
        raise SkillError(
            f"{where}: frontmatter field 'name': {name!r} is not 1-64 lowercase letters, digits "
            "and single hyphens, with no hyphen first or last"
        )
    if name != directory:
        raise SkillError(
            f"{where}: frontmatter field 'name': {name!r} is not the skill's folder "
            f"{directory!r} (the last segment of its skill path)"
        )
    description = frontmatter.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{where}: frontmatter field 'description' is required (a string)")
    if len(description) > 1024:
        raise SkillError(f"{where}: frontmatter field 'description': more than 1024 characters")
    for field, most in (("license", None), ("compatibility", 500), ("allowed-tools", None)):
        value = frontmatter.get(field)
        if value is None and field not in frontmatter:
            continue
        if not isinstance(value, str):
            raise SkillError(f"{where}: frontmatter field {field!r} is a string")
        if most is not None and len(value) > most:
            raise SkillError(f"{where}: frontmatter field {field!r}: more than {most} characters")
    if "metadata" in frontmatter:
        metadata = frontmatter["metadata"]
        if not isinstance(metadata, dict):
            raise SkillError(f"{where}: frontmatter field 'metadata' is a mapping")
        for key, value in metadata.items():
            if not isinstance(value, str):
                raise SkillError(f"{where}: frontmatter field 'metadata.{key}' is a string")
            if key.startswith("io.modelcontextprotocol/"):
                # SK-RESERVED: keys under this prefix are the MCP extensions'; none defined.
                raise SkillError(
                    f"{where}: frontmatter field 'metadata.{key}': the io.modelcontextprotocol/ "
                    "prefix is reserved"
                )


def _json_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


# -- a directory tree -------------------------------------------------------------------------


def load_tree(root: Path, limits: SkillLimits) -> list[Skill]:
    """TM-SKILL-TREE: every folder under ``root`` holding a SKILL.md is a skill, its skill-path
    the folder's path under ``root`` (``root`` itself, if it holds one, is a skill named for
    it); a skill's files are every file under its folder, those of skills nested in it too,
    but dotfiles and dot-folders (``.git``), which are skipped.

    Raises:
        SkillError: naming the file: a symlink out of the tree, a special file, a tree over
            ``limits``, or a skill that does not load.
    """
    root = Path(root)
    try:
        base = root.resolve(strict=True)
    except OSError as exc:
        raise SkillError(f"{root}: cannot be read ({exc.strerror or exc})") from None
    if not base.is_dir():
        raise SkillError(f"{root}: not a folder of skills")
    files: dict[str, bytes] = {}
    folders: list[str] = []
    entries = 0
    total = 0
    # TM-SKILL-BOUNDS: an explicit stack, not os.walk: symlinked folders are never entered
    # (a loop, or a walk out of the tree), and the count stops a vast tree early.
    stack = [("", 0)]
    while stack:
        rel, depth = stack.pop()
        folder = base / rel if rel else base
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise SkillError(f"{folder}: cannot be listed ({exc.strerror or exc})") from None
        entries += len(children)
        if entries > limits.entries:
            raise SkillError(
                f"{root}: more than {limits.entries} files and folders; a skill tree that big "
                "is refused (SkillLimits.entries)"
            )
        if rel:
            folders.append(rel)
        for child in children:
            if child.name.startswith("."):
                # A dotfile or dot-folder (.git, .DS_Store) is no part of a skill.
                continue
            child_rel = f"{rel}/{child.name}" if rel else child.name
            where = root / child_rel
            if child.is_symlink():
                target = Path(os.path.realpath(child.path))
                if not target.is_relative_to(base):
                    raise SkillError(f"{where}: a symlink out of the skill tree (to {target})")
                if target.is_dir():
                    raise SkillError(f"{where}: a symlink to a folder; folders are not followed")
            try:
                info = os.stat(child.path)
            except OSError as exc:
                raise SkillError(f"{where}: cannot be read ({exc.strerror or exc})") from None
            if stat.S_ISDIR(info.st_mode):
                if depth + 1 > limits.depth:
                    raise SkillError(f"{where}: deeper than {limits.depth} folders")
                stack.append((child_rel, depth + 1))
                continue
            if not stat.S_ISREG(info.st_mode):
                raise SkillError(f"{where}: not a regular file (a pipe, socket or device)")
            if info.st_size > limits.bytes_per_skill:
                raise SkillError(
                    f"{where}: {info.st_size} bytes, more than a skill may hold "
                    f"({limits.bytes_per_skill})"
                )
            total += info.st_size
            if total > limits.total_bytes:
                raise SkillError(f"{root}: more than {limits.total_bytes} bytes of files")
            files[child_rel] = _read(child.path, limits.bytes_per_skill, where)
    homes = sorted(
        {p.rpartition("/")[0] for p in files if p == SKILL_MD or p.endswith(f"/{SKILL_MD}")}
    )
    skills = []
    for home in homes:
        prefix = f"{home}/" if home else ""
        path = home or base.name
        own = {p[len(prefix):]: data for p, data in files.items() if p.startswith(prefix)}
        skills.append(
            Skill.from_files(path, own, origin=str(root / home) if home else str(root),
                             limits=limits)
        )
    return skills


def _read(path: str, most: int, where: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(most + 1)
    except OSError as exc:
        raise SkillError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > most:
        # It grew between the stat and the read.
        raise SkillError(f"{where}: more than {most} bytes")
    return data


# -- the extension ----------------------------------------------------------------------------


class Skills(Extension):
    """SEP-2640: serve skills, each from a folder of ``root`` trees or a ``Skill``.

    ``Skills("skills/")`` serves every folder under ``skills/`` that holds a SKILL.md;
    ``Skills(Skill.from_files("git-workflow", {...}))`` one made in code. Install it with
    ``server.add_extension(...)``. Raises ``SkillError`` at once for a skill that cannot be
    served, naming the file and field.
    """

    identifier: ClassVar[str] = SKILLS_EXTENSION

    def __init__(
        self,
        *sources: str | os.PathLike[str] | Skill,
        directory_read: bool = True,
        limits: SkillLimits | None = None,
    ) -> None:
        self._limits = limits or SkillLimits()
        self._directory_read = directory_read
        skills: list[Skill] = []
        for source in sources:
            if isinstance(source, Skill):
                skills.append(source)
            else:
                skills.extend(load_tree(Path(source), self._limits))
        self._skills: dict[str, Skill] = {}
        total = 0
        for skill in skills:
            if skill.uri in self._skills:
                raise SkillError(f"{skill.uri}: two skills at one URI")
            total += skill.size
            if total > self._limits.total_bytes:
                raise SkillError(
                    f"{skill.uri}: the skills hold more than {self._limits.total_bytes} bytes"
                )
            self._skills[skill.uri] = skill
        #: skills/list's items, made once: the skills do not change while served.
        self._entries = [(uri, skill.entry()) for uri, skill in self._skills.items()]
        self._files: dict[str, SkillFile] = {}
        #: Each directory resource and its direct children, as resources/list shows them.
        self._directories: dict[str, dict[str, dict[str, Any]]] = {}
        for skill in self._skills.values():
            self._index(skill)

    def _index(self, skill: Skill) -> None:
        self._directories.setdefault(skill.root, {})
        for f in skill.files:
            uri = f"{skill.root}/{f.path}"
            self._files[uri] = f
            parent = skill.root
            parts = f.path.split("/")
            for part in parts[:-1]:
                child = f"{parent}/{part}"
                self._directories.setdefault(parent, {})[child] = {
                    "uri": child, "name": part, "mimeType": DIRECTORY_MIME,
                }
                self._directories.setdefault(child, {})
                parent = child
            self._directories[parent][uri] = self._resource(skill, f, uri)

    @staticmethod
    def _resource(skill: Skill, f: SkillFile, uri: str) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": uri, "name": PurePosixPath(f.path).name,
                                    "mimeType": f.mime_type, "size": f.size}
        if f.path == SKILL_MD:
            # SK-METADATA: SKILL.md's resource is named and described by its frontmatter.
            resource["name"] = skill.name
            resource["description"] = str(skill.frontmatter["description"])
        return resource

    @property
    def skills(self) -> Mapping[str, Skill]:
        return dict(self._skills)

    def settings(self) -> Mapping[str, Any]:
        # SK-CAPABILITY: directoryRead inline under the identifier (no envelope).
        return {"directoryRead": True} if self._directory_read else {}

    def methods(self) -> Sequence[ExtensionMethod]:
        methods = [
            ExtensionMethod.make(SKILLS_EXTENSION, "skills/list", self._list, cacheable=True,
                                 capability="resources"),
            ExtensionMethod.make(SKILLS_EXTENSION, "skills/get", self._get, cacheable=True,
                                 capability="resources"),
        ]
        if self._directory_read:
            methods.append(ExtensionMethod.make(
                SKILLS_EXTENSION, "resources/directory/read", self._read_directory,
                capability="resources", feature="directoryRead",
            ))
        return methods

    def contribute(self, server: Server) -> None:
        # SK-RESOURCES: every file a resource, readable with resources/read.
        for skill in self._skills.values():
            for f in skill.files:
                uri = f"{skill.root}/{f.path}"
                described = self._resource(skill, f, uri)
                server.add_resource(
                    _reader(f), uri, name=described["name"],
                    description=described.get("description"), mime_type=f.mime_type,
                )

    async def _list(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """SK-LIST: the skills, a page at a time, an entry never split over pages."""
        result = list_result("skills", "skills", self._entries, params, ctx.page_size)
        # Copies: what a middleware does to a result is not the next client's.
        result["skills"] = [_json_copy(entry) for entry in result["skills"]]
        return result

    async def _get(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """SK-GET: one skill's entry by its SKILL.md URI; -32602 for any other."""
        uri = params.get("uri")
        skill = self._skills.get(uri) if isinstance(uri, str) else None
        if skill is None:
            raise RemoteProtocolError(
                f"Invalid params: {str(uri)[:200]!r} is not a skill this server serves",
                code=ErrorCode.INVALID_PARAMS, data={"uri": uri if isinstance(uri, str) else None},
            )
        return {"skill": skill.entry()}

    async def _read_directory(
        self, ctx: Context, params: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """SK-DIRECTORY: a directory resource's direct children; -32602 for a URI that is
        no directory. The URI is looked up, never opened: ``..`` names nothing."""
        uri = params.get("uri")
        children = self._directories.get(uri) if isinstance(uri, str) else None
        if children is None:
            what = "a file, not a directory" if uri in self._files else "no directory served"
            raise RemoteProtocolError(
                f"Invalid params: {str(uri)[:200]!r} is {what}",
                code=ErrorCode.INVALID_PARAMS, data={"uri": uri if isinstance(uri, str) else None},
            )
        items = list(children.items())
        return list_result("resources", "directory", items, params, ctx.page_size)


def _reader(f: SkillFile) -> Any:
    text = f.data.decode("utf-8") if _is_text(f.data) else None

    async def read() -> str | bytes:
        # The bytes digested at load: a text file as its text (the same UTF-8 bytes), any
        # other as a blob.
        return text if text is not None else f.data

    return read

