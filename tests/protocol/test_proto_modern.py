# Unit tests for trio_mcp.protocol._modern: the methods a 2026-07-28 request may call, tool
# parameters mirrored into Mcp-Param-* headers, client capabilities, how results are dressed
# (resultType, serverInfo, caching hints), the subscriptions/listen filter, and the errors a
# modern request gets.

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import (
    MODERN_VERSIONS,
    CacheHint,
    CacheScope,
    ErrorCode,
    ErrorResponse,
    Headers,
    RemoteProtocolError,
    Request,
)
from trio_mcp.protocol._errors import resource_not_found
from trio_mcp.protocol._jsonrpc import error_response
from trio_mcp.protocol._methods import (
    CACHEABLE_METHODS,
    CORE_METHODS,
    INPUT_METHODS,
    MODERN_METHODS,
)
from trio_mcp.protocol._modern import (
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    NOT_CACHEABLE,
    ListenFilter,
    check_param_headers,
    complete_result,
    discover_result,
    error_status,
    is_retry,
    method_not_found,
    missing_capability,
    modern_error,
    param_headers,
    stamp_subscription,
    undeclared,
)

SERVER_INFO = {"name": "srv", "version": "1.0"}
SAFE = 2**53 - 1
CALL = Request(id=9, method="tools/call", params={"name": "t"})


def _headers(*pairs: tuple[str, str]) -> Headers:
    return Headers([(k.encode("latin-1"), v.encode("latin-1")) for k, v in pairs])


def _b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


def _schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def _param(type_: Any, header: Any = "X", **more: Any) -> dict[str, Any]:
    return {"type": type_, "x-mcp-header": header, **more}


def _param_refusal(
    mirrored: dict[str, tuple[str, ...]], arguments: dict[str, Any], headers: Headers
) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        check_param_headers(mirrored, arguments, headers, CALL)
    return info.value


# -- methods --------------------------------------------------------------------------------


@pytest.mark.spec("MT-HDR-4", "ML-VER-2")
def test_modern_methods_are_the_2026_client_requests() -> None:
    """A modern request may call exactly these methods; the legacy-only ones are not among them."""
    assert {
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "subscriptions/listen",
    } == MODERN_METHODS & CORE_METHODS
    # The tasks extension's are its rows, not the core's (spec/tasks.md TM-TASK-EXT).
    assert {"tasks/get", "tasks/update", "tasks/cancel"} <= MODERN_METHODS - CORE_METHODS


@pytest.mark.spec("TM-ERA-REMOVED")
def test_legacy_only_methods_are_not_modern_methods() -> None:
    """initialize, ping, logging/setLevel and resources/(un)subscribe are not served modern."""
    removed = {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    }

    assert set() == removed & MODERN_METHODS


@pytest.mark.spec("MT-HDR-4", "TM-ERA-REMOVED", "MJ-ERR-1")
def test_method_not_found_is_404_with_32601_and_the_id() -> None:
    """An unimplemented method gets 404 Not Found and -32601, answering the request's id."""
    err = method_not_found(Request(id=500, method="ping"))

    assert (404, ErrorCode.METHOD_NOT_FOUND, 500) == (err.http_status, err.code, err.request_id)


@pytest.mark.spec("MU-MRTR-1", "MU-MRTR-13")
def test_only_three_methods_may_ask_for_input() -> None:
    """Only tools/call, prompts/get and resources/read may answer input_required."""
    assert {"tools/call", "prompts/get", "resources/read"} == INPUT_METHODS


# -- client capabilities --------------------------------------------------------------------


