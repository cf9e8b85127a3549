# Unit tests for trio_mcp.protocol._era: which era a request to the one endpoint belongs to
# (the body decides, TM-ERA-BODY), the envelope ladder a 2026-07-28 request climbs
# (-32602 → -32020 → -32022), the routing headers, and the Base64 header values.

from __future__ import annotations

import base64
import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import (
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    ErrorCode,
    Headers,
    Notification,
    RemoteProtocolError,
    Request,
)
from trio_mcp.protocol._era import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    Envelope,
    Era,
    ModernCall,
    ModernNotification,
    decode_header_value,
    has_modern_claim,
    route_other,
    route_post,
)
from trio_mcp.protocol._logging import LOG_LEVELS

MODERN = MODERN_VERSIONS[0]
LEGACY = LEGACY_VERSIONS[0]


def _headers(*pairs: tuple[str, str]) -> Headers:
    return Headers([(k.encode("latin-1"), v.encode("latin-1")) for k, v in pairs])


def _meta(version: Any = MODERN, **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}}
    meta.update(fields)
    return meta


def _body(
    method: str = "tools/list",
    *,
    id: Any = 7,
    meta: dict[str, Any] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """A JSON-RPC request (or a notification for id=None) with a modern envelope."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        body["id"] = id
    body["params"] = {**params, "_meta": _meta() if meta is None else meta}
    return body


def _modern_headers(
    method: str = "tools/list", name: str | None = None, version: str = MODERN
) -> list[tuple[str, str]]:
    pairs = [("MCP-Protocol-Version", version), ("Mcp-Method", method)]
    if name is not None:
        pairs.append(("Mcp-Name", name))
    return pairs


def _refusal(headers: Headers, body: Any) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        route_post(headers, body)
    return info.value


def _call(headers: Headers, body: Any) -> ModernCall:
    routed = route_post(headers, body)
    assert isinstance(routed, ModernCall)
    return routed


def _b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


# -- route_post: which era ----------------------------------------------------------------


@pytest.mark.spec("TM-ERA-BODY", "ML-COMPAT-3")
@pytest.mark.parametrize(
    "method", ["tools/list", "initialize", "ping", "logging/setLevel", "unknown/method"]
)
def test_claim_makes_a_request_modern_whatever_its_method(method: str) -> None:
    """A _meta protocolVersion claim makes a request modern, initialize included."""
    routed = route_post(_headers(*_modern_headers(method)), _body(method))

    assert isinstance(routed, ModernCall)
    assert method == routed.request.method


@pytest.mark.spec("TM-ERA-BODY")
def test_claim_wins_over_a_legacy_version_header() -> None:
    """A claim is modern even under a legacy MCP-Protocol-Version header (which then
    disagrees with the body: -32020, never the legacy path)."""
    headers = _headers(("MCP-Protocol-Version", LEGACY), ("Mcp-Method", "tools/list"))

    assert ErrorCode.HEADER_MISMATCH == _refusal(headers, _body()).code


@pytest.mark.spec("TM-ERA-BODY", "TM-ERA-SESSION")
def test_claim_with_a_session_id_is_still_modern() -> None:
    """A claim is modern even when the request names a session: the session id is ignored."""
    headers = _headers(*_modern_headers(), ("Mcp-Session-Id", "sid-1"))

    assert isinstance(route_post(headers, _body()), ModernCall)


@pytest.mark.spec("TM-ERA-BODY")
def test_claim_is_a_protocol_version_key_in_params_meta() -> None:
    """Only params._meta naming a protocol version is a claim."""
    assert [True, False, False, False, False] == [
        has_modern_claim(_body()),
        has_modern_claim({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        has_modern_claim(_body(meta={META_CLIENT_CAPABILITIES: {}})),
        has_modern_claim({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"_meta": 3}}),
        has_modern_claim([_body()]),
    ]


@pytest.mark.spec("MT-POST-4", "TM-ERA-BODY")
def test_batch_with_a_claim_is_invalid_request() -> None:
    """An array holding any modern message is refused with 400 -32600."""
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    err = _refusal(_headers(*_modern_headers()), [legacy, _body()])

    assert (400, ErrorCode.INVALID_REQUEST) == (err.http_status, err.code)


@pytest.mark.spec("TM-ERA-BODY")
def test_batch_without_a_claim_is_legacy() -> None:
    """An array of messages without a claim is the legacy path's to judge."""
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    assert Era.LEGACY == route_post(_headers(*_modern_headers()), [legacy, legacy])


@pytest.mark.spec("TM-ERA-BODY")
@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}},
        {"jsonrpc": "2.0", "id": 1},
        "not a message",
        42,
        None,
    ],
)
def test_responses_and_non_messages_are_legacy(body: Any) -> None:
    """A response, or what is no message at all, goes to the legacy path, modern header or not."""
    assert Era.LEGACY == route_post(_headers(*_modern_headers()), body)


