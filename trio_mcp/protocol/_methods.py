# The method table: one row per JSON-RPC method this server knows, in either era and either
# direction. Every question the rest of the code asks about a method by its name (may a
# modern request call it, which capability must be declared, which params field Mcp-Name
# repeats, may its handler ask for input, is its result cacheable, may it become a task, what
# are its scopes keyed on, which lifecycle class is it) is answered by its row; the named
# sets below (MODERN_METHODS, METHOD_CAPABILITY, ...) are views of the table, never lists of
# their own. Adding a method is one row here, its handler, and its rule in spec/
# (docs/architecture.md walks through it).
#
# The methods the server sends (sampling, elicitation, roots, its notifications) are rows
# too: the same facts about them (the capability that must be declared first, the eras they
# exist in) are rules, and one place spells every method the server speaks. No I/O.
from __future__ import annotations

import enum
import types
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Any, Final

import attrs

from ._versions import Era

__all__ = [
    "APP_METHODS",
    "BROADCASTS",
    "CACHEABLE_METHODS",
    "CLIENT_REQUESTS",
    "CORE_METHODS",
    "INPUT_CAPABILITY",
    "INPUT_METHODS",
    "LISTEN_FLAGS",
    "METHODS",
    "METHOD_CAPABILITY",
    "MODERN_METHODS",
    "NAME_PARAM",
    "NOTIFICATION_CLASS",
    "REQUEST_CLASS",
    "RUNTIME_METHODS",
    "SESSION_METHODS",
    "SUBSCRIBED",
    "UNCANCELLABLE",
    "Handler",
    "Input",
    "Kind",
    "MessageClass",
    "Method",
    "ScopeKind",
    "Sender",
    "check_served",
    "declared",
    "named",
    "register",
]