@pytest.mark.spec("ML-META-3")
@pytest.mark.parametrize(
    ("required", "declared", "missing"),
    [
        ({"sampling": {}}, {}, {"sampling": {}}),
        ({"sampling": {}}, {"sampling": {}}, {}),
        ({"sampling": {}}, {"sampling": True}, {"sampling": {}}),
        ({"elicitation": {"url": {}}}, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ({"elicitation": {"url": {}}}, {"elicitation": {"url": {}}}, {}),
        ({"elicitation": {}}, {"elicitation": {"form": {}}}, {}),
        (
            {"sampling": {"tools": {}}, "roots": {}},
            {"sampling": {}, "roots": {"listChanged": True}},
            {"sampling": {"tools": {}}},
        ),
    ],
)
def test_undeclared_names_what_the_request_lacks(
    required: dict[str, Any], declared: dict[str, Any], missing: dict[str, Any]
) -> None:
    """The capabilities, and sub-features, a request needs but did not declare."""
    assert missing == undeclared(required, declared)


@pytest.mark.spec("ML-META-3")
def test_missing_capability_is_400_32021_naming_them_as_an_object() -> None:
    """A missing client capability gets 400 -32021, data.requiredCapabilities an object."""
    err = missing_capability({"sampling": {}}, 401)

    assert (400, ErrorCode.MISSING_CLIENT_CAPABILITY, 401) == (
        err.http_status,
        err.code,
        err.request_id,
    )
    assert {"requiredCapabilities": {"sampling": {}}} == err.data


# -- param_headers: which parameters are mirrored ------------------------------------------


@pytest.mark.spec("MT-HDR-7", "MT-HDR-8", "MT-HDR-17")
def test_string_integer_and_boolean_parameters_are_mirrored() -> None:
    """Annotated top-level parameters map from their lower-cased header name to their path."""
    schema = _schema(
        region=_param("string", "Region"),
        count=_param("integer", "Count"),
        dry=_param("boolean", "Dry-Run"),
        other={"type": "string"},
    )

    assert {"region": ("region",), "count": ("count",), "dry-run": ("dry",)} == param_headers(
        schema
    )


@pytest.mark.spec("MT-HDR-18", "MT-HDR-19")
def test_nested_properties_chains_are_mirrored() -> None:
    """A parameter reached by properties keys alone, however deep, is mirrored at its path."""
    schema = _schema(
        a={
            "type": "object",
            "properties": {"b": {"type": "object", "properties": {"c": _param("string", "Deep")}}},
        },
    )

    assert {"deep": ("a", "b", "c")} == param_headers(schema)


@pytest.mark.spec("MT-HDR-18")
def test_annotation_like_data_is_not_an_annotation() -> None:
    """A property named x-mcp-header, or x-mcp-header inside default/const/examples, is data."""
    schema = _schema(
        **{"x-mcp-header": {"type": "string"}},
        d={"type": "object", "default": {"x-mcp-header": "D"}, "examples": [{"x-mcp-header": "E"}]},
        c={"const": {"x-mcp-header": "C"}},
    )

    assert {} == param_headers(schema)


@pytest.mark.spec("MT-HDR-17")
@pytest.mark.parametrize("type_", ["number", "object", "array", "null", None])
def test_parameters_of_other_types_are_refused(type_: Any) -> None:
    """number (and every non-primitive, or no type at all) cannot carry x-mcp-header."""
    param = _param(type_) if type_ is not None else {"x-mcp-header": "X"}

    with pytest.raises(ValueError, match="string, integer and boolean"):
        param_headers(_schema(p=param))


@pytest.mark.spec("MT-HDR-17")
@pytest.mark.parametrize("type_", [["string", "null"], ["integer"]])
def test_a_type_array_is_refused_with_value_error(type_: list[str]) -> None:
    """A type given as an array is not one primitive type: the tool definition is refused
    with ValueError like every other invalid annotation."""
    with pytest.raises(ValueError):
        param_headers(_schema(p=_param(type_)))


@pytest.mark.spec("MT-HDR-8")
@pytest.mark.parametrize(
    "header", ["", "has space", "colon:", "line\r\nbreak", "tab\t", "ü", "(paren)", 5, None]
)
def test_header_names_that_are_not_tokens_are_refused(header: Any) -> None:
    """x-mcp-header is a non-empty RFC 9110 token: no spaces, separators, controls or non-ASCII."""
    with pytest.raises(ValueError, match="token"):
        param_headers(_schema(p=_param("string", header)))


@pytest.mark.spec("MT-HDR-8")
def test_every_tchar_is_allowed_in_a_header_name() -> None:
    """All of RFC 9110's tchar may appear in x-mcp-header."""
    name = "!#$%&'*+-.^_`|~09AZaz"

    assert {name.lower(): ("p",)} == param_headers(_schema(p=_param("string", name)))


@pytest.mark.spec("MT-HDR-8")
def test_header_names_repeated_case_insensitively_are_refused() -> None:
    """x-mcp-header values are unique case-insensitively across the whole inputSchema."""
    schema = _schema(
        a=_param("string", "Region"),
        b={"type": "object", "properties": {"c": _param("string", "REGION")}},
    )

    with pytest.raises(ValueError, match="twice"):
        param_headers(schema)


_UNREACHABLE = {
    "root": {"type": "string", "x-mcp-header": "R"},
    "items": _schema(a={"type": "array", "items": _param("string")}),
    "items-properties": _schema(
        a={"type": "array", "items": {"type": "object", "properties": {"b": _param("string")}}}
    ),
    "prefixItems": _schema(a={"type": "array", "prefixItems": [_param("string")]}),
    "anyOf": _schema(a={"anyOf": [_param("string"), {"type": "integer"}]}),
    "oneOf": {"type": "object", "oneOf": [_schema(a=_param("string"))]},
    "allOf": {"type": "object", "allOf": [_schema(a=_param("string"))]},
    "not": _schema(a={"not": _param("string")}),
    "if-then-else": {
        "type": "object",
        "if": _schema(a=_param("string")),
        "then": {},
        "else": {},
    },
    "then": {"type": "object", "if": {}, "then": _schema(a=_param("string"))},
    "$defs-via-$ref": {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/s"}},
        "$defs": {"s": _param("string")},
    },
    "$ref-sibling": {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/s", "x-mcp-header": "X"}},
        "$defs": {"s": {"type": "string"}},
    },
    "definitions": {"type": "object", "definitions": {"s": _schema(a=_param("string"))}},
    "additionalProperties": {"type": "object", "additionalProperties": _param("string")},
    "patternProperties": {"type": "object", "patternProperties": {"^a": _param("string")}},
    "dependentSchemas": {"type": "object", "dependentSchemas": {"a": _schema(b=_param("string"))}},
    "contains": _schema(a={"type": "array", "contains": _param("string")}),
    "propertyNames": {"type": "object", "propertyNames": _param("string")},
    "unevaluatedProperties": {"type": "object", "unevaluatedProperties": _param("string")},
}


@pytest.mark.spec("MT-HDR-18")
@pytest.mark.parametrize("schema", list(_UNREACHABLE.values()), ids=list(_UNREACHABLE))
def test_annotations_off_a_properties_chain_are_refused(schema: dict[str, Any]) -> None:
    """x-mcp-header anywhere but on a chain of properties keys from the root (under items,
    composition, conditionals, $defs, behind $ref) makes the tool definition invalid."""
    with pytest.raises(ValueError, match=r"reachable|string, integer and boolean"):
        param_headers(schema)


@pytest.mark.spec("MT-HDR-18")
def test_annotation_under_content_schema_is_refused() -> None:
    """contentSchema is a 2020-12 subschema keyword too: an annotation below it is anywhere
    else than a properties chain, so the tool definition is invalid (the Python SDK client
    drops such a tool)."""
    schema = _schema(
        doc={
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": _schema(a=_param("string")),
        },
    )

    with pytest.raises(ValueError, match="reachable"):
        param_headers(schema)


# -- check_param_headers: do the headers agree with the arguments ---------------------------


MIRRORED = {"region": ("region",), "count": ("count",), "dry": ("opts", "dry")}


@pytest.mark.spec("MT-HDR-12", "MT-HDR-19", "MT-HDR-20")
def test_headers_agreeing_with_the_arguments_pass() -> None:
    """Every mirrored argument present and non-null has its header with the same value."""
    headers = _headers(
        ("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "42"), ("Mcp-Param-Dry", "true")
    )
    arguments = {"region": "us-west1", "count": 42, "opts": {"dry": True}}

    check_param_headers(MIRRORED, arguments, headers, CALL)


@pytest.mark.spec("MT-HDR-20", "MT-HDR-19")
@pytest.mark.parametrize(
    "arguments",
    [{}, {"region": None, "count": None}, {"opts": None}, {"opts": "flat"}, {"opts": {}}],
)
def test_absent_or_null_arguments_need_no_header(arguments: dict[str, Any]) -> None:
    """No header is expected for an argument that is null or not in the arguments."""
    check_param_headers(MIRRORED, arguments, _headers(), CALL)


@pytest.mark.spec("MT-HDR-20", "MT-HDR-16")
@pytest.mark.parametrize(
    ("arguments", "pairs"),
    [
        ({"region": "eu"}, []),
        ({"opts": {"dry": False}}, []),
        ({"count": 0}, []),
        ({}, [("Mcp-Param-Region", "eu")]),
        ({"region": None}, [("Mcp-Param-Region", "eu")]),
        ({"opts": {}}, [("Mcp-Param-Dry", "false")]),
    ],
    ids=[
        "string-missing",
        "nested-missing",
        "zero-missing",
        "absent-sent",
        "null-sent",
        "nested-absent-sent",
    ],
)
def test_header_present_iff_argument_present(
    arguments: dict[str, Any], pairs: list[tuple[str, str]]
) -> None:
    """A body value without its header, or a header without a body value, is 400 -32020."""
    err = _param_refusal(MIRRORED, arguments, _headers(*pairs))

    assert (400, ErrorCode.HEADER_MISMATCH, 9) == (err.http_status, err.code, err.request_id)


@pytest.mark.spec("MT-HDR-13")
@pytest.mark.parametrize("name", ["mcp-param-region", "MCP-PARAM-REGION", "Mcp-Param-rEgIoN"])
def test_param_header_names_compare_case_insensitively(name: str) -> None:
    """Mcp-Param-* headers are found whatever the case of their names."""
    check_param_headers(MIRRORED, {"region": "eu"}, _headers((name, "eu")), CALL)


@pytest.mark.spec("MT-HDR-14", "MT-HDR-13")
@pytest.mark.parametrize("value", ["EU", "Eu", "e u", "eu."])
def test_string_values_compare_case_sensitively(value: str) -> None:
    """Header values are case-sensitive and compared exactly."""
    err = _param_refusal(MIRRORED, {"region": "eu"}, _headers(("Mcp-Param-Region", value)))

    assert ErrorCode.HEADER_MISMATCH == err.code


@pytest.mark.spec("MT-HDR-12")
def test_optional_whitespace_around_a_param_value_is_trimmed() -> None:
    """Spaces and tabs around an Mcp-Param value are not part of it."""
    check_param_headers(
        MIRRORED, {"region": "eu"}, _headers(("Mcp-Param-Region", " \teu \t")), CALL
    )


@pytest.mark.spec("MT-HDR-10", "MT-HDR-21")
@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("Hello", "=?base64?SGVsbG8=?="),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ("SGVsbG8=", "SGVsbG8="),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
    ],
)
def test_param_values_are_compared_after_decoding(value: str, header: str) -> None:
    """An encoded value is decoded before the comparison; a value without both markers is
    literal (the suite's cases 200, 203 and 204)."""
    check_param_headers(MIRRORED, {"region": value}, _headers(("Mcp-Param-Region", header)), CALL)