@pytest.mark.spec("TM-ERA-BODY", "ML-COMPAT-3")
@pytest.mark.parametrize("version", [None, *LEGACY_VERSIONS, "2024-11-05"])
def test_initialize_without_claim_is_legacy(version: str | None) -> None:
    """An initialize without a claim selects the legacy era."""
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    headers = _headers() if version is None else _headers(("MCP-Protocol-Version", version))

    assert Era.LEGACY == route_post(headers, body)


@pytest.mark.spec("TM-ERA-INIT", "MT-HDR-16", "MJ-ERR-1")
def test_initialize_without_claim_under_a_modern_header_is_header_mismatch() -> None:
    """An initialize under a modern MCP-Protocol-Version header gets 400 -32020, its id echoed."""
    body = {"jsonrpc": "2.0", "id": "init-1", "method": "initialize", "params": {}}

    err = _refusal(_headers(("MCP-Protocol-Version", MODERN)), body)

    assert (400, ErrorCode.HEADER_MISMATCH, "init-1") == (
        err.http_status,
        err.code,
        err.request_id,
    )


@pytest.mark.spec("TM-ERA-BODY", "ML-META-2")
def test_no_claim_under_a_modern_header_without_session_is_modern() -> None:
    """Without a claim, a modern header and no session make the request modern, and its
    missing envelope then gets 400 -32602."""
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}

    err = _refusal(_headers(*_modern_headers()), body)

    assert (400, ErrorCode.INVALID_PARAMS, 3) == (err.http_status, err.code, err.request_id)


@pytest.mark.spec("TM-ERA-BODY")
def test_an_unknown_version_header_counts_as_modern() -> None:
    """A header naming no legacy revision (not only 2026-07-28) makes a claimless request modern."""
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}

    err = _refusal(_headers(("MCP-Protocol-Version", "v999.0.0")), body)

    assert ErrorCode.INVALID_PARAMS == err.code


@pytest.mark.spec("TM-ERA-BODY", "T-VER-3")
@pytest.mark.parametrize("version", [None, *LEGACY_VERSIONS, "2024-11-05", f"  {LEGACY}\t"])
def test_no_claim_under_a_legacy_or_no_header_is_legacy(version: str | None) -> None:
    """Without a claim, a request under a legacy header (OWS trimmed) or none is legacy."""
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    headers = _headers() if version is None else _headers(("MCP-Protocol-Version", version))

    assert Era.LEGACY == route_post(headers, body)


@pytest.mark.spec("TM-ERA-SESSION")
def test_no_claim_with_a_session_stays_legacy_whatever_the_header() -> None:
    """A claimless request naming a session is legacy even under a modern header (T-VER-4
    answers it there)."""
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    headers = _headers(*_modern_headers(), ("Mcp-Session-Id", "sid-1"))

    assert Era.LEGACY == route_post(headers, body)


@pytest.mark.spec("TM-ERA-NOTIFY", "MT-POST-5")
@pytest.mark.parametrize(
    "method", ["notifications/cancelled", "notifications/initialized", "notifications/other"]
)
def test_notification_with_a_claim_is_a_modern_notification(method: str) -> None:
    """A notification with a claim is accepted and not dispatched, its envelope unchecked."""
    body = _body(method, id=None, meta={META_PROTOCOL_VERSION: "v999"})

    routed = route_post(_headers(), body)

    expected = Notification(method=method, params=body["params"])
    assert ModernNotification(notification=expected) == routed


@pytest.mark.spec("TM-ERA-NOTIFY", "MT-POST-5")
def test_notification_under_a_modern_header_is_a_modern_notification() -> None:
    """A claimless notification under a modern header (no session) is a modern notification."""
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}

    routed = route_post(_headers(("MCP-Protocol-Version", MODERN)), body)

    assert isinstance(routed, ModernNotification)


