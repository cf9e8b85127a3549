# The package's layering, checked from the source: the pure protocol layer imports no I/O
# library, every module imports only from its own layer and the ones below (LAYERS), the user
# API reaches the runtime only through trio_mcp.base._ports, and there is no import cycle.

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "trio_mcp"
PROTOCOL = PACKAGE / "protocol"

#: I/O and concurrency libraries the pure layer must not touch.
IO_LIBRARIES = ("trio", "hypercorn", "h11", "wsproto", "h2", "anyio")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str | None = None) -> Iterator[tuple[int, str]]:
    """Every module an import statement in ``path`` may load, as absolute names, with its
    line; relative imports are resolved against the file's package. ``from X import Y``
    yields X and X.Y (Y may be a submodule). Imports inside functions and TYPE_CHECKING
    blocks count too: they are still edges of the layering."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                up = node.level - 1
                if up >= len(base_parts):
                    yield node.lineno, "<relative import above the top-level package>"
                    continue
                base = ".".join(base_parts[: len(base_parts) - up])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{target}.{alias.name}"


def _is_within(name: str, top: str) -> bool:
    return name == top or name.startswith(top + ".")


def _where(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def _violations(
    files: list[Path], forbidden: tuple[str, ...], module: str | None = None
) -> list[str]:
    return [
        f"{_where(path)}:{line}: imports {name}"
        for path in files
        for line, name in _imports(path, module)
        if any(_is_within(name, f) for f in forbidden)
    ]


def _protocol_files() -> list[Path]:
    files = sorted(PROTOCOL.glob("*.py"))
    assert files, "no protocol modules found"
    return files


# -- the checker checks what it should -----------------------------------------------------


def test_import_scan_resolves_relative_imports() -> None:
    """The scanner resolves `from ._x import y` against the file's package."""
    names = {name for _, name in _imports(PROTOCOL / "_jsonrpc.py")}

    assert "trio_mcp.protocol._errors" in names
    assert "trio_mcp.protocol._errors.ErrorCode" in names


def test_import_scan_reports_each_offence_with_file_and_line(tmp_path: Path) -> None:
    """Plain, dotted, from-, nested and TYPE_CHECKING imports of an I/O library are all
    reported as file:line, and relative imports are followed out of the package."""
    bad = tmp_path / "_bad.py"
    bad.write_text(
        "import os\n"
        "import trio\n"
        "import h11._events as ev\n"
        "from hypercorn.trio import serve\n"
        "if TYPE_CHECKING:\n"
        "    from anyio import abc\n"
        "def f():\n"
        "    import wsproto\n"
        "from .. import _serve\n"
        "from ..._x import y\n",
        encoding="utf-8",
    )

    assert [
        f"{bad}:2: imports trio",
        f"{bad}:3: imports h11._events",
        f"{bad}:4: imports hypercorn.trio",
        f"{bad}:4: imports hypercorn.trio.serve",
        f"{bad}:6: imports anyio",
        f"{bad}:6: imports anyio.abc",
        f"{bad}:8: imports wsproto",
    ] == _violations([bad], IO_LIBRARIES, module="trio_mcp.protocol._bad")
    assert [f"{bad}:9: imports trio_mcp._serve"] == _violations(
        [bad], ("trio_mcp._serve",), module="trio_mcp.protocol._bad"
    )
    assert (10, "<relative import above the top-level package>") in set(
        _imports(bad, module="trio_mcp.protocol._bad")
    )


# -- (a) the pure layer's source -----------------------------------------------------------


def test_protocol_layer_imports_no_io_library() -> None:
    """No module of trio_mcp.protocol imports trio, hypercorn, h11, wsproto, h2 or anyio."""
    assert [] == _violations(_protocol_files(), IO_LIBRARIES)


def test_protocol_layer_imports_nothing_else_from_the_package() -> None:
    """trio_mcp.protocol depends on nothing above it: its imports of trio_mcp stay inside
    trio_mcp.protocol, and no relative import climbs out of it."""
    escaping = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in _protocol_files()
        for line, name in _imports(path)
        if (_is_within(name, "trio_mcp") and not _is_within(name, "trio_mcp.protocol"))
        or name.startswith("<relative")
    ]

    assert [] == escaping


# -- (b) what importing it actually loads --------------------------------------------------

#: Run in a fresh interpreter: import trio_mcp.protocol and every module in it, with the I/O
#: libraries made unimportable, and report what got loaded. The real parent package is
#: imported: its public names are lazy, so it must not drag the runtime in either.
_PROBE = """
import importlib, importlib.abc, json, pkgutil, sys
IO = {io!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in IO:
            raise ImportError("the pure layer imported " + name)
        return None
sys.meta_path.insert(0, Block())
import trio_mcp.protocol as protocol
for info in pkgutil.iter_modules(protocol.__path__):
    importlib.import_module("trio_mcp.protocol." + info.name)
print(json.dumps({{
    "io": sorted(m for m in sys.modules if m.split(".")[0] in IO),
    "package": sorted(
        m for m in sys.modules
        if m.startswith("trio_mcp.") and not m.startswith("trio_mcp.protocol")
    ),
    "protocol": sorted(m for m in sys.modules if m.startswith("trio_mcp.protocol")),
}}))
"""