@pytest.mark.spec("TM-MOD-B64", "MT-HDR-16", "MT-HDR-11")
@pytest.mark.parametrize("header", ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?="])
def test_undecodable_param_values_are_refused(header: str) -> None:
    """Base64 without its padding or with invalid characters is 400 -32020 (cases 201, 202)."""
    err = _param_refusal(MIRRORED, {"region": "Hello"}, _headers(("Mcp-Param-Region", header)))

    assert (400, ErrorCode.HEADER_MISMATCH) == (err.http_status, err.code)


@pytest.mark.spec("MT-HDR-11", "MT-HDR-16")
@pytest.mark.parametrize("raw", ["a\x00b", "a\x01b", "a\rb", "a\nb", "a\x7fb", "caf\xe9"])
def test_param_values_with_invalid_characters_are_refused(raw: str) -> None:
    """A recognized Mcp-Param header holding control or non-ASCII bytes is refused, even when
    the body holds the same text."""
    err = _param_refusal(MIRRORED, {"region": raw}, _headers(("Mcp-Param-Region", raw)))

    assert (400, ErrorCode.HEADER_MISMATCH) == (err.http_status, err.code)


@pytest.mark.spec("MT-HDR-12")
def test_inner_tab_and_space_are_valid_characters() -> None:
    """Space and horizontal tab inside a value are allowed plain."""
    check_param_headers(
        MIRRORED, {"region": "a b\tc"}, _headers(("Mcp-Param-Region", "a b\tc")), CALL
    )


@pytest.mark.spec("MT-HDR-12", "MT-HDR-16")
def test_repeated_param_header_is_refused() -> None:
    """An Mcp-Param header sent twice is refused, even with equal values."""
    headers = _headers(("Mcp-Param-Region", "eu"), ("mcp-param-region", "eu"))

    assert ErrorCode.HEADER_MISMATCH == _param_refusal(MIRRORED, {"region": "eu"}, headers).code


@pytest.mark.spec("MT-HDR-7")
def test_unrecognized_param_headers_are_ignored() -> None:
    """An Mcp-Param header no parameter declares is not the server's to judge."""
    headers = _headers(("Mcp-Param-Region", "eu"), ("Mcp-Param-Other", "\x01whatever"))

    check_param_headers(MIRRORED, {"region": "eu"}, headers, CALL)


@pytest.mark.spec("MT-HDR-15")
@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("42", 42),
        ("042", 42),
        ("-7", -7),
        ("0", 0),
        ("-0", 0),
        ("+42", 42),
        (str(SAFE), SAFE),
        (str(-SAFE), -SAFE),
    ],
)
def test_integers_compare_numerically(header: str, value: int) -> None:
    """Integer values compare as numbers, so "042" is 42."""
    check_param_headers(MIRRORED, {"count": value}, _headers(("Mcp-Param-Count", header)), CALL)