@pytest.mark.spec("TM-ERA-NOTIFY", "TM-ERA-SESSION")
@pytest.mark.parametrize(
    "pairs",
    [
        [],
        [("MCP-Protocol-Version", LEGACY)],
        [("MCP-Protocol-Version", MODERN), ("Mcp-Session-Id", "sid-1")],
    ],
)
def test_claimless_notification_otherwise_is_legacy(pairs: list[tuple[str, str]]) -> None:
    """A claimless notification without a modern header, or naming a session, is legacy."""
    body = {"jsonrpc": "2.0", "method": "notifications/initialized"}

    assert Era.LEGACY == route_post(_headers(*pairs), body)


@pytest.mark.spec("TM-ERA-BODY")
def test_malformed_modern_message_is_invalid_request_with_its_id() -> None:
    """A claim on a message that is no valid request gets -32600, answering its id."""
    body = _body()
    body["jsonrpc"] = "1.0"

    err = _refusal(_headers(*_modern_headers()), body)

    assert (ErrorCode.INVALID_REQUEST, 7) == (err.code, err.request_id)


@pytest.mark.spec("TM-ERA-BODY", "MJ-ERR-1")
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=20,
    ),
    pairs=st.sampled_from(
        [
            [],
            [("MCP-Protocol-Version", LEGACY)],
            [("MCP-Protocol-Version", MODERN)],
            [("MCP-Protocol-Version", MODERN), ("Mcp-Session-Id", "s")],
            _modern_headers("tools/call", "x"),
        ]
    ),
)
def test_any_json_body_routes_or_raises_remote_protocol_error(
    body: Any, pairs: list[tuple[str, str]]
) -> None:
    """Whatever JSON a client posts, route_post routes it or refuses it with a
    RemoteProtocolError; nothing else escapes."""
    try:
        routed = route_post(_headers(*pairs), body)
    except RemoteProtocolError as exc:
        assert exc.request_id is None or isinstance(exc.request_id, str | int)
    else:
        assert isinstance(routed, Era | ModernCall | ModernNotification)


_json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=12)


@pytest.mark.spec("TM-ERA-BODY", "MJ-ERR-1")
@given(
    method=st.sampled_from(["tools/call", "tools/list", "resources/read", "initialize", "x"]),
    rid=_json_leaf,
    meta=st.dictionaries(
        st.sampled_from(
            [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL]
        ),
        _json_leaf | st.dictionaries(st.text(max_size=5), _json_leaf, max_size=2),
    ),
    extra=st.dictionaries(st.sampled_from(["name", "uri", "arguments"]), _json_leaf),
    pairs=st.lists(
        st.tuples(
            st.sampled_from(["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Mcp-Session-Id"]),
            st.sampled_from([MODERN, LEGACY, "tools/call", "x", "=?base64?eA==?=", "=?base64?"]),
        ),
        max_size=4,
    ),
)
def test_near_valid_envelopes_route_or_raise_remote_protocol_error(
    method: str, rid: Any, meta: dict[str, Any], extra: dict[str, Any], pairs: list[Any]
) -> None:
    """Envelopes close to valid, under any mix of routing headers, are routed or refused
    with a RemoteProtocolError, never anything else."""
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**extra, "_meta": meta}}
    with contextlib.suppress(RemoteProtocolError):
        route_post(_headers(*pairs), body)


# -- route_other ----------------------------------------------------------------------------


@pytest.mark.spec("TM-ERA-GET", "MT-POST-1")
@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("version", [MODERN, "v999.0.0"])
def test_get_or_delete_under_a_modern_header_without_session_is_405(
    method: str, version: str
) -> None:
    """A non-POST from a modern client gets 405 with Allow: POST."""
    with pytest.raises(RemoteProtocolError) as info:
        route_other(method, _headers(("MCP-Protocol-Version", version)))

    assert (405, (("allow", "POST"),)) == (info.value.http_status, info.value.headers)


@pytest.mark.spec("TM-ERA-GET", "TM-ERA-SESSION")
@pytest.mark.parametrize(
    "pairs",
    [
        [],
        [("MCP-Protocol-Version", LEGACY)],
        [("MCP-Protocol-Version", "2024-11-05")],
        [("MCP-Protocol-Version", MODERN), ("Mcp-Session-Id", "sid-1")],
    ],
)
def test_get_without_modern_header_or_with_session_is_legacy(
    pairs: list[tuple[str, str]],
) -> None:
    """A GET without a modern header, or naming a session, is left to the legacy path."""
    assert route_other("GET", _headers(*pairs)) is None


