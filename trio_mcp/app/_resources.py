# Resources (spec25/server/resources.mdx): a registry of fixed resources and URI templates,
# and the resources/* methods that serve it. Subscriptions belong to whoever subscribes (a
# legacy session, a modern listener): the runtime keeps them.
from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..protocol import ErrorCode, RemoteProtocolError
from ..protocol._errors import resource_not_found
from ..protocol._modern import CacheHint
from . import _schema
from ._content import Audio, Blob, EmbeddedResource, Image, Text, check_uri, json_text
from ._context import Context
from ._depends import Injection
from ._display import Icon, icons_list
from ._invoke import ServerState, call_handler, handler_kind
from ._pagination import list_result
from ._uritemplate import UriTemplate

__all__ = ["ResourceDef", "ResourceNotFound", "ResourceRegistry", "UriTemplate"]


class ResourceNotFound(Exception):
    """Raise from a resource function when the URI names nothing: the client gets
    ``-32002`` (J-ERR-5) with ``data: {uri}``."""


not_found = resource_not_found


# -- URI templates (RFC 6570, _uritemplate.py) -------------------------------------------------

_EXPRESSION = re.compile(r"\{([^{}]*)\}")


def is_template(uri: str) -> bool:
    return "{" in uri


# -- the registry ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResourceDef:
    """A registered resource (``template`` is None) or resource template."""

    uri: str
    """The fixed URI, or the template text."""
    name: str
    title: str | None
    description: str
    mime_type: str | None
    annotations: Mapping[str, Any] | None
    meta: Mapping[str, Any] | None
    fn: Callable[..., Any]
    template: UriTemplate | None
    context_param: str | None
    converters: Mapping[str, Callable[[str], Any]]
    is_async: bool = True
    """An ``async def``, or a plain ``def`` run in a worker thread (TM-HAND-THREAD)."""
    screen: bool = True
    """Whether a template's values are screened for a walk out of a directory
    (TM-HAND-TEMPLATE); ``screen_paths=False`` at registration opts out."""
    required: frozenset[str] = frozenset()
    """The template variables the function needs (the others have defaults)."""
    icons: tuple[Mapping[str, Any], ...] = ()
    cache: CacheHint | None = None
    """The caching hints of a 2026-07-28 read of it (TM-HAND-CACHE); None: the server's."""
    injections: tuple[Injection, ...] = ()
    """Parameters a ``Depends`` fills (TM-HAND-DEPENDS)."""

    def to_dict(self) -> dict[str, Any]:
        key = "uriTemplate" if self.template is not None else "uri"
        d: dict[str, Any] = {key: self.uri, "name": self.name}
        if self.title is not None:
            d["title"] = self.title
        if self.description:
            d["description"] = self.description
        if self.mime_type is not None:
            d["mimeType"] = self.mime_type
        if self.annotations:
            d["annotations"] = dict(self.annotations)
        if self.icons:
            d["icons"] = [dict(i) for i in self.icons]
        if self.meta:
            d["_meta"] = dict(self.meta)
        return d


def _converter(annotation: Any, explode: bool = False) -> Callable[[Any], Any]:
    """How a template variable's text becomes the parameter's value (str, int or float; for
    an exploded ``{/var*}``, ``list[str]`` or the segments joined with ``/``)."""
    tp = annotation
    if explode:
        bare = typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp
        if typing.get_origin(bare) in (list, typing.get_origin(Sequence[str])):
            return list
        if bare in (str, Any, inspect.Parameter.empty):
            return "/".join
        raise TypeError(f"an exploded URI template variable is a list[str] or a str, not {tp!r}")
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(args) == 1:
        tp = args[0]
    if tp is int:
        return int
    if tp is float:
        return float
    if tp in (str, Any, inspect.Parameter.empty):
        return str
    raise TypeError(f"a URI template variable is a str, int or float, not {annotation!r}")


def make_resource(
    fn: Callable[..., Any],
    uri: str,
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
    annotations: Mapping[str, Any] | None,
    meta: Mapping[str, Any] | None,
    screen_paths: bool = True,
    icons: Iterable[Icon] = (),
    cache: CacheHint | None = None,
) -> ResourceDef:
    """Check ``fn`` against ``uri`` and describe it (raises TypeError/ValueError)."""
    is_async = handler_kind(fn, "resource")
    sig = _schema.derive_signature(
        fn, name=name, description=description, context_type=Context, structured_output=False
    )
    template = UriTemplate.parse(uri) if is_template(uri) else None
    # U-RES-6 (MUST): a URI, and a template once its {var} expressions are taken out, follow
    # RFC 3986.
    check_uri(_EXPRESSION.sub("x", uri))
    variables = set(template.variables) if template is not None else set()
    params = {p.name: p for p in sig.params}
    required = {p.name for p in sig.params if p.required}
    unknown = set(params) - variables
    if unknown or not variables <= set(params) or not required <= variables:
        if template is None:
            raise TypeError(
                f"resource {uri!r}: {sig.name} takes arguments ({', '.join(sorted(params))}); "
                "a fixed resource takes none (put {var} in the URI to make a template)"
            )
        raise TypeError(
            f"resource template {uri!r}: the parameters of {sig.name} "
            f"({', '.join(sorted(params)) or 'none'}) must be its variables "
            f"({', '.join(sorted(variables))})"
        )
    return ResourceDef(
        uri=uri,
        name=sig.name,
        title=title,
        description=sig.description,
        mime_type=mime_type,
        annotations=annotations,
        meta=meta,
        fn=fn,
        template=template,
        context_param=sig.context_param,
        converters={
            v: _converter(params[v].annotation, explode=template.explodes(v))
            for v in variables
        } if template is not None else {},
        is_async=is_async,
        screen=screen_paths,
        required=frozenset(required),
        icons=tuple(icons_list(icons)),
        cache=cache,
        injections=sig.injections,
    )