@pytest.mark.spec("MT-HDR-15")
@pytest.mark.parametrize(("header", "value"), [("42.0", 42), ("42", 42.0), ("42.0", 42.0)])
def test_integral_decimals_compare_equal_to_integers(header: str, value: float) -> None:
    """The spec's own example: 42.0 and 42 are considered equal, whichever side holds which
    (a client rendering a float argument with str() sends "42.0")."""
    check_param_headers(MIRRORED, {"count": value}, _headers(("Mcp-Param-Count", header)), CALL)


@pytest.mark.spec("MT-HDR-15", "MT-HDR-16")
@pytest.mark.parametrize("header", ["43", "42.5", "0x2a", "4_2", "42abc", "", "forty-two"])
def test_integer_headers_that_are_not_the_number_are_refused(header: str) -> None:
    """A header that is not a decimal numeral of the argument's value is a mismatch."""
    err = _param_refusal(MIRRORED, {"count": 42}, _headers(("Mcp-Param-Count", header)))

    assert ErrorCode.HEADER_MISMATCH == err.code


@pytest.mark.spec("MT-HDR-17", "MT-HDR-16")
@pytest.mark.parametrize("value", [SAFE + 1, -(SAFE + 1), 2**64])
def test_integers_outside_the_javascript_safe_range_are_refused(value: int) -> None:
    """Integers a header carries are within ±(2^53−1)."""
    err = _param_refusal(MIRRORED, {"count": value}, _headers(("Mcp-Param-Count", str(value))))

    assert ErrorCode.HEADER_MISMATCH == err.code