# -- the ladder: rung 1, the envelope ------------------------------------------------------


@pytest.mark.spec("ML-META-1", "ML-META-2")
def test_valid_envelope_is_read_into_the_call() -> None:
    """A request that passes the ladder carries its version, capabilities, info and level."""
    caps = {"elicitation": {}}
    info = {"name": "c", "version": "1"}
    body = _body(
        meta=_meta(
            **{META_CLIENT_CAPABILITIES: caps, META_CLIENT_INFO: info, META_LOG_LEVEL: "debug"}
        )
    )

    call = _call(_headers(*_modern_headers()), body)

    expected = Envelope(
        version=MODERN, client_capabilities=caps, client_info=info, log_level="debug"
    )
    assert expected == call.envelope
    assert Request(id=7, method="tools/list", params=body["params"]) == call.request


@pytest.mark.spec("ML-META-1")
def test_client_info_is_optional() -> None:
    """_meta without clientInfo passes (the suite's probe 105)."""
    call = _call(_headers(*_modern_headers()), _body())

    assert (None, None) == (call.envelope.client_info, call.envelope.log_level)


@pytest.mark.spec("ML-META-2", "MJ-ERR-1")
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": "x"},
        {"_meta": {META_CLIENT_CAPABILITIES: {}}},
        {"_meta": {META_PROTOCOL_VERSION: MODERN}},
        {"_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: []}},
        {"_meta": {META_PROTOCOL_VERSION: "", META_CLIENT_CAPABILITIES: {}}},
        {"_meta": {META_PROTOCOL_VERSION: 20260728, META_CLIENT_CAPABILITIES: {}}},
        {"_meta": {META_PROTOCOL_VERSION: None, META_CLIENT_CAPABILITIES: {}}},
        {"_meta": _meta(**{META_CLIENT_INFO: "me"})},
    ],
    ids=[
        "no-meta",
        "meta-not-object",
        "no-version",
        "no-capabilities",
        "capabilities-not-object",
        "empty-version",
        "number-version",
        "null-version",
        "info-not-object",
    ],
)
def test_missing_or_mistyped_envelope_field_is_invalid_params(params: dict[str, Any]) -> None:
    """A modern request whose _meta lacks a required field, or has one of the wrong type,
    gets 400 -32602 with its id."""
    body = {"jsonrpc": "2.0", "id": "r-1", "method": "server/discover", "params": params}

    err = _refusal(_headers(*_modern_headers("server/discover")), body)

    assert (400, ErrorCode.INVALID_PARAMS, "r-1") == (err.http_status, err.code, err.request_id)


@pytest.mark.spec("ML-META-2")
@pytest.mark.parametrize(
    "pairs",
    [
        [("MCP-Protocol-Version", MODERN)],
        [("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/list")],
        [("MCP-Protocol-Version", "v999.0.0"), ("Mcp-Method", "prompts/list")],
        [("MCP-Protocol-Version", MODERN), ("MCP-Protocol-Version", "v1")],
    ],
)
def test_envelope_rung_comes_before_the_header_rung(pairs: list[tuple[str, str]]) -> None:
    """A missing _meta field is -32602 even when the headers are wrong too."""
    no_version = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
    no_caps = _body("server/discover", meta={META_PROTOCOL_VERSION: MODERN})

    assert [ErrorCode.INVALID_PARAMS] * 2 == [
        _refusal(_headers(*pairs), no_version).code,
        _refusal(_headers(*pairs), no_caps).code,
    ]


@pytest.mark.spec("MU-LOG-5", "ML-META-2")
@pytest.mark.parametrize("level", ["verbose", "INFO", "", 3, {"level": "info"}, ["info"]])
def test_unknown_log_level_is_invalid_params(level: Any) -> None:
    """A per-request logLevel that is not an RFC 5424 level gets -32602."""
    body = _body(meta=_meta(**{META_LOG_LEVEL: level}))

    err = _refusal(_headers(*_modern_headers()), body)

    assert (400, ErrorCode.INVALID_PARAMS, 7) == (err.http_status, err.code, err.request_id)


