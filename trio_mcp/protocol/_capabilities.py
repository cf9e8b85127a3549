# Which server capability each method needs declared (spec/lifecycle.md L-CAP-1, spec/modern.md
# MT-HDR-4): a method behind a capability the server did not declare is not served. The same
# in both eras; a legacy session holds to what its initialize declared. No I/O.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["LIST_CHANGED", "METHOD_CAPABILITY", "announces", "declares"]

#: The server capability a method needs declared before it is served.
METHOD_CAPABILITY: Final = {
    "tools/list": "tools",
    "tools/call": "tools",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "resources/subscribe": "resources",
    "resources/unsubscribe": "resources",
    "completion/complete": "completions",
}

#: The list_changed notification of each kind, and the capability that announces it.
LIST_CHANGED: Final = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


def declares(capabilities: Mapping[str, Any], method: str) -> bool:
    """Whether ``capabilities`` let ``method`` be served (a method no capability governs is)."""
    capability = METHOD_CAPABILITY.get(method)
    return capability is None or capability in capabilities


def announces(capabilities: Mapping[str, Any], notification: str) -> bool:
    """Whether ``capabilities`` declared the change ``notification`` tells of: its kind with
    ``listChanged`` (U-TOOL-2, U-RES-2, U-PROMPT-4), or resources with ``subscribe`` for
    notifications/resources/updated; any other notification needs nothing declared."""
    if notification == "notifications/resources/updated":
        resources = capabilities.get("resources")
        return isinstance(resources, Mapping) and bool(resources.get("subscribe"))
    kind = LIST_CHANGED.get(notification)
    if kind is None:
        return True
    declared = capabilities.get(kind)
    return isinstance(declared, Mapping) and bool(declared.get("listChanged"))