def _probe() -> dict[str, list[str]]:
    code = _PROBE.format(io=IO_LIBRARIES, package=str(PACKAGE))
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert 0 == proc.returncode, proc.stderr
    result: dict[str, list[str]] = json.loads(proc.stdout)
    return result


def test_importing_protocol_loads_no_io_library() -> None:
    """Importing trio_mcp.protocol and all its modules, in a fresh interpreter where trio,
    hypercorn, h11, wsproto, h2 and anyio cannot be imported, works and loads none."""
    loaded = _probe()

    assert [] == loaded["io"]
    modules = {f"trio_mcp.protocol.{p.stem}" for p in _protocol_files() if p.stem != "__init__"}
    assert modules <= set(loaded["protocol"])


def test_importing_protocol_loads_no_other_part_of_the_package() -> None:
    """The pure layer pulls in no runtime module of trio_mcp."""
    assert [] == _probe()["package"]


# -- (c) every module imports downwards only, and no import cycle ---------------------------

#: The package's layers, bottom first: each is a folder of trio_mcp (the command line's
#: folder also takes the package's own three files: its exports, ``python -m`` and the demo).
#: A module may import modules of its own layer and of the layers below it, never above; a
#: new module is placed by the folder its author puts it in.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("protocol", ("trio_mcp.protocol",)),
    ("base", ("trio_mcp.base",)),
    ("runtime", ("trio_mcp.runtime",)),
    ("http edges", ("trio_mcp.edges",)),
    ("user API", ("trio_mcp.app",)),
    # The client: Client(server) runs a Server's ASGI application; the command line may call.
    ("client", ("trio_mcp.client",)),
    ("command line", ("trio_mcp.cli", "trio_mcp.__main__", "trio_mcp.demo", "trio_mcp")),
)

#: The user API's modules that may reach the HTTP edges: Server.asgi_app() and Server.serve()
#: build them. Everything else of the user API talks to the runtime through trio_mcp.base._ports.
API_TO_EDGES = frozenset({"trio_mcp.app._server"})


def _package_modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _layer_of(module: str) -> int | None:
    """The index of the layer ``module`` belongs to: the longest prefix placed in LAYERS."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if _is_within(module, prefix) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def _package_imports(modules: dict[str, Path]) -> dict[str, set[tuple[int, str]]]:
    """For each module, the modules of the package it imports (with the line), counting
    imports inside functions and under TYPE_CHECKING; ``from pkg import name`` counts as
    importing ``pkg.name`` when that is a module, else ``pkg``."""
    edges: dict[str, set[tuple[int, str]]] = {}
    for module, path in modules.items():
        found = set()
        for line, name in _imports(path, module):
            target = name
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # A package's __init__ that re-exports is not an edge back into the package.
            if target and target != module and not _is_within(module, target):
                found.add((line, target))
        edges[module] = found
    return edges


def test_every_module_has_a_layer() -> None:
    """Every module of trio_mcp is placed in one of LAYERS."""
    unplaced = [m for m in _package_modules() if _layer_of(m) is None]

    assert [] == unplaced


def test_no_module_imports_a_module_of_a_layer_above_it() -> None:
    """protocol < interfaces < runtime < HTTP edges < user API < command line: no module
    imports upwards (late and type-only imports count)."""
    modules = _package_modules()
    upward = []
    for module, targets in _package_imports(modules).items():
        own = _layer_of(module)
        for line, target in sorted(targets):
            theirs = _layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                upward.append(
                    f"{_where(modules[module])}:{line}: {LAYERS[own][0]} module {module} "
                    f"imports {target} ({LAYERS[theirs][0]})"
                )

    assert [] == upward, "\n".join(upward)


def test_the_user_api_reaches_the_runtime_only_through_its_interfaces() -> None:
    """No user API module imports the runtime (trio_mcp.runtime), and only Server reaches the
    HTTP edges (to build them): handlers talk to the runtime through trio_mcp.base._ports."""
    modules = _package_modules()
    api = dict(LAYERS)["user API"]
    reaching = [
        f"{_where(modules[module])}:{line}: {module} imports {target}"
        for module, targets in _package_imports(modules).items()
        if any(_is_within(module, a) for a in api)
        for line, target in sorted(targets)
        if _is_within(target, "trio_mcp.runtime")
        or (
            module not in API_TO_EDGES
            and any(_is_within(target, e) for e in dict(LAYERS)["http edges"])
        )
    ]

    assert [] == reaching, "\n".join(reaching)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle_made_by_a_late_import() -> None:
    """The cycle check sees a cycle however its edges are made: a -> b -> c -> a."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert [["a", "b", "c"]] == _cycles(graph)


def test_the_package_has_no_import_cycle() -> None:
    """No two modules of trio_mcp import each other, directly or through others (late and
    type-only imports count)."""
    edges = _package_imports(_package_modules())
    graph = {module: {target for _, target in targets} for module, targets in edges.items()}

    assert [] == _cycles(graph)


def test_no_runtime_module_passes_600_lines_nor_a_class_400() -> None:
    """The runtime stays split by job (issue 38): no module of trio_mcp/runtime/ over 600
    lines, no class in it over 400 (from its first decorator to its last line)."""
    too_long = []
    for path in sorted((PACKAGE / "runtime").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > 600:
            too_long.append(f"{_where(path)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                size = (node.end_lineno or node.lineno) - first + 1
                if size > 400:
                    too_long.append(f"{_where(path)}: class {node.name}, {size} lines")

    assert [] == too_long