@pytest.mark.spec("MU-LOG-3")
@pytest.mark.parametrize("level", LOG_LEVELS)
def test_every_log_level_is_accepted(level: str) -> None:
    """Each RFC 5424 level is a valid per-request logLevel."""
    call = _call(_headers(*_modern_headers()), _body(meta=_meta(**{META_LOG_LEVEL: level})))

    assert level == call.envelope.log_level


# -- the ladder: rung 2, the headers --------------------------------------------------------


@pytest.mark.spec("MT-HDR-2", "MT-HDR-16")
def test_version_header_disagreeing_with_meta_is_header_mismatch_before_version() -> None:
    """Header 2026-07-28 and _meta v999.0.0: 400 -32020, not -32022 (suite probe 302)."""
    body = _body("server/discover", meta=_meta("v999.0.0"))

    err = _refusal(_headers(*_modern_headers("server/discover")), body)

    assert (400, ErrorCode.HEADER_MISMATCH, 7) == (err.http_status, err.code, err.request_id)


@pytest.mark.spec("MT-HDR-1", "MT-HDR-5", "MT-HDR-22", "MT-HDR-16")
def test_claim_without_version_header_is_header_mismatch() -> None:
    """A modern request without MCP-Protocol-Version is refused with -32020, never legacy."""
    err = _refusal(_headers(("Mcp-Method", "tools/list")), _body())

    assert (400, ErrorCode.HEADER_MISMATCH) == (err.http_status, err.code)


@pytest.mark.spec("MT-HDR-6", "MT-HDR-22", "MT-HDR-16")
def test_missing_mcp_method_is_header_mismatch() -> None:
    """A modern request without Mcp-Method is refused with 400 -32020."""
    err = _refusal(_headers(("MCP-Protocol-Version", MODERN)), _body())

    assert (400, ErrorCode.HEADER_MISMATCH, 7) == (err.http_status, err.code, err.request_id)


@pytest.mark.spec("MT-HDR-12", "MT-HDR-14", "MT-HDR-13")
@pytest.mark.parametrize("value", ["prompts/list", "TOOLS/LIST", "Tools/List", "tools/list/"])
def test_mcp_method_must_equal_the_method_case_sensitively(value: str) -> None:
    """Mcp-Method is compared with the body's method, case-sensitively."""
    headers = _headers(("MCP-Protocol-Version", MODERN), ("Mcp-Method", value))

    assert ErrorCode.HEADER_MISMATCH == _refusal(headers, _body()).code


@pytest.mark.spec("MT-HDR-13")
@pytest.mark.parametrize(
    "names",
    [
        ("mcp-protocol-version", "mcp-method"),
        ("MCP-PROTOCOL-VERSION", "MCP-METHOD"),
        ("Mcp-Protocol-Version", "mCp-MeThOd"),
    ],
)
def test_header_names_compare_case_insensitively(names: tuple[str, str]) -> None:
    """The routing headers are found whatever the case of their names."""
    headers = _headers((names[0], MODERN), (names[1], "tools/list"))

    assert isinstance(route_post(headers, _body()), ModernCall)


@pytest.mark.spec("MT-HDR-12")
def test_optional_whitespace_around_header_values_is_trimmed() -> None:
    """Spaces and tabs around a header value are not part of it (RFC 9110 §5.5)."""
    headers = _headers(
        ("MCP-Protocol-Version", f" {MODERN}\t"),
        ("Mcp-Method", "  tools/call "),
        ("Mcp-Name", "  echo  "),
    )

    assert isinstance(route_post(headers, _body("tools/call", name="echo")), ModernCall)


@pytest.mark.spec("MT-HDR-12", "MT-HDR-16")
@pytest.mark.parametrize(
    ("method", "pairs"),
    [
        ("tools/list", [*_modern_headers(), ("MCP-Protocol-Version", MODERN)]),
        ("tools/list", [*_modern_headers(), ("mcp-method", "tools/list")]),
        ("tools/call", [*_modern_headers("tools/call", "echo"), ("MCP-NAME", "echo")]),
    ],
    ids=["version", "method", "name"],
)
def test_repeated_routing_header_is_header_mismatch(
    method: str, pairs: list[tuple[str, str]]
) -> None:
    """A routing header sent twice is ambiguous and refused, even with equal values."""
    err = _refusal(_headers(*pairs), _body(method, name="echo"))

    assert (400, ErrorCode.HEADER_MISMATCH) == (err.http_status, err.code)


