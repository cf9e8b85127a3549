"""trio_mcp: a spec-faithful reference server for MCP's Streamable HTTP transport.

Layers, each importing only the ones before it:

- ``trio_mcp.protocol``: the rules of both eras as pure code (no I/O, no trio, no hypercorn);
- ``trio_mcp.base._ports`` and ``trio_mcp.base._config``: the interfaces between the application and
  the runtime, and the settings;
- ``trio_mcp.runtime``: the runtime: legacy sessions (a supervisor task each), modern
  requests and listeners, and the Runtime that routes each request to its era;
- ``trio_mcp.edges._asgi`` and ``trio_mcp.edges._serve``: the HTTP edges (the ASGI adapter,
  hypercorn);
- the user API: ``Server``, ``Context``, the method table (``_dispatch``), schemas, content;
- ``trio_mcp.client``: ``Client``, an MCP client (over HTTP, or in process for a Server);
- ``trio_mcp.cli._cli``: the command line.
"""

# The public names are imported lazily (PEP 562), so that `import trio_mcp.protocol`, the
# pure layer, loads neither trio nor hypercorn (tests/test_layering.py checks it).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Client": ".client",
    "ClientError": ".client",
    "ConnectionLost": ".client",
    "ErrorAnswer": ".client",
    "ResumptionFailed": ".client",
    "Completion": ".app._completion",
    "CompletionRef": ".app._completion",
    "AuthConfig": ".base._config",
    "IntrospectionVerifier": ".runtime._auth",
    "InvalidToken": ".protocol._auth",
    "JWTVerifier": ".runtime._auth",
    "Principal": ".protocol._auth",
    "TokenVerifier": ".base._ports",
    "HttpParser": ".base._config",
    "ResponseMode": ".base._config",
    "ServerConfig": ".base._config",
    "AppCsp": ".app._apps",
    "AppPermissions": ".app._apps",
    "apps_supported": ".app._apps",
    "AssistantMessage": ".app._content",
    "Audio": ".app._content",
    "Blob": ".app._content",
    "EmbeddedResource": ".app._content",
    "Image": ".app._content",
    "ResourceLink": ".app._content",
    "Text": ".app._content",
    "ToolResult": ".app._content",
    "UserMessage": ".app._content",
    "Depends": ".app._depends",
    "Icon": ".app._display",
    "ToolAnnotations": ".app._display",
    "RateLimit": ".app._guards",
    "AuditLog": ".app._guards",
    "McpError": ".app._middleware",
    "Middleware": ".app._middleware",
    "CallNext": ".app._middleware",
    "ThreadContext": ".app._context",
    "UrlElicitationRequired": ".app._context",
    "ClientCapabilityError": ".app._context",
    "ClientTimeoutError": ".app._context",
    "Context": ".app._context",
    "ElicitationResult": ".app._context",
    "Root": ".app._context",
    "SamplingResult": ".app._context",
    "SessionContext": ".app._context",
    "PromptResult": ".app._prompts",
    "ResourceNotFound": ".app._resources",
    "Extension": ".app._extension",
    "ExtensionMethod": ".app._extension",
    "Skill": ".app._skills",
    "SkillError": ".app._skills",
    "SkillLimits": ".app._skills",
    "Skills": ".app._skills",
    "serve": ".edges._serve",
    "Server": ".app._server",
    "ToolError": ".app._tools",
    "Retention": ".protocol",
    "CacheHint": ".protocol",
    "CacheScope": ".protocol",
    "InputRequest": ".protocol",
    "TaskSupport": ".protocol._tasks",
    "Tasks": ".app._tasks",
    "elicitation_request": ".app._context",
    "sampling_request": ".app._context",
    "roots_request": ".app._context",
    "use_allocator": ".base._allocator",
    "use_collector_threshold": ".base._collector",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trio_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*globals(), *__all__]


if TYPE_CHECKING:
    from .app._apps import AppCsp as AppCsp
    from .app._apps import AppPermissions as AppPermissions
    from .app._apps import apps_supported as apps_supported
    from .app._completion import Completion as Completion
    from .app._completion import CompletionRef as CompletionRef
    from .app._content import AssistantMessage as AssistantMessage
    from .app._content import Audio as Audio
    from .app._content import Blob as Blob
    from .app._content import EmbeddedResource as EmbeddedResource
    from .app._content import Image as Image
    from .app._content import ResourceLink as ResourceLink
    from .app._content import Text as Text
    from .app._content import ToolResult as ToolResult
    from .app._content import UserMessage as UserMessage
    from .app._context import ClientCapabilityError as ClientCapabilityError
    from .app._context import ClientTimeoutError as ClientTimeoutError
    from .app._context import Context as Context
    from .app._context import ElicitationResult as ElicitationResult
    from .app._context import Root as Root
    from .app._context import SamplingResult as SamplingResult
    from .app._context import SessionContext as SessionContext
    from .app._context import ThreadContext as ThreadContext
    from .app._context import UrlElicitationRequired as UrlElicitationRequired
    from .app._context import elicitation_request as elicitation_request
    from .app._context import roots_request as roots_request
    from .app._context import sampling_request as sampling_request
    from .app._depends import Depends as Depends
    from .app._display import Icon as Icon
    from .app._display import ToolAnnotations as ToolAnnotations
    from .app._extension import Extension as Extension
    from .app._extension import ExtensionMethod as ExtensionMethod
    from .app._guards import AuditLog as AuditLog
    from .app._guards import RateLimit as RateLimit
    from .app._middleware import CallNext as CallNext
    from .app._middleware import McpError as McpError
    from .app._middleware import Middleware as Middleware
    from .app._prompts import PromptResult as PromptResult
    from .app._resources import ResourceNotFound as ResourceNotFound
    from .app._server import Server as Server
    from .app._skills import Skill as Skill
    from .app._skills import SkillError as SkillError
    from .app._skills import SkillLimits as SkillLimits
    from .app._skills import Skills as Skills
    from .app._tasks import Tasks as Tasks
    from .app._tools import ToolError as ToolError
    from .base._allocator import use_allocator as use_allocator
    from .base._collector import use_collector_threshold as use_collector_threshold
    from .base._config import AuthConfig as AuthConfig
    from .base._config import HttpParser as HttpParser
    from .base._config import ResponseMode as ResponseMode
    from .base._config import ServerConfig as ServerConfig
    from .base._ports import TokenVerifier as TokenVerifier
    from .client import Client as Client
    from .client import ClientError as ClientError
    from .client import ConnectionLost as ConnectionLost
    from .client import ErrorAnswer as ErrorAnswer
    from .client import ResumptionFailed as ResumptionFailed
    from .edges._serve import serve as serve
    from .protocol import CacheHint as CacheHint
    from .protocol import CacheScope as CacheScope
    from .protocol import InputRequest as InputRequest
    from .protocol import Retention as Retention
    from .protocol._auth import InvalidToken as InvalidToken
    from .protocol._auth import Principal as Principal
    from .protocol._tasks import TaskSupport as TaskSupport
    from .runtime._auth import IntrospectionVerifier as IntrospectionVerifier
    from .runtime._auth import JWTVerifier as JWTVerifier
