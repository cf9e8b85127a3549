# Parameter injection (spec/handlers.md TM-HAND-DEPENDS), in the style FastAPI and FastMCP
# users know: ``pool: Annotated[Pool, Depends(get_pool)]`` hands the handler what
# ``get_pool`` returns (or yields: the code after ``yield`` is the teardown), resolved for each
# request, once per request however many parameters ask for it. A dependency may itself take
# the Context and other dependencies.
#
# This module is the pure part: the marker, and the plan of what to call, made and checked
# when the handler is registered (a cycle or a parameter nothing can fill is a registration
# error). Running the plan is _invoke.py's.
from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["Dependency", "Depends", "Injection", "find_depends", "plan_dependency"]


@attrs.frozen(eq=False)
class Depends:
    """Mark a parameter as injected: ``Annotated[Pool, Depends(get_pool)]``.

    ``dependency`` is a function (async or not, or a generator of either kind: the code
    after its ``yield`` runs when the request is done, whether the handler succeeded or
    raised). Its parameters may be a ``Context`` and other ``Depends``; any other needs a
    default. With ``use_cache`` (the default) it runs once per request, however many
    parameters ask for it.
    """

    dependency: Callable[..., Any]
    use_cache: bool = True


class Kind(typing.NamedTuple):
    """How a dependency function is called."""

    is_async: bool
    is_generator: bool


@attrs.frozen(kw_only=True, eq=False)
class Dependency:
    """One dependency function, with what each of its parameters gets."""

    marker: Depends
    kind: Kind
    context_params: tuple[str, ...]
    """Its parameters annotated with the Context."""
    sub: tuple[tuple[str, Dependency], ...]
    """Its parameters that are dependencies themselves."""
    tears_down: bool = False
    """Whether it or one of its own is a generator, with code to run after the handler."""


@attrs.frozen(kw_only=True)
class Injection:
    """A handler's parameter filled by a dependency."""

    name: str
    dependency: Dependency


def find_depends(annotation: Any, default: Any = None) -> Depends | None:
    """What fills a parameter (TM-HAND-COMPAT-DEPENDS): the Depends in its ``Annotated``
    annotation's metadata; else its default, when that is a Depends (FastMCP's spelling,
    ``db: Pool = Depends(get_pool)``); else the ``__trio_mcp_depends__`` of its annotation's
    class (a view of the Context, as ``trio_mcp.compat.Context`` is); else None."""
    if typing.get_origin(annotation) is not typing.Annotated:
        if isinstance(default, Depends):
            return default
        cls = typing.get_origin(annotation) or annotation
        view = getattr(cls, "__trio_mcp_depends__", None) if isinstance(cls, type) else None
        return view if isinstance(view, Depends) else None
    found = [m for m in annotation.__metadata__ if isinstance(m, Depends)]
    if len(found) > 1:
        raise TypeError(f"{annotation!r} has more than one Depends")
    return found[0] if found else None


def _kind(fn: Callable[..., Any]) -> Kind:
    target = fn if inspect.isroutine(fn) else type(fn).__call__
    if inspect.isasyncgenfunction(fn) or inspect.isasyncgenfunction(target):
        return Kind(is_async=True, is_generator=True)
    if inspect.isgeneratorfunction(fn) or inspect.isgeneratorfunction(target):
        return Kind(is_async=False, is_generator=True)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target):
        return Kind(is_async=True, is_generator=False)
    return Kind(is_async=False, is_generator=False)


def plan_dependency(
    marker: Depends,
    is_context: Callable[[Any], bool],
    _path: tuple[Callable[..., Any], ...] = (),
) -> Dependency:
    """The plan of ``marker``'s function, checked: every parameter is the Context, another
    dependency or defaulted, and no dependency depends on itself."""
    fn = marker.dependency
    name = getattr(fn, "__qualname__", repr(fn))
    if not callable(fn):
        raise TypeError(f"Depends({fn!r}): a dependency is a function")
    if fn in _path:
        chain = " -> ".join(getattr(f, "__qualname__", repr(f)) for f in (*_path, fn))
        raise TypeError(f"dependency cycle: {chain}")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve the type hints of dependency {name}: {exc}") from exc
    context_params: list[str] = []
    sub: list[tuple[str, Dependency]] = []
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name, Any)
        inner = find_depends(annotation, param.default)
        if inner is not None:
            sub.append((param.name, plan_dependency(inner, is_context, (*_path, fn))))
        elif is_context(annotation):
            context_params.append(param.name)
        elif param.default is inspect.Parameter.empty and param.kind not in (
            inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD
        ):
            raise TypeError(
                f"dependency {name}: parameter {param.name!r} is neither the Context, "
                "a Depends(...) nor defaulted, so nothing can fill it"
            )
    kind = _kind(fn)
    return Dependency(
        marker=marker, kind=kind, context_params=tuple(context_params), sub=tuple(sub),
        tears_down=kind.is_generator or any(d.tears_down for _, d in sub),
    )