class Kind(enum.Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"


class Sender(enum.Enum):
    """Which side sends the method."""

    CLIENT = "client"
    SERVER = "server"
    #: Both: ping (L-PING-1) and notifications/cancelled (U-CANCEL-1).
    EITHER = "either"

    @property
    def client(self) -> bool:
        return self is not Sender.SERVER

    @property
    def server(self) -> bool:
        return self is not Sender.CLIENT


class Handler(enum.Enum):
    """Who answers the method when this server receives it."""

    #: The application's registries, through ``_dispatch.Dispatcher``, alike in both eras.
    APP = "app"
    #: A legacy session itself (``runtime.legacy._session.Session.OWN_METHODS``).
    SESSION = "session"
    #: An era's runtime: initialize (the legacy session table), server/discover and
    #: subscriptions/listen (``runtime.modern._modern.ModernServer``, ``runtime._runtime.Runtime``).
    RUNTIME = "runtime"
    #: An extension the application installed (``app._extension``): served only by a
    #: server that installed it, never one of the core methods (TM-EXT-ROWS).
    EXTENSION = "extension"
    #: Nobody here: the server sends it, the client answers.
    CLIENT = "client"


class ScopeKind(enum.Enum):
    """What a request's authorization scopes are keyed on (``Server.required_scopes``): the
    primitive its params name. The values name the primitive in log lines."""

    TOOL = "tool"
    PROMPT = "prompt"
    RESOURCE = "resource"
    #: completion/complete: the prompt or resource template its ``params.ref`` names (U-COMP-5).
    REFERENCE = "ref"


class Input(enum.Enum):
    """A method's part in multi round-trip requests (2026-07-28)."""

    #: Its handler may ask the client for input; its result may be input_required (MU-MRTR-1).
    ASKS = "asks"
    #: It may be asked of the client as an input request (MU-MRTR-5).
    ASKED = "asked"


class MessageClass(enum.Enum):
    """A message's class in the lifecycle table (``_lifecycle``): a method's row names its
    class when it has one of its own; any other request or notification is of the general
    class."""

    INITIALIZE = "initialize request"
    INITIALIZED = "initialized notification"
    PING = "ping request"
    REQUEST = "other request"
    NOTIFICATION = "other notification"
    RESPONSE = "response or error"


_BOTH: Final = frozenset({Era.LEGACY, Era.MODERN})
_LEGACY: Final = frozenset({Era.LEGACY})
_MODERN: Final = frozenset({Era.MODERN})


@attrs.frozen(kw_only=True)
class Method:
    """One method and every fact the server acts on about it."""

    name: str
    kind: Kind
    sent_by: Sender
    eras: frozenset[Era]
    handler: Handler
    capability: str | None = None
    """The capability that must be declared before the method is used: the server's for
    what it receives (L-CAP-1, MT-HDR-4) and for the notifications it sends (U-TOOL-2), the
    client's for the requests it sends (L-CAP-1, MU-MRTR-2)."""
    extension: str | None = None
    """The extension (SEP-2133) that must be declared under ``capabilities.extensions``
    before the method is used, as ``capability`` is for the core's (TM-EXT-DECLARED)."""
    feature: str | None = None
    """The flag under ``capability`` (or under the extension's settings) that must be true
    too (``listChanged``, ``subscribe``, ``directoryRead``)."""
    target: str | None = None
    """The params field naming what the message is about. A modern request's ``Mcp-Name``
    header repeats it (MT-HDR-6, TK-HEADERS), and a requestState is bound to it (MU-MRTR-9);
    a notification with a target goes only to the clients that follow what it names (a
    resource subscribed to: U-RES-6, MU-SUB-10; a task listened for: TK-NOTIFY)."""
    scope: ScopeKind | None = None
    input: Input | None = None
    cacheable: bool = False
    """Its modern complete result carries caching hints (MU-CACHE-1)."""
    lifecycle: MessageClass | None = None
    """Its class in the lifecycle table, when it has one of its own."""
    cancellable: bool = True
    """A notifications/cancelled naming a request of it is acted on (U-CANCEL-2: never for
    initialize)."""
    broadcast: bool = False
    """A change the server tells every client that may hear it (``Server`` announces it to
    each worker's clients: TM-STORE-NOTIFY), not a message about one request."""
    listen_flag: str | None = None
    """The boolean of a subscriptions/listen filter that asks for it (MU-SUB-1)."""

    def __attrs_post_init__(self) -> None:
        # What the table says must hang together; a row that does not fails at import.
        problems = []
        if (self.handler is Handler.CLIENT) != (self.sent_by is Sender.SERVER):
            problems.append("the client handles exactly the methods only the server sends")
        if self.kind is Kind.NOTIFICATION and (
            self.scope or self.input or self.cacheable
        ):
            problems.append("a notification has no scope, input or cache")
        if self.kind is Kind.NOTIFICATION and self.target and self.sent_by is not Sender.SERVER:
            problems.append("only the server's notifications are about one thing followed")
        if not self.cancellable and not (self.kind is Kind.REQUEST and self.sent_by.client):
            problems.append("only a client's request can be left running when cancelled")
        if self.kind is Kind.REQUEST and (self.broadcast or self.listen_flag):
            problems.append("only a notification is broadcast or listened for")
        if (self.broadcast or self.listen_flag) and self.sent_by is not Sender.SERVER:
            problems.append("the server's notifications are broadcast and listened for")
        if self.listen_flag and (not self.broadcast or self.target):
            problems.append("a listen flag asks for a broadcast about no one thing")
        if self.feature is not None and self.capability is None and self.extension is None:
            problems.append("a feature belongs to a capability or an extension")
        if (self.extension is not None) != (self.handler is Handler.EXTENSION):
            problems.append("an extension's methods, and only they, are declared by it")
        if self.cacheable and Era.MODERN not in self.eras:
            problems.append("caching hints are of the 2026-07-28 era")
        if self.input is Input.ASKS and not self.sent_by.client:
            problems.append("only a client's request can ask for input")
        if self.input is Input.ASKED and (self.sent_by is not Sender.SERVER or not self.capability):
            problems.append("an input request is the server's, behind a client capability")
        if problems:
            raise ValueError(f"method table row {self.name}: {'; '.join(problems)}")

    @property
    def is_request(self) -> bool:
        return self.kind is Kind.REQUEST


def _request(name: str, eras: frozenset[Era], handler: Handler, **facts: Any) -> Method:
    return Method(
        name=name, kind=Kind.REQUEST, sent_by=facts.pop("sent_by", Sender.CLIENT), eras=eras,
        handler=handler, **facts,
    )


def _notification(name: str, eras: frozenset[Era], sent_by: Sender, **facts: Any) -> Method:
    handler = facts.pop("handler", Handler.CLIENT)
    return Method(
        name=name, kind=Kind.NOTIFICATION, sent_by=sent_by, eras=eras, handler=handler, **facts
    )


_ROWS: Final = (
    # -- what a client asks --------------------------------------------------------------------
    # L-INIT-1: the legacy handshake; 2026-07-28 has none (TM-ERA-REMOVED).
    # U-CANCEL-2: never cancelled.
    _request("initialize", _LEGACY, Handler.RUNTIME, lifecycle=MessageClass.INITIALIZE,
             cancellable=False),
    # L-PING-1: either side may ping, in any phase of a session.
    _request("ping", _LEGACY, Handler.SESSION, sent_by=Sender.EITHER,
             lifecycle=MessageClass.PING),
    # U-LOG-2: a session's level; a modern request names its own (MU-LOG-3).
    _request("logging/setLevel", _LEGACY, Handler.SESSION, capability="logging"),
    # U-TOOL-*, MU-TOOL-*.
    _request("tools/list", _BOTH, Handler.APP, capability="tools", cacheable=True),
    _request("tools/call", _BOTH, Handler.APP, capability="tools", target="name",
             scope=ScopeKind.TOOL, input=Input.ASKS),
    # U-PROMPT-*, MU-PROMPT-*.
    _request("prompts/list", _BOTH, Handler.APP, capability="prompts", cacheable=True),
    _request("prompts/get", _BOTH, Handler.APP, capability="prompts", target="name",
             scope=ScopeKind.PROMPT, input=Input.ASKS),
    # U-RES-*, MU-RES-*.
    _request("resources/list", _BOTH, Handler.APP, capability="resources", cacheable=True),
    _request("resources/templates/list", _BOTH, Handler.APP, capability="resources",
             cacheable=True),
    _request("resources/read", _BOTH, Handler.APP, capability="resources", target="uri",
             scope=ScopeKind.RESOURCE, input=Input.ASKS, cacheable=True),
    # U-RES-5: a session's subscriptions; a modern client listens instead (MU-SUB-1).
    _request("resources/subscribe", _LEGACY, Handler.SESSION, capability="resources",
             feature="subscribe", target="uri", scope=ScopeKind.RESOURCE),
    _request("resources/unsubscribe", _LEGACY, Handler.SESSION, capability="resources",
             feature="subscribe", target="uri"),
    # U-COMP-*.
    _request("completion/complete", _BOTH, Handler.APP, capability="completions",
             scope=ScopeKind.REFERENCE),
    # ML-VER-2, MU-SUB-1: the modern runtime's own.
    _request("server/discover", _MODERN, Handler.RUNTIME, cacheable=True),
    _request("subscriptions/listen", _MODERN, Handler.RUNTIME),
    # The tasks extension's requests (tasks/get, tasks/update, tasks/cancel) are its rows,
    # registered by protocol/_tasks.py as any extension's are (TM-EXT-ROWS).
    # -- what a client tells -------------------------------------------------------------------
    # L-INIT-4. A modern notification is accepted and not acted on (TM-ERA-NOTIFY).
    _notification("notifications/initialized", _LEGACY, Sender.CLIENT,
                  handler=Handler.SESSION, lifecycle=MessageClass.INITIALIZED),
    # U-CANCEL-1; in 2026-07-28 a closed connection cancels (MU-CANCEL-1).
    _notification("notifications/cancelled", _LEGACY, Sender.EITHER, handler=Handler.SESSION),
    # U-ROOTS: handed to the application's hooks (Server.on_roots_list_changed).
    _notification("notifications/roots/list_changed", _LEGACY, Sender.CLIENT,
                  handler=Handler.APP),
    # -- what the server asks: input requests (L-CAP-1, MU-MRTR-2, MU-MRTR-5) ------------------
    _request("elicitation/create", _BOTH, Handler.CLIENT, sent_by=Sender.SERVER,
             capability="elicitation", input=Input.ASKED),
    _request("sampling/createMessage", _BOTH, Handler.CLIENT, sent_by=Sender.SERVER,
             capability="sampling", input=Input.ASKED),
    _request("roots/list", _BOTH, Handler.CLIENT, sent_by=Sender.SERVER, capability="roots",
             input=Input.ASKED),
    # -- what the server tells -----------------------------------------------------------------
    # U-LOG-1, MU-LOG-2.
    _notification("notifications/message", _BOTH, Sender.SERVER, capability="logging"),
    # U-PROG-*, MU-PROG-1.
    _notification("notifications/progress", _BOTH, Sender.SERVER),
    # U-RES-6, MU-SUB-10.
    _notification("notifications/resources/updated", _BOTH, Sender.SERVER,
                  capability="resources", feature="subscribe", target="uri", broadcast=True),
    # U-TOOL-2, U-PROMPT-4, U-RES-2, MU-SUB-1, MU-SUB-9.
    _notification("notifications/tools/list_changed", _BOTH, Sender.SERVER,
                  capability="tools", feature="listChanged", broadcast=True,
                  listen_flag="toolsListChanged"),
    _notification("notifications/prompts/list_changed", _BOTH, Sender.SERVER,
                  capability="prompts", feature="listChanged", broadcast=True,
                  listen_flag="promptsListChanged"),
    _notification("notifications/resources/list_changed", _BOTH, Sender.SERVER,
                  capability="resources", feature="listChanged", broadcast=True,
                  listen_flag="resourcesListChanged"),
    # TK-NOTIFY, MU-SUB-2: on listen streams only.
    _notification("notifications/tasks", _MODERN, Sender.SERVER, target="taskId"),
    _notification("notifications/subscriptions/acknowledged", _MODERN, Sender.SERVER),
)


def _table(rows: Iterable[Method]) -> dict[str, Method]:
    table: dict[str, Method] = {}
    for method in rows:
        if method.name in table:
            raise ValueError(f"method table: {method.name} has two rows")
        table[method.name] = method
    return table


_TABLE: Final = _table(_ROWS)
#: The core's methods: the table before any extension added its rows.
CORE_METHODS: Final = frozenset(_TABLE)
#: Every method, by name (the core's and those extensions registered).
METHODS: Final[Mapping[str, Method]] = types.MappingProxyType(_TABLE)


def named(method: str, params: Mapping[str, Any] | None, kind: ScopeKind) -> str | None:
    """The tool, prompt or resource (``kind``) a request of ``method`` names: the value of its
    target field, when its row keys its scopes on ``kind``; None for any other request, or
    when the field is missing or not a string."""
    spec = METHODS.get(method)
    if spec is None or spec.scope is not kind or spec.target is None:
        return None
    value = (params or {}).get(spec.target)
    return value if isinstance(value, str) else None


def _names(test: Callable[[Method], bool]) -> Set[str]:
    # A set, not a frozenset: ``register`` adds an extension's rows to it in place.
    names = {m.name for m in _TABLE.values() if test(m)}
    _VIEWS.append((names, test))
    return names


_VIEWS: Final[list[tuple[set[str], Callable[[Method], bool]]]] = []
_MAPS: Final[list[tuple[dict[str, Any], Callable[[Method], tuple[str, Any] | None]]]] = []


def _facts(fact: Callable[[Method], tuple[str, Any] | None]) -> Mapping[str, Any]:
    # A dict ``register`` updates in place, like the sets of ``_names``.
    facts = dict(pair for m in _TABLE.values() if (pair := fact(m)) is not None)
    _MAPS.append((facts, fact))
    return facts


def register(rows: Iterable[Method]) -> None:
    """Add an extension's methods to the table (TM-EXT-ROWS): each row is of
    ``Handler.EXTENSION``; a name the table holds already is refused unless its row is the
    same one (an extension defined twice, or served by two servers in one process).

    Raises:
        ValueError: a row of another handler, or a second, different row for a name.
    """
    new = []
    for method in rows:
        if method.handler is not Handler.EXTENSION:
            raise ValueError(f"method table: {method.name} is not an extension's method")
        if not _received(method) or method.lifecycle is not None:
            # The views of what the server sends and of the lifecycle stay the core's.
            raise ValueError(f"method table: {method.name}: an extension adds client requests")
        known = _TABLE.get(method.name)
        if known is None:
            new.append(method)
        elif known != method:
            raise ValueError(f"method table: {method.name} has a row already, and it differs")
    if len({m.name for m in new}) != len(new):
        raise ValueError("method table: an extension names one method twice")
    for method in new:
        _TABLE[method.name] = method
        for names, test in _VIEWS:
            if test(method):
                names.add(method.name)
        for facts, fact in _MAPS:
            if (pair := fact(method)) is not None:
                facts[pair[0]] = pair[1]


def _received(m: Method) -> bool:
    """A request this server may be sent."""
    return m.is_request and m.sent_by.client


#: Every request a client may send (in some era): the rest are counted as "other".
CLIENT_REQUESTS: Final = _names(_received)

#: MT-HDR-4: the methods a modern request may call; any other gets 404 and -32601.
MODERN_METHODS: Final = _names(lambda m: _received(m) and Era.MODERN in m.eras)

#: The modern methods the runtime answers itself, whatever the application serves.
RUNTIME_METHODS: Final = _names(
    lambda m: _received(m) and Era.MODERN in m.eras and m.handler is Handler.RUNTIME
)

#: The methods the application's registries serve (``_dispatch.Dispatcher``).
APP_METHODS: Final = _names(lambda m: _received(m) and m.handler is Handler.APP)

#: The requests a legacy session answers itself.
SESSION_METHODS: Final = _names(lambda m: _received(m) and m.handler is Handler.SESSION)

#: MU-MRTR-1: the only methods whose result may be an InputRequiredResult.
INPUT_METHODS: Final = _names(lambda m: m.input is Input.ASKS)

#: MU-CACHE-1: the results that carry caching hints.
CACHEABLE_METHODS: Final = _names(lambda m: m.cacheable)

#: L-CAP-1: the server capability each request it is sent needs declared.
METHOD_CAPABILITY: Final[Mapping[str, str]] = _facts(
    lambda m: (m.name, m.capability) if _received(m) and m.capability is not None else None
)

#: MT-HDR-6 / TK-HEADERS: the modern requests whose Mcp-Name header repeats a params field,
#: and that field.
NAME_PARAM: Final[Mapping[str, str]] = _facts(
    lambda m: (m.name, m.target)
    if _received(m) and Era.MODERN in m.eras and m.target is not None else None
)

#: MU-MRTR-5 / MU-MRTR-2: the requests an InputRequiredResult may carry, and the client
#: capability each needs.
INPUT_CAPABILITY: Final[Mapping[str, str]] = {
    m.name: m.capability for m in _ROWS if m.input is Input.ASKED and m.capability is not None
}

#: U-CANCEL-2: the requests a notifications/cancelled leaves running.
UNCANCELLABLE: Final = _names(lambda m: m.is_request and not m.cancellable)

#: TM-STORE-NOTIFY: the changes the server tells every client that may hear them; the only
#: notifications one worker passes on to the others.
BROADCASTS: Final = _names(lambda m: m.broadcast)

#: MU-SUB-1: a subscriptions/listen filter's booleans, and the notification each asks for.
LISTEN_FLAGS: Final[Mapping[str, str]] = {
    m.listen_flag: m.name for m in _ROWS if m.listen_flag is not None
}

#: U-RES-6, MU-SUB-10, TK-NOTIFY: the notifications a client gets only about what it
#: follows, and the params field naming it.
SUBSCRIBED: Final[Mapping[str, str]] = {
    m.name: m.target for m in _ROWS if not m.is_request and m.target is not None
}

#: The requests and the notifications with a class of their own in the lifecycle table.
REQUEST_CLASS: Final[Mapping[str, MessageClass]] = {
    m.name: m.lifecycle for m in _ROWS if m.is_request and m.lifecycle is not None
}
NOTIFICATION_CLASS: Final[Mapping[str, MessageClass]] = {
    m.name: m.lifecycle for m in _ROWS if not m.is_request and m.lifecycle is not None
}


def declared(capabilities: Mapping[str, Any], method: str) -> bool:
    """Whether ``capabilities`` (one side's declaration) allow ``method``: its row's
    capability is declared, with its feature flag set when it names one. A method no
    capability governs, or one the table does not know, needs nothing."""
    spec = METHODS.get(method)
    if spec is None:
        return True
    if spec.extension is not None:
        # TM-EXT-DECLARED: an extension's settings object, under capabilities.extensions,
        # with its feature flag; and the core capability the row names, if any.
        extensions = capabilities.get("extensions")
        settings = extensions.get(spec.extension) if isinstance(extensions, Mapping) else None
        if not isinstance(settings, Mapping):
            return False
        if spec.feature is not None and settings.get(spec.feature) is not True:
            return False
        return spec.capability is None or spec.capability in capabilities
    if spec.capability is None:
        return True
    if spec.capability not in capabilities:
        return False
    if spec.feature is None:
        return True
    declaration = capabilities[spec.capability]
    return isinstance(declaration, Mapping) and bool(declaration.get(spec.feature))


def check_served(served: Iterable[str]) -> None:
    """That the application's registries serve exactly the table's APP rows: a method a
    registry offers that has no row would be served with no capability, era or scope
    checked; a row no registry serves would be announced and then not found.

    Raises:
        ValueError: naming the methods out of place.
    """
    offered = frozenset(served)
    problems = []
    if unknown := sorted(offered - APP_METHODS):
        problems.append(f"served without a row: {', '.join(unknown)}")
    if missing := sorted(APP_METHODS - offered):
        problems.append(f"a row without a handler: {', '.join(missing)}")
    if problems:
        raise ValueError(
            "the registries and the method table (trio_mcp/protocol/_methods.py) disagree: "
            + "; ".join(problems)
        )
