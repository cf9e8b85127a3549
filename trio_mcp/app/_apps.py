# MCP Apps (the `io.modelcontextprotocol/ui` extension, SEP-1865, spec/apps.md): tools whose
# `_meta.ui.resourceUri` names a `ui://` resource, an HTML page served as
# `text/html;profile=mcp-app` that a host renders in a sandboxed iframe and talks to over
# postMessage JSON-RPC. Everything the extension needs is here, checked at registration:
# the server (trio_mcp.app._server) only forwards its two registration methods, its
# capability and its start-up check to an AppRegistry, so the module can move onto an
# extension API whole.
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final, Literal

import attrs

from ._content import EmbeddedResource, check_uri
from ._context import Context, ThreadContext

__all__ = [
    "APPS_EXTENSION",
    "APP_MIME_TYPE",
    "MAX_APP_HTML",
    "AppCsp",
    "AppPermissions",
    "AppRegistry",
    "AppResource",
    "Visibility",
    "apps_supported",
]

APPS_EXTENSION: Final = "io.modelcontextprotocol/ui"
#: UI-RES-MIME: the only MIME type of an app resource.
APP_MIME_TYPE: Final = "text/html;profile=mcp-app"
#: TM-APPS-SIZE: the largest page (UTF-8 bytes) registered unless ``max_bytes`` says more.
#: Every host that prefetches the page reads all of it, on every connection.
MAX_APP_HTML: Final = 2 * 1024 * 1024
#: TM-APPS-CSP: how many origins one CSP list may name, and how long a URI may be.
MAX_CSP_DOMAINS: Final = 64
#: The longest origin: a scheme, a 253-character host and a port.
MAX_ORIGIN: Final = 270
MAX_UI_URI: Final = 2048

Visibility = Literal["model", "app"]
_VISIBILITIES: Final = ("model", "app")

# An origin a CSP list may name: a scheme a page may reach (http, https, ws, wss), a host
# whose first label may be `*` (a wildcard subdomain, as the spec allows), an optional port,
# and nothing else: no path, no quote, no `;` or space that would end the source list and
# start another directive in the policy a host builds by joining these.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*"
_ORIGIN = re.compile(rf"(?:https?|wss?)://(?P<host>{_HOST}|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d{{1,5}}))?")
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
#: A path step that leaves its directory, raw or percent-encoded ("..", ".", "%2e%2E").
_DOT_STEP = re.compile(r"(?:\.|%2e){1,2}", re.IGNORECASE)