Method = Callable[[Context, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


class ResourceRegistry:
    """The resources and templates of one server, and the resources/* methods that serve
    them."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        state.serve_reads(self.read)
        self.fixed: dict[str, ResourceDef] = {}
        self.templates: dict[str, ResourceDef] = {}
        #: Set at the first registration: the capability stays declared after that, so a
        #: server whose last resource goes away still answers resources/list (with nothing).
        self.enabled = False

    def add(self, resource: ResourceDef, *, replace: bool = False) -> None:
        """Register ``resource``; a URI already taken is refused unless ``replace``."""
        table = self.fixed if resource.template is None else self.templates
        old = table.get(resource.uri)
        if old is not None and not replace:
            kind = "resource" if resource.template is None else "resource template"
            raise _schema.already_registered(kind, resource.uri, old.fn)
        table[resource.uri] = resource
        self.enabled = True

    def remove(self, uri: str) -> None:
        """Remove the resource or template registered under ``uri`` (KeyError if none)."""
        if uri in self.fixed:
            del self.fixed[uri]
        else:
            del self.templates[uri]

    def methods(self) -> dict[str, Method]:
        return {
            "resources/list": self._list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._read,
        }

    async def _list(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return list_result(
            "resources",
            "resources",
            [(r.uri, r.to_dict()) for r in self.fixed.values()],
            params,
            ctx.page_size,
        )

    async def _templates_list(
        self, ctx: Context, params: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        return list_result(
            "resourceTemplates",
            "resource-templates",
            [(r.uri, r.to_dict()) for r in self.templates.values()],
            params,
            ctx.page_size,
        )

    async def _read(self, ctx: Context, params: Mapping[str, Any]) -> Mapping[str, Any]:
        # U-RES-3 (MUST): the URI is validated: it must name a registered resource or match
        # a template, or the read is -32002.
        uri = uri_param(params)
        return {"contents": await self.read(uri, ctx)}

    def find(self, uri: str) -> tuple[ResourceDef, dict[str, Any]] | None:
        """The resource ``uri`` names: a fixed one first, then the first matching template."""
        fixed = self.fixed.get(uri)
        if fixed is not None:
            return fixed, {}
        for resource in self.templates.values():
            assert resource.template is not None
            variables = resource.template.match(uri, screen=resource.screen)
            if variables is not None and resource.required <= variables.keys():
                return resource, variables
        return None

    async def read(self, uri: str, ctx: Context) -> list[dict[str, Any]]:
        """The ``contents`` of ``uri``: what its function returns, as resource contents."""
        found = self.find(uri)
        if found is None:
            raise not_found(uri)
        resource, variables = found
        try:
            kwargs: dict[str, Any] = {k: resource.converters[k](v) for k, v in variables.items()}
        except ValueError:
            # The URI has the template's shape but a variable of the wrong kind: it names
            # nothing (a template of ids has no item "abc").
            raise not_found(uri) from None
        if resource.context_param is not None:
            kwargs[resource.context_param] = ctx
        try:
            value = await call_handler(
                resource.fn, kwargs, is_async=resource.is_async,
                injections=resource.injections, ctx=ctx, limiter=self._state.limiter,
            )
        except ResourceNotFound:
            raise not_found(uri) from None
        return to_contents(uri, value, resource.mime_type)


# -- return values -> resource contents ------------------------------------------------------

_CONTENTS_TYPES = (str, bytes, bytearray, memoryview, Text, Blob, EmbeddedResource, Image, Audio)


def to_contents(uri: str, value: Any, mime_type: str | None = None) -> list[dict[str, Any]]:
    """Resource contents for a resource function's return value.

    ``str`` is text (``text/plain`` unless the resource says otherwise), ``bytes`` is a
    base64 ``blob`` (U-RES-3), ``Blob``/``EmbeddedResource`` are themselves, an ``Image`` or
    ``Audio`` is a blob of its type, a list of these is several contents, None is none, and
    anything else is its JSON text (``application/json``).
    """
    if value is None:
        return []
    if isinstance(value, list | tuple) and all(isinstance(v, _CONTENTS_TYPES) for v in value):
        return [c for v in value for c in to_contents(uri, v, mime_type)]
    if isinstance(value, Text):
        value = value.text
    if isinstance(value, str):
        return [{"uri": uri, "mimeType": mime_type or "text/plain", "text": value}]
    if isinstance(value, bytes | bytearray | memoryview):
        blob = Blob(uri=uri, data=bytes(value), mime_type=mime_type or "application/octet-stream")
        return [blob.to_dict()]
    if isinstance(value, Image | Audio):
        data = value.data if isinstance(value.data, bytes) else None
        if data is None:
            return [{"uri": uri, "mimeType": value.mime_type, "blob": value.data}]
        return [Blob(uri=uri, data=data, mime_type=value.mime_type).to_dict()]
    if isinstance(value, Blob):
        return [value.to_dict()]
    if isinstance(value, EmbeddedResource):
        return [value.contents()]
    return [{"uri": uri, "mimeType": mime_type or "application/json", "text": json_text(value)}]


# -- params ------------------------------------------------------------------------------------


def uri_param(params: Mapping[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise RemoteProtocolError(
            "Invalid params: uri must be a non-empty string.", code=ErrorCode.INVALID_PARAMS
        )
    return uri