@pytest.mark.spec("MT-HDR-6", "MT-HDR-22", "MT-HDR-16")
@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "echo"}),
        ("prompts/get", {"name": "greet"}),
        ("resources/read", {"uri": "test://a"}),
    ],
)
def test_mcp_name_is_required_for_the_naming_methods(method: str, params: dict[str, Any]) -> None:
    """tools/call, prompts/get and resources/read without Mcp-Name get 400 -32020."""
    err = _refusal(_headers(*_modern_headers(method)), _body(method, **params))

    assert (400, ErrorCode.HEADER_MISMATCH) == (err.http_status, err.code)


@pytest.mark.spec("MT-HDR-6")
@pytest.mark.parametrize(
    "method", ["tools/list", "prompts/list", "resources/list", "server/discover"]
)
def test_mcp_name_is_not_required_elsewhere(method: str) -> None:
    """The methods that name nothing pass without Mcp-Name."""
    assert isinstance(route_post(_headers(*_modern_headers(method)), _body(method)), ModernCall)


#: Standard headers whose value holds what a header value may not, although it equals what the
#: body says (so only the check of its characters can refuse it): (label, method, params,
#: _meta version, the headers).
INVALID_CHARACTERS: list[tuple[str, str, dict[str, Any], str, list[tuple[str, str]]]] = [
    ("version-control", "tools/list", {}, f"{MODERN}\x01",
     _modern_headers(version=f"{MODERN}\x01")),
    ("method-control", "tools/list\x7f", {}, MODERN, _modern_headers("tools/list\x7f")),
    ("name-control", "tools/call", {"name": "ec\x1bho"}, MODERN,
     _modern_headers("tools/call", "ec\x1bho")),
    ("name-latin-1", "tools/call", {"name": "caf\xe9"}, MODERN,
     _modern_headers("tools/call", "caf\xe9")),
    ("uri-nul", "resources/read", {"uri": "test://a\x00"}, MODERN,
     _modern_headers("resources/read", "test://a\x00")),
]


@pytest.mark.spec("MT-HDR-22", "MT-HDR-16")
@pytest.mark.parametrize(
    ("label", "method", "params", "version", "pairs"),
    INVALID_CHARACTERS,
    ids=[c[0] for c in INVALID_CHARACTERS],
)
def test_a_standard_header_with_invalid_characters_is_header_mismatch(
    label: str, method: str, params: dict[str, Any], version: str, pairs: list[tuple[str, str]]
) -> None:
    """A control character or a byte outside ASCII in a routing header: 400 -32020."""
    err = _refusal(_headers(*pairs), _body(method, meta=_meta(version), **params))

    assert (400, ErrorCode.HEADER_MISMATCH, 7) == (err.http_status, err.code, err.request_id)
    assert "characters" in err.message


@pytest.mark.spec("MT-HDR-12", "MT-HDR-14")
@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "echo"}, "wrong_tool_name"),
        ("tools/call", {"name": "echo"}, "ECHO"),
        ("prompts/get", {"name": "greet"}, "great"),
        ("resources/read", {"uri": "test://a"}, "test://b"),
        ("resources/read", {"uri": "test://a", "name": "x"}, "x"),
    ],
)
def test_mcp_name_disagreeing_with_the_body_is_header_mismatch(
    method: str, params: dict[str, Any], name: str
) -> None:
    """Mcp-Name must equal params.name (tools, prompts) or params.uri (resources)."""
    err = _refusal(_headers(*_modern_headers(method, name)), _body(method, **params))

    assert (400, ErrorCode.HEADER_MISMATCH) == (err.http_status, err.code)


@pytest.mark.spec("MT-HDR-10", "MT-HDR-21")
@pytest.mark.parametrize(
    ("method", "params", "value"),
    [
        ("tools/call", {"name": "echo"}, "echo"),
        ("tools/call", {"name": "échø"}, _b64("échø")),
        ("tools/call", {"name": "=?base64?x?="}, _b64("=?base64?x?=")),
        ("prompts/get", {"name": " padded "}, _b64(" padded ")),
        ("resources/read", {"uri": "test://template/123/data"}, "test://template/123/data"),
        ("resources/read", {"uri": "file:///ü"}, _b64("file:///ü")),
    ],
)
def test_mcp_name_is_compared_after_base64_decoding(
    method: str, params: dict[str, Any], value: str
) -> None:
    """An encoded Mcp-Name is decoded before it is compared with the body."""
    assert isinstance(
        route_post(_headers(*_modern_headers(method, value)), _body(method, **params)), ModernCall
    )