@pytest.mark.spec("MT-HDR-15", "MT-HDR-17")
@given(value=st.integers(min_value=-SAFE, max_value=SAFE), zeros=st.integers(0, 3))
def test_any_safe_integer_agrees_with_its_decimal_form(value: int, zeros: int) -> None:
    """Every safe integer agrees with its decimal form, leading zeros or not."""
    digits = "0" * zeros + str(abs(value))
    header = f"-{digits}" if value < 0 else digits

    check_param_headers(MIRRORED, {"count": value}, _headers(("Mcp-Param-Count", header)), CALL)


@pytest.mark.spec("MT-HDR-12")
@pytest.mark.parametrize(("header", "value"), [("true", True), ("false", False)])
def test_booleans_are_lowercase_true_and_false(header: str, value: bool) -> None:
    """A boolean argument's header is "true" or "false"."""
    check_param_headers(
        MIRRORED, {"opts": {"dry": value}}, _headers(("Mcp-Param-Dry", header)), CALL
    )


@pytest.mark.spec("MT-HDR-12", "MT-HDR-14")
@pytest.mark.parametrize("header", ["True", "TRUE", "1", "yes", "false"])
def test_other_boolean_spellings_are_refused(header: str) -> None:
    """Only lowercase true matches true."""
    err = _param_refusal(MIRRORED, {"opts": {"dry": True}}, _headers(("Mcp-Param-Dry", header)))

    assert ErrorCode.HEADER_MISMATCH == err.code


