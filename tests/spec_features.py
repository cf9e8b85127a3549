# The features a rule's status may wait for (spec/README.md, "Depends").
#
# A rule that trio-mcp does not keep, or keeps in part, says why in its Reason; when the why is
# "trio-mcp has no X", the rule names X in its Depends field, and X is a feature of this
# registry: its name, what it is, and the code whose existence says it has landed. The check
# (tests/test_spec_traceability.py, test_no_rule_waits_for_a_feature_that_exists) fails as soon
# as that code exists, pointing at every rule whose status was waiting for it. That is what left
# thirteen rules stale in issue 36: authorization and the tasks extension landed, and rules still
# said "there is no access control" and "no extension".
#
# The code is a name spec_rules.CodeIndex reads (with ast, importing nothing): a module, a
# class, or an attribute of one, as a rule's We do would name it. A feature to come is
# registered under the name its code is expected to take (a ServerConfig setting is the usual
# one, since a user turns a feature on there); whoever builds it under another name changes
# the registry in the same commit, and the check then names the rules to update.
from __future__ import annotations

from collections.abc import Mapping

import attrs

__all__ = ["FEATURES", "Feature"]


@attrs.frozen
class Feature:
    name: str
    """How a rule's Depends field names it: lower case, words joined by "-"."""
    what: str
    """One line: what the feature is."""
    code: str
    """The code whose existence says the feature exists."""


FEATURES: Mapping[str, Feature] = {
    feature.name: feature
    for feature in (
        # Landed: listed so that a rule written as if they had not is caught at once.
        Feature("auth", "authorization: trio-mcp as an OAuth 2.1 resource server",
                "trio_mcp.runtime._auth.Authenticator"),
        Feature("tasks", "the tasks extension of 2026-07-28 (SEP-2663)",
                "trio_mcp.runtime.tasks._tasks.TaskManager"),
        Feature("store", "a session store shared by several workers",
                "trio_mcp.runtime.store._redis.RedisStore"),
        Feature("workers", "several worker processes on one port",
                "trio_mcp.cli._workers.WorkerPool"),
        Feature("cache-hints-per-method", "caching hints chosen method by method",
                "ServerConfig.cache_hints"),
        Feature("rate-limit", "a limit over time on the requests of one client",
                "trio_mcp.app._guards.RateLimit"),
        Feature("url-elicitation", "a Context method that asks the user in URL mode",
                "trio_mcp.app._context.SessionContext.elicit_url"),
        # To come.
        Feature("unix-socket", "serving the endpoint on a Unix domain socket",
                "ServerConfig.unix_socket"),
        Feature("ping", "pinging a session's client on a schedule",
                "ServerConfig.ping_interval"),
        Feature("legacy-tasks", "the 2025-11-25 tasks utility, inside sessions",
                "trio_mcp.runtime.legacy._session.Session.tasks"),
    )
}