@pytest.mark.spec("MT-HDR-10", "TM-MOD-B64", "MT-HDR-16")
@pytest.mark.parametrize(
    "value", ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "=?base64?//4=?="]
)
def test_mcp_name_with_an_undecodable_value_is_header_mismatch(value: str) -> None:
    """A malformed encoded Mcp-Name is refused with 400 -32020."""
    err = _refusal(
        _headers(*_modern_headers("tools/call", value)), _body("tools/call", name="Hello")
    )

    assert (400, ErrorCode.HEADER_MISMATCH) == (err.http_status, err.code)


# -- the ladder: rung 3, the version --------------------------------------------------------


@pytest.mark.spec("MT-HDR-3", "ML-VER-1", "MJ-ERR-1")
def test_unsupported_version_is_32022_listing_supported_and_requested() -> None:
    """Header and _meta both v999.0.0: 400 -32022, data.supported the modern versions and
    data.requested the version asked for (suite probe 301)."""
    body = _body("server/discover", id=301, meta=_meta("v999.0.0"))

    err = _refusal(_headers(*_modern_headers("server/discover", version="v999.0.0")), body)

    assert (400, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, 301) == (
        err.http_status,
        err.code,
        err.request_id,
    )
    assert {"supported": list(MODERN_VERSIONS), "requested": "v999.0.0"} == err.data


@pytest.mark.spec("MT-HDR-3", "ML-VER-1", "TM-ERA-BODY")
def test_legacy_version_in_a_claim_is_unsupported_in_the_modern_era() -> None:
    """A claim naming a legacy revision is modern, and that revision is not a modern one."""
    body = _body(meta=_meta(LEGACY))

    err = _refusal(_headers(*_modern_headers(version=LEGACY)), body)

    assert (ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, LEGACY) == (err.code, err.data["requested"])


@pytest.mark.spec("MT-HDR-2", "MT-HDR-3")
def test_header_rung_comes_before_the_version_rung() -> None:
    """An unsupported version with a missing Mcp-Method is -32020, the earlier rung."""
    body = _body(meta=_meta("v999.0.0"))

    err = _refusal(_headers(("MCP-Protocol-Version", "v999.0.0")), body)

    assert ErrorCode.HEADER_MISMATCH == err.code


# -- decode_header_value --------------------------------------------------------------------


@pytest.mark.spec("MT-HDR-10", "MT-HDR-21")
@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"),
        ("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?="),
        ("=?base64??=", ""),
    ],
)
def test_encoded_value_decodes_to_its_utf8_text(value: str, text: str) -> None:
    """=?base64?…?= stands for the UTF-8 text its padded standard Base64 encodes (the spec's
    own examples)."""
    assert text == decode_header_value(value)


@pytest.mark.spec("TM-MOD-B64", "MT-HDR-21")
@pytest.mark.parametrize(
    "value",
    [
        "=?base64?SGVsbG8?=",
        "=?base64?SGVsbG8==?=",
        "=?base64?SGVs!!!bG8=?=",
        "=?base64?SGVs bG8=?=",
        "=?base64?SGVsbG9=?=",
        "=?base64?-_8=?=",
        "=?base64?//4=?=",
        "=?base64?=?=",
    ],
    ids=[
        "padding-left-out",
        "excess-padding",
        "invalid-characters",
        "inner-space",
        "bits-past-the-end",
        "url-safe-alphabet",
        "not-utf8",
        "lone-padding",
    ],
)
def test_non_canonical_base64_is_refused(value: str) -> None:
    """Only canonical, padded standard Base64 of UTF-8 decodes; anything else is None."""
    assert decode_header_value(value) is None


@pytest.mark.spec("MT-HDR-21")
@pytest.mark.parametrize(
    "value",
    [
        "SGVsbG8=",
        "=?base64?SGVsbG8=",
        "SGVsbG8=?=",
        "=?BASE64?SGVsbG8=?=",
        "=?Base64?SGVsbG8=?=",
        "=?base64 ?SGVsbG8=?=",
        "us-west1",
        "",
    ],
)
def test_value_without_both_lowercase_markers_is_literal(value: str) -> None:
    """A value that does not both start with =?base64? and end with ?= (markers lowercase,
    case-sensitive) is the literal text."""
    assert value == decode_header_value(value)