# -- results --------------------------------------------------------------------------------


@pytest.mark.spec("MJ-RES-3", "MJ-RES-4", "ML-META-4")
def test_complete_result_has_result_type_and_server_info() -> None:
    """A handler's result goes out with resultType "complete" and serverInfo in _meta,
    beside the _meta keys it had."""
    result = {"content": [], "_meta": {"app/key": 1}}

    out = complete_result("tools/call", result, server_info=SERVER_INFO, cache=CacheHint())

    assert {
        "content": [],
        "resultType": "complete",
        "_meta": {"app/key": 1, META_SERVER_INFO: SERVER_INFO},
    } == out
    assert {"content": [], "_meta": {"app/key": 1}} == result


@pytest.mark.spec("MU-CACHE-1", "MU-CACHE-4")
@pytest.mark.parametrize("method", sorted(MODERN_METHODS & CORE_METHODS))
def test_caching_hints_only_on_the_cacheable_methods(method: str) -> None:
    """ttlMs and cacheScope go on discover, the four lists and resources/read, nowhere else."""
    cacheable = {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
    hint = CacheHint(ttl_ms=1500, scope=CacheScope.PUBLIC)

    out = complete_result(method, {}, server_info=SERVER_INFO, cache=hint)

    expected = {"ttlMs": 1500, "cacheScope": "public"} if method in cacheable else {}
    assert expected == {k: out[k] for k in ("ttlMs", "cacheScope") if k in out}
    # An extension's rows say their own (spec/extensions.md TM-EXT-ROWS).
    assert cacheable == CACHEABLE_METHODS & CORE_METHODS


@pytest.mark.spec("MU-CACHE-2")
@pytest.mark.parametrize("ttl", [-1, -1000, 1.5, True, "10", None])
def test_cache_hint_refuses_what_is_not_a_non_negative_integer(ttl: Any) -> None:
    """ttlMs is a non-negative integer (bool and float are not)."""
    with pytest.raises(ValueError):
        CacheHint(ttl_ms=ttl)


@pytest.mark.spec("MU-CACHE-6")
@pytest.mark.parametrize(
    ("params", "retry"),
    [
        ({"uri": "test://a"}, False),
        ({"uri": "test://a", "inputResponses": {}}, True),
        ({"uri": "test://a", "requestState": "s"}, True),
        ({"uri": "test://a", "inputResponses": {"k": {}}, "requestState": "s"}, True),
        ({"uri": "test://a", "requestState": None}, True),
    ],
)
def test_a_request_carrying_input_responses_or_request_state_is_a_retry(
    params: dict[str, Any], retry: bool
) -> None:
    """A request is an MRTR retry, whose result no cache may keep, when it carries either
    field, whatever its value; and what such a result carries is fresh for no time and
    private."""
    assert retry == is_retry(params)
    assert (0, CacheScope.PRIVATE) == (NOT_CACHEABLE.ttl_ms, NOT_CACHEABLE.scope)


@pytest.mark.spec("TM-CACHE-DEFAULT", "MU-CACHE-2")
def test_cache_hint_defaults_to_immediately_stale_and_private() -> None:
    """Without a choice, results are fresh for 0 ms and private."""
    assert (0, CacheScope.PRIVATE) == (CacheHint().ttl_ms, CacheHint().scope)


@pytest.mark.spec("ML-DISC-1", "ML-VER-2", "ML-META-4")
def test_discover_result_lists_versions_capabilities_and_caching() -> None:
    """server/discover answers the modern versions, capabilities, instructions, caching hints,
    resultType and serverInfo."""
    out = discover_result(
        capabilities={"tools": {"listChanged": True}},
        server_info=SERVER_INFO,
        instructions="Use the tools.",
        cache=CacheHint(ttl_ms=60_000, scope=CacheScope.PUBLIC),
    )

    assert {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": {"tools": {"listChanged": True}},
        "instructions": "Use the tools.",
        "resultType": "complete",
        "ttlMs": 60_000,
        "cacheScope": "public",
        "_meta": {META_SERVER_INFO: SERVER_INFO},
    } == out


@pytest.mark.spec("ML-DISC-1")
def test_discover_result_without_instructions_leaves_them_out() -> None:
    """instructions is optional and absent when the server has none."""
    out = discover_result(
        capabilities={}, server_info=SERVER_INFO, instructions=None, cache=CacheHint()
    )

    assert "instructions" not in out


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.spec("MU-RES-2", "MJ-ERR-7")
def test_resource_not_found_becomes_invalid_params_keeping_the_uri() -> None:
    """-32002 goes out to a modern client as -32602, data.uri and the id kept."""
    uri = "test://nonexistent-resource-for-conformance-testing"

    out = modern_error(error_response(12, resource_not_found(uri)))

    assert (12, ErrorCode.INVALID_PARAMS, {"uri": uri}) == (out.id, out.code, out.data)


@pytest.mark.spec("MJ-ERR-7")
def test_other_errors_pass_unchanged() -> None:
    """Errors other than the legacy-only codes reach a modern client as they are."""
    error = ErrorResponse(id=1, code=ErrorCode.INVALID_PARAMS, message="bad", data={"k": 1})

    assert error == modern_error(error)


@pytest.mark.spec("MJ-ERR-7")
@given(code=st.sampled_from([-32002, -32042]) | st.integers(-32768, -31000))
def test_modern_error_never_emits_the_legacy_only_codes(code: int) -> None:
    """Whatever a handler answers, a modern client never gets -32002 or -32042."""
    out = modern_error(ErrorResponse(id=1, code=code, message="m"))

    assert out.code not in (-32002, -32042)


@pytest.mark.spec("MT-POST-7", "TM-ERA-CAPS", "ML-META-3")
@pytest.mark.parametrize(
    ("code", "started", "status"),
    [
        (ErrorCode.MISSING_CLIENT_CAPABILITY, False, 400),
        (ErrorCode.MISSING_CLIENT_CAPABILITY, True, 200),
        (ErrorCode.INVALID_PARAMS, False, 200),
        (ErrorCode.INTERNAL_ERROR, False, 200),
        (ErrorCode.METHOD_NOT_FOUND, True, 200),
    ],
)
def test_handler_errors_are_in_band_but_missing_capability_before_the_first_byte(
    code: int, started: bool, status: int
) -> None:
    """A handler's error is answered with 200, except a missing client capability found
    before anything went out, which is 400."""
    error = ErrorResponse(id=1, code=code, message="m")

    assert status == error_status(error, started=started)


# -- subscriptions/listen -------------------------------------------------------------------


ALL_CAPS = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
}