def _origin(value: object, field: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_ORIGIN or not _ORIGIN.fullmatch(value):
        raise ValueError(
            f"csp {field}: {value!r} is not an origin: a scheme (https, http, wss, ws), a "
            "host (its first label may be *), an optional port, and nothing else"
        )
    match = _ORIGIN.fullmatch(value)
    assert match is not None
    if len(match["host"]) > 253 or (match["port"] is not None and int(match["port"]) > 65535):
        raise ValueError(f"csp {field}: {value!r} is not an origin (host or port out of range)")
    return value


def _origins(value: Iterable[str] | None, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise TypeError(f"csp {field} is a list of origins, not one string")
    items = tuple(value)
    if len(items) > MAX_CSP_DOMAINS:
        raise ValueError(f"csp {field}: {len(items)} origins, more than {MAX_CSP_DOMAINS}")
    return tuple(_origin(v, field) for v in items)


def _connect(value: Iterable[str] | None) -> tuple[str, ...]:
    return _origins(value, "connectDomains")


def _resource(value: Iterable[str] | None) -> tuple[str, ...]:
    return _origins(value, "resourceDomains")


def _frame(value: Iterable[str] | None) -> tuple[str, ...]:
    return _origins(value, "frameDomains")


def _base_uri(value: Iterable[str] | None) -> tuple[str, ...]:
    return _origins(value, "baseUriDomains")


@attrs.frozen(kw_only=True)
class AppCsp:
    """The origins an app page may reach (``_meta.ui.csp``), each list empty by default (the
    host's restrictive policy). Every entry is checked to be an origin (TM-APPS-CSP)."""

    connect_domains: tuple[str, ...] = attrs.field(default=(), converter=_connect)
    """Origins of fetch/XHR/WebSocket (CSP ``connect-src``)."""
    resource_domains: tuple[str, ...] = attrs.field(default=(), converter=_resource)
    """Origins of scripts, images, styles, fonts, media."""
    frame_domains: tuple[str, ...] = attrs.field(default=(), converter=_frame)
    """Origins of nested iframes (``frame-src``)."""
    base_uri_domains: tuple[str, ...] = attrs.field(default=(), converter=_base_uri)
    """Origins the document's base URI may name (``base-uri``)."""

    _WIRE: ClassVar[Mapping[str, str]] = {
        "connectDomains": "connect_domains",
        "resourceDomains": "resource_domains",
        "frameDomains": "frame_domains",
        "baseUriDomains": "base_uri_domains",
    }

    @classmethod
    def of(cls, value: AppCsp | Mapping[str, Any]) -> AppCsp:
        """An AppCsp, or the wire's mapping (``{"connectDomains": [...]}``, or the Python
        names); an unknown key is refused, not dropped."""
        if isinstance(value, AppCsp):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"csp is an AppCsp or a mapping, not {type(value).__name__}")
        names = {**cls._WIRE, **{v: v for v in cls._WIRE.values()}}
        unknown = sorted(str(k) for k in value if k not in names)
        if unknown:
            raise ValueError(f"csp: unknown field(s) {', '.join(unknown)}")
        return cls(**{names[k]: v for k, v in value.items()})

    def to_dict(self) -> dict[str, list[str]]:
        return {
            wire: list(getattr(self, name))
            for wire, name in self._WIRE.items()
            if getattr(self, name)
        }


@attrs.frozen(kw_only=True)
class AppPermissions:
    """The browser features an app page asks for (``_meta.ui.permissions``); a host may
    grant them or not (the page detects which)."""

    camera: bool = False
    microphone: bool = False
    geolocation: bool = False
    clipboard_write: bool = False

    _WIRE: ClassVar[Mapping[str, str]] = {
        "camera": "camera",
        "microphone": "microphone",
        "geolocation": "geolocation",
        "clipboardWrite": "clipboard_write",
    }

    @classmethod
    def of(cls, value: AppPermissions | Mapping[str, Any] | Iterable[str]) -> AppPermissions:
        """An AppPermissions, the wire's mapping (``{"camera": {}}``) or feature names."""
        if isinstance(value, AppPermissions):
            return value
        names = {**cls._WIRE, **{v: v for v in cls._WIRE.values()}}
        if isinstance(value, Mapping):
            named = list(value)
            asked = [k for k, v in value.items() if v is not None and v is not False]
            for k, v in value.items():
                if not (v is None or isinstance(v, bool) or v == {}):
                    raise ValueError(f"permissions {k!r}: {{}} or a bool, not {v!r}")
        elif isinstance(value, str):
            raise TypeError("permissions is a list of feature names, not one string")
        else:
            named = asked = list(value)
        unknown = sorted(str(k) for k in named if k not in names)
        if unknown:
            raise ValueError(f"permissions: unknown feature(s) {', '.join(unknown)}")
        return cls(**{names[k]: True for k in asked})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {wire: {} for wire, name in self._WIRE.items() if getattr(self, name)}


def check_ui_uri(uri: object) -> str:
    """Refuse what is not a ``ui://`` URI naming one page (UI-RES-URI, TM-APPS-URI): the
    scheme, an authority, RFC 3986 characters, no step out of a directory (raw or
    percent-encoded), no encoded slash, no query or fragment."""
    if not isinstance(uri, str) or not uri.startswith("ui://"):
        raise ValueError(f"an MCP Apps resource URI starts with ui://, not {uri!r}")
    if len(uri) > MAX_UI_URI:
        raise ValueError(f"ui:// URI of {len(uri)} characters, more than {MAX_UI_URI}")
    check_uri(uri)
    rest = uri[len("ui://"):]
    authority, _, path = rest.partition("/")
    if not authority:
        raise ValueError(f"{uri!r}: a ui:// URI names its server or app, as in ui://demo/page")
    if "?" in rest or "#" in rest:
        raise ValueError(f"{uri!r}: a ui:// URI names one page: no query or fragment")
    lowered = rest.lower()
    if "%2f" in lowered or "%5c" in lowered or "%00" in lowered:
        raise ValueError(f"{uri!r}: an encoded slash, backslash or NUL in a ui:// URI")
    if any(_DOT_STEP.fullmatch(step) for step in [authority, *path.split("/")]):
        raise ValueError(f"{uri!r}: a '.' or '..' step in a ui:// URI")
    if path.startswith("/") or "//" in path:
        raise ValueError(f"{uri!r}: an empty path segment in a ui:// URI")
    return uri


def _check_html(uri: str, html: object, max_bytes: int) -> str:
    if not isinstance(html, str):
        raise TypeError(f"app resource {uri}: the page is a str of HTML, not {type(html).__name__}")
    try:
        size = len(html.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"app resource {uri}: the page is not valid Unicode ({exc.reason})"
        ) from None
    if size > max_bytes:
        raise ValueError(
            f"app resource {uri}: the page is {size} bytes, more than {max_bytes} "
            "(pass max_bytes= to allow it; every host that renders it reads all of it)"
        )
    head = html.lstrip("\ufeff \t\r\n").lower()
    if not (head.startswith("<!doctype html") or head.startswith("<html")):
        # UI-RES-HTML: the content is an HTML5 document, not a fragment.
        raise ValueError(
            f"app resource {uri}: the page must be an HTML document "
            "(start it with <!DOCTYPE html>)"
        )
    return html


def _check_domain(value: str | None) -> str | None:
    if value is None:
        return None
    bare = value.removeprefix("https://") if isinstance(value, str) else ""
    if len(bare) > 253 or not _HOSTNAME.fullmatch(bare):
        raise ValueError(f"domain: {value!r} is not a host name (or an https origin)")
    return value


@attrs.frozen(kw_only=True)
class AppResource:
    """One registered app page: its ``ui://`` URI, the HTML and its ``_meta.ui``."""

    uri: str
    html: str
    csp: AppCsp | None = None
    permissions: AppPermissions | None = None
    domain: str | None = None
    prefers_border: bool | None = None

    def ui_meta(self) -> dict[str, Any]:
        """The ``_meta.ui`` of the resource and of its contents (UI-RES-META)."""
        ui: dict[str, Any] = {}
        if self.csp is not None:
            ui["csp"] = self.csp.to_dict()
        if self.permissions is not None:
            ui["permissions"] = self.permissions.to_dict()
        if self.domain is not None:
            ui["domain"] = self.domain
        if self.prefers_border is not None:
            ui["prefersBorder"] = self.prefers_border
        return ui

    def meta(self) -> dict[str, Any] | None:
        ui = self.ui_meta()
        return {"ui": ui} if ui else None

    def contents(self) -> EmbeddedResource:
        """What ``resources/read`` answers: the page as text, of the app MIME type, with the
        ``_meta.ui`` the host builds its sandbox from."""
        return EmbeddedResource(
            uri=self.uri, text=self.html, mime_type=APP_MIME_TYPE, meta=self.meta()
        )


def make_app_resource(
    uri: str,
    html: str,
    *,
    csp: AppCsp | Mapping[str, Any] | None = None,
    permissions: AppPermissions | Mapping[str, Any] | Iterable[str] | None = None,
    domain: str | None = None,
    prefers_border: bool | None = None,
    max_bytes: int = MAX_APP_HTML,
) -> AppResource:
    """Check everything given for an app page (ValueError/TypeError naming what is wrong)."""
    check_ui_uri(uri)
    if prefers_border is not None and not isinstance(prefers_border, bool):
        raise TypeError("prefers_border is a bool")
    return AppResource(
        uri=uri,
        html=_check_html(uri, html, max_bytes),
        csp=None if csp is None else AppCsp.of(csp),
        permissions=None if permissions is None else AppPermissions.of(permissions),
        domain=_check_domain(domain),
        prefers_border=prefers_border,
    )


def tool_meta(
    resource_uri: str,
    visibility: Sequence[Visibility] | None,
    meta: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The ``_meta`` of an app tool (UI-TOOL-META): ``ui.resourceUri`` and ``ui.visibility``,
    and the flat ``ui/resourceUri`` older hosts read (TM-APPS-LEGACYKEY), over ``meta``."""
    check_ui_uri(resource_uri)
    if meta is not None and ("ui" in meta or "ui/resourceUri" in meta):
        raise ValueError("app_tool sets _meta.ui itself: pass resource_uri= and visibility=")
    ui: dict[str, Any] = {"resourceUri": resource_uri}
    if visibility is not None:
        if isinstance(visibility, str):
            raise TypeError('visibility is a list, as ["model", "app"]')
        seen = list(dict.fromkeys(visibility))
        bad = [v for v in seen if v not in _VISIBILITIES]
        if bad or not seen:
            raise ValueError(
                f'visibility is a non-empty list of "model" and "app", not {visibility!r}'
            )
        ui["visibility"] = seen
    return {**(meta or {}), "ui": ui, "ui/resourceUri": resource_uri}


class AppRegistry:
    """The app pages of one server, and which tool shows which."""

    def __init__(self) -> None:
        self.pages: dict[str, AppResource] = {}
        #: Tool name -> the ui:// URI it shows.
        self.bindings: dict[str, str] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.pages or self.bindings)

    def add_page(self, page: AppResource, *, replace: bool = False) -> None:
        if page.uri in self.pages and not replace:
            raise ValueError(f"app resource {page.uri} is already registered (replace=True)")
        self.pages[page.uri] = page

    def remove_page(self, uri: str) -> None:
        self.pages.pop(uri, None)

    def bind(self, tool: str, resource_uri: str) -> None:
        self.bindings[tool] = resource_uri

    def unbind(self, tool: str) -> None:
        self.bindings.pop(tool, None)

    def capabilities(self) -> dict[str, Any]:
        """UI-CAP: the extension under ``capabilities.extensions``, with no settings."""
        return {APPS_EXTENSION: {}} if self.enabled else {}

    def check(self) -> None:
        """UI-TOOL-EXISTS: every app tool's page is registered, or serving does not start."""
        missing = {t: u for t, u in self.bindings.items() if u not in self.pages}
        if missing:
            listed = ", ".join(f"{t} -> {u}" for t, u in sorted(missing.items()))
            raise ValueError(
                f"app tool(s) name a ui:// resource that is not registered: {listed} "
                "(register it with server.add_app_resource)"
            )


def apps_supported(client: Context | ThreadContext | Mapping[str, Any]) -> bool:
    """Whether the client of ``ctx`` (or these client capabilities) declared MCP Apps with the
    HTML profile (UI-CAP-CLIENT): ``extensions["io.modelcontextprotocol/ui"].mimeTypes`` holds
    ``text/html;profile=mcp-app``, in the legacy ``initialize`` or in a 2026-07-28 request's
    ``_meta``. A host that did not sees an app tool's text alone (UI-FALLBACK)."""
    capabilities = client if isinstance(client, Mapping) else client.client_capabilities
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, Mapping):
        return False
    settings = extensions.get(APPS_EXTENSION)
    if not isinstance(settings, Mapping):
        return False
    mime_types = settings.get("mimeTypes")
    return isinstance(mime_types, list | tuple) and APP_MIME_TYPE in mime_types