@pytest.mark.spec("MT-HDR-21")
def test_markers_around_nothing_are_the_empty_value() -> None:
    """=?base64??= holds both markers and the Base64 of the empty string between them: it is
    the empty value, which is what encoding "" gives."""
    assert "" == decode_header_value("=?base64??=")
    assert "=?base64??=" == _b64("")


@pytest.mark.spec("MT-HDR-21")
def test_overlapping_markers_are_a_literal_value() -> None:
    """=?base64?= holds no prefix-payload-suffix (the markers would share its "?"), so it is
    the literal text, as a client that encodes only true sentinel values sends it."""
    assert "=?base64?=" == decode_header_value("=?base64?=")


@pytest.mark.spec("MT-HDR-10", "MT-HDR-21", "TM-MOD-B64")
@given(text=st.text(st.characters(codec="utf-8")))
def test_base64_of_any_text_round_trips(text: str) -> None:
    """Standard padded Base64 of any text's UTF-8, in the markers, decodes back to the text."""
    assert text == decode_header_value(_b64(text))


# -- what a -32020 says: what goes in the header and where its value comes from -------------

VERSION = "params._meta.io.modelcontextprotocol/protocolVersion"


@pytest.mark.spec("MT-HDR-16", "TM-TASK-HEADERS", "J-ERR-4")
@pytest.mark.parametrize(
    ("headers", "method", "params", "says", "data"),
    [
        ([("Mcp-Method", "tools/list")], "tools/list", {},
         f"the MCP-Protocol-Version header is missing; it repeats {VERSION}",
         {"header": "MCP-Protocol-Version", "source": VERSION, "expected": MODERN}),
        ([("MCP-Protocol-Version", "2026-01-01"), ("Mcp-Method", "tools/list")],
         "tools/list", {}, f"MCP-Protocol-Version does not repeat {VERSION}",
         {"header": "MCP-Protocol-Version", "source": VERSION, "expected": MODERN}),
        ([("MCP-Protocol-Version", MODERN)], "tools/list", {},
         "the Mcp-Method header is missing; it repeats the body's method",
         {"header": "Mcp-Method", "source": "method", "expected": "tools/list"}),
        ([("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/LIST")], "tools/list", {},
         "Mcp-Method does not repeat the body's method exactly",
         {"header": "Mcp-Method", "source": "method", "expected": "tools/list"}),
        (_modern_headers("tasks/get"), "tasks/get", {"taskId": "t-123"},
         "the Mcp-Name header is missing; a tasks/get request repeats its params.taskId there",
         {"header": "Mcp-Name", "source": "params.taskId", "expected": "t-123"}),
        (_modern_headers("tools/call", name="other"), "tools/call", {"name": "echo"},
         "Mcp-Name does not repeat params.name (a value that is not ASCII goes as "
         "=?base64?<padded Base64 of its UTF-8>?=)",
         {"header": "Mcp-Name", "source": "params.name", "expected": "echo"}),
        (_modern_headers("resources/read", name="=?base64?!!?="), "resources/read",
         {"uri": "x://y"},
         "the Mcp-Name header is not valid =?base64?<padded Base64 of its UTF-8>?=",
         {"header": "Mcp-Name", "source": "params.uri", "expected": "x://y"}),
    ],
)
def test_a_header_refusal_names_the_header_and_where_its_value_comes_from(
    headers: list[tuple[str, str]], method: str, params: dict[str, Any], says: str,
    data: dict[str, Any],
) -> None:
    """Each -32020 for a routing header says in one sentence what is wrong and which part of
    the body the header repeats; its data names the header, that source and the value
    expected, so the client can fix its request."""
    refusal = _refusal(_headers(*headers), _body(method, **params))

    assert ErrorCode.HEADER_MISMATCH == refusal.code
    assert 400 == refusal.http_status
    assert f"Header mismatch: {says}." == refusal.message
    assert len(refusal.message) <= 160
    assert data == refusal.data


def test_a_long_expected_value_is_not_echoed() -> None:
    """The expected value goes into data only when short: a client that sends a long name
    does not get it back doubled."""
    refusal = _refusal(
        _headers(*_modern_headers("tools/call", name="x")), _body("tools/call", name="y" * 5000)
    )

    assert {"header": "Mcp-Name", "source": "params.name"} == refusal.data