def _listen(notifications: Any, capabilities: dict[str, Any], limit: int = 10) -> ListenFilter:
    request = Request(
        id="listen-1", method="subscriptions/listen", params={"notifications": notifications}
    )
    return ListenFilter.parse(request, capabilities, max_resources=limit)


def _listen_refusal(notifications: Any, limit: int = 10) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        _listen(notifications, ALL_CAPS, limit)
    return info.value


@pytest.mark.spec("MU-SUB-2", "MU-SUB-7", "MU-SUB-10")
def test_listen_acknowledges_what_it_asked_for_when_offered() -> None:
    """With every capability offered, the acknowledgment is what the client asked for."""
    wanted = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["test://b", "test://a", "test://a"],
    }

    got = _listen(wanted, ALL_CAPS)

    assert {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["test://a", "test://b"],
    } == got.acknowledged
    assert frozenset({"test://a", "test://b"}) == got.resources


@pytest.mark.spec("MU-SUB-7", "MU-SUB-1")
def test_listen_acknowledges_only_the_honoured_subset() -> None:
    """What the server does not offer (no listChanged, no resources.subscribe) is left out."""
    caps = {"tools": {"listChanged": True}, "prompts": {}, "resources": {"listChanged": True}}
    wanted = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourceSubscriptions": ["test://a"],
    }

    got = _listen(wanted, caps)

    assert {"toolsListChanged": True} == got.acknowledged
    assert (frozenset({"notifications/tools/list_changed"}), frozenset()) == (
        got.list_changed,
        got.resources,
    )


@pytest.mark.spec("MU-SUB-7")
def test_listen_leaves_out_flags_set_false_and_absent() -> None:
    """A flag set to false, or not given, asks for nothing and is not acknowledged."""
    got = _listen({"toolsListChanged": False}, ALL_CAPS)

    assert ({}, frozenset()) == (got.acknowledged, got.list_changed)


@pytest.mark.spec("MU-SUB-10")
def test_resource_subscriptions_need_resources_subscribe() -> None:
    """resourceSubscriptions is honoured only when resources.subscribe is offered."""
    got = _listen({"resourceSubscriptions": ["test://a"]}, {"resources": {"listChanged": True}})

    assert ({}, frozenset()) == (got.acknowledged, got.resources)


@pytest.mark.spec("MU-SUB-1", "MJ-ERR-1")
@pytest.mark.parametrize(
    "notifications",
    [
        None,
        [],
        "tools",
        {"toolsListChanged": "yes"},
        {"promptsListChanged": 1},
        {"resourceSubscriptions": "test://a"},
        {"resourceSubscriptions": ["test://a", 5]},
        {"resourceSubscriptions": [f"test://{i}" for i in range(11)]},
    ],
)
def test_malformed_listen_filter_is_invalid_params(notifications: Any) -> None:
    """A filter that is not an object of booleans and a bounded list of URIs gets -32602."""
    err = _listen_refusal(notifications)

    assert (ErrorCode.INVALID_PARAMS, "listen-1") == (err.code, err.request_id)


@pytest.mark.spec("MU-SUB-1", "MU-SUB-9", "MU-SUB-10")
def test_filter_lets_through_only_what_was_asked_for() -> None:
    """A listener asking for prompts and one resource gets those notifications and no others."""
    got = _listen({"promptsListChanged": True, "resourceSubscriptions": ["test://a"]}, ALL_CAPS)

    assert [True, False, False, True, False, False] == [
        got.wants("notifications/prompts/list_changed", None),
        got.wants("notifications/tools/list_changed", None),
        got.wants("notifications/resources/list_changed", {}),
        got.wants("notifications/resources/updated", {"uri": "test://a"}),
        got.wants("notifications/resources/updated", {"uri": "test://b"}),
        got.wants("notifications/resources/updated", None),
    ]


@pytest.mark.spec("MU-SUB-3", "MU-SUB-8")
@pytest.mark.parametrize("sub_id", ["listen-1", 1796195113423])
def test_stamp_subscription_adds_the_listen_id_to_meta(sub_id: str | int) -> None:
    """A listen stream's message names its subscription in _meta, keeping what was there."""
    params = {"uri": "test://a", "_meta": {"app/k": 1}}

    out = stamp_subscription(params, sub_id)

    assert {"uri": "test://a", "_meta": {"app/k": 1, META_SUBSCRIPTION_ID: sub_id}} == out
    assert {"uri": "test://a", "_meta": {"app/k": 1}} == params


@pytest.mark.spec("MT-HDR-16", "MT-HDR-12")
@pytest.mark.parametrize(
    ("arguments", "headers", "says"),
    [
        ({"region": "eu"}, [], "Mcp-Param-Region is missing; it repeats argument 'region', "
         "which the tool's inputSchema marks with x-mcp-header"),
        ({}, [("Mcp-Param-Region", "eu")],
         "Mcp-Param-Region is sent but argument 'region' is not; the header goes only with it"),
        ({"region": "eu"}, [("Mcp-Param-Region", "us")],
         "Mcp-Param-Region does not repeat argument 'region', which the tool's inputSchema "
         "marks with x-mcp-header"),
    ],
)
def test_a_param_header_refusal_names_the_argument_it_repeats(
    arguments: dict[str, Any], headers: list[tuple[str, str]], says: str
) -> None:
    """A refused Mcp-Param header says which argument it repeats and that the tool's
    inputSchema marks it with x-mcp-header; its data names the header, the argument and
    the value expected."""
    refusal = _param_refusal({"Region": ("region",)}, arguments, _headers(*headers))

    assert ErrorCode.HEADER_MISMATCH == refusal.code
    assert f"Header mismatch: {says}." == refusal.message
    assert {"header": "Mcp-Param-Region", "source": "arguments.region",
            **({"expected": "eu"} if arguments else {})} == refusal.data
