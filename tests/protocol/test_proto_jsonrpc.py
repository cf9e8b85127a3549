# Unit tests for trio_mcp.protocol._jsonrpc: the four message kinds, parsing with MCP's
# restrictions, the id salvaged for error responses, and compact UTF-8 serialization.

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import (
    ErrorCode,
    ErrorResponse,
    Notification,
    RemoteProtocolError,
    Request,
    Response,
    dumps,
    parse_message,
)
from trio_mcp.protocol._errors import RETIRED_CODES
from trio_mcp.protocol._jsonrpc import error_response, loads_body


def _invalid(obj: object) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        parse_message(obj)
    assert ErrorCode.INVALID_REQUEST == info.value.code
    assert 400 == info.value.http_status
    return info.value


# -- the four message kinds ----------------------------------------------------------------


def test_request_with_string_id_parses_as_request() -> None:
    """An object with jsonrpc "2.0", a method and a string id is a Request."""
    msg = parse_message({"jsonrpc": "2.0", "id": "a1", "method": "tools/list", "params": {}})

    assert Request(id="a1", method="tools/list", params={}) == msg


@pytest.mark.spec("J-ID-1")
def test_request_with_integer_id_parses_as_request() -> None:
    """Request ids may be integers as well as strings."""
    msg = parse_message({"jsonrpc": "2.0", "id": 7, "method": "ping"})

    assert Request(id=7, method="ping", params=None) == msg


def test_request_id_zero_and_negative_are_integers() -> None:
    """0 and negative integers are ordinary integer ids, not 'missing'."""
    assert Request(id=0, method="ping") == parse_message(
        {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    )
    assert Request(id=-3, method="ping") == parse_message(
        {"jsonrpc": "2.0", "id": -3, "method": "ping"}
    )


@pytest.mark.spec("J-NOTIF-2")
def test_message_without_id_parses_as_notification() -> None:
    """A method with no id member is a Notification; notifications carry no id."""
    msg = parse_message({"jsonrpc": "2.0", "method": "notifications/initialized"})

    assert Notification(method="notifications/initialized", params=None) == msg


def test_notification_keeps_params() -> None:
    """A notification's params object is kept as sent."""
    msg = parse_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    )

    assert Notification(method="notifications/cancelled", params={"requestId": 3}) == msg


@pytest.mark.spec("J-RES-1", "J-RES-2")
def test_result_with_id_parses_as_response() -> None:
    """An object with an id and a result object is a Response."""
    msg = parse_message({"jsonrpc": "2.0", "id": 4, "result": {"x": 1}})

    assert Response(id=4, result={"x": 1}) == msg


def test_error_with_id_parses_as_error_response() -> None:
    """An object with an id and an error {code, message, data} is an ErrorResponse."""
    msg = parse_message(
        {"jsonrpc": "2.0", "id": "r", "error": {"code": -32601, "message": "nope", "data": [1]}}
    )

    assert ErrorResponse(id="r", code=-32601, message="nope", data=[1]) == msg


@pytest.mark.spec("J-ERR-1")
def test_error_with_null_id_parses_with_no_id() -> None:
    """An error response whose id could not be read (null) is valid and has no id."""
    msg = parse_message({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "m"}})

    assert ErrorResponse(id=None, code=-1, message="m") == msg


def test_error_without_id_member_parses_with_no_id() -> None:
    """An error response may leave the id out altogether."""
    msg = parse_message({"jsonrpc": "2.0", "error": {"code": -1, "message": "m"}})

    assert ErrorResponse(id=None, code=-1, message="m") == msg


def test_null_params_is_treated_as_absent() -> None:
    """"params": null is read as no params (lenient, and nothing is lost)."""
    msg = parse_message({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": None})

    assert Request(id=1, method="ping", params=None) == msg


# -- malformed shapes ----------------------------------------------------------------------


@pytest.mark.spec("J-MSG-1")
@pytest.mark.parametrize("obj", [None, 1, 1.5, "text", True, [], [1]])
def test_non_object_is_invalid_request(obj: object) -> None:
    """A JSON-RPC message must be a JSON object; anything else is -32600."""
    exc = _invalid(obj)

    assert exc.request_id is None


@pytest.mark.spec("J-MSG-1")
@pytest.mark.parametrize("version", [None, "1.0", "2", 2.0, "2.0 "])
def test_bad_jsonrpc_version_is_invalid_request(version: object) -> None:
    """The jsonrpc member must be exactly the string "2.0"."""
    obj: dict[str, object] = {"id": 1, "method": "ping"}
    if version is not None:
        obj["jsonrpc"] = version

    _invalid(obj)


@pytest.mark.spec("J-ID-2")
def test_null_id_request_is_invalid() -> None:
    """Unlike base JSON-RPC, MCP forbids a null request id."""
    exc = _invalid({"jsonrpc": "2.0", "id": None, "method": "ping"})

    assert exc.request_id is None


@pytest.mark.spec("J-ID-1")
@pytest.mark.parametrize("rid", [True, False])
def test_boolean_id_is_invalid(rid: bool) -> None:
    """A boolean is not an integer id, although Python says bool is an int."""
    exc = _invalid({"jsonrpc": "2.0", "id": rid, "method": "ping"})

    assert exc.request_id is None


@pytest.mark.spec("J-ID-1")
@pytest.mark.parametrize("rid", [1.0, 1.5, [1], {"a": 1}])
def test_float_or_structured_id_is_invalid(rid: object) -> None:
    """Ids are strings or integers only: floats (even 1.0), arrays and objects are refused."""
    exc = _invalid({"jsonrpc": "2.0", "id": rid, "method": "ping"})

    assert exc.request_id is None


@pytest.mark.spec("J-ID-1")
def test_response_with_bool_id_is_invalid() -> None:
    """A response's id follows the same rule as a request's."""
    _invalid({"jsonrpc": "2.0", "id": True, "result": {}})


@pytest.mark.parametrize("params", [[1, 2], "x", 3, True])
def test_params_must_be_an_object(params: object) -> None:
    """MCP params are always by-name objects; an array (or scalar) is -32600."""
    exc = _invalid({"jsonrpc": "2.0", "id": 9, "method": "m", "params": params})

    assert 9 == exc.request_id


def test_both_result_and_error_is_invalid() -> None:
    """A response carries result or error, never both."""
    exc = _invalid(
        {"jsonrpc": "2.0", "id": 2, "result": {}, "error": {"code": 1, "message": "m"}}
    )

    assert 2 == exc.request_id


def test_method_with_result_is_invalid() -> None:
    """A message cannot be a request and a response at once."""
    exc = _invalid({"jsonrpc": "2.0", "id": 2, "method": "m", "result": {}})

    assert 2 == exc.request_id


def test_method_with_error_is_invalid() -> None:
    """A method next to an error member is refused too."""
    _invalid({"jsonrpc": "2.0", "method": "m", "error": {"code": 1, "message": "m"}})


@pytest.mark.parametrize("method", ["", 5, None, ["m"]])
def test_method_must_be_a_non_empty_string(method: object) -> None:
    """The method is a non-empty string."""
    exc = _invalid({"jsonrpc": "2.0", "id": "q", "method": method})

    assert "q" == exc.request_id


@pytest.mark.spec("J-RES-1")
def test_result_without_id_is_invalid() -> None:
    """A result response must name the request it answers."""
    _invalid({"jsonrpc": "2.0", "result": {}})


@pytest.mark.spec("J-ID-2")
def test_result_with_null_id_is_invalid() -> None:
    """A result response with a null id is refused (only errors may lack the id)."""
    _invalid({"jsonrpc": "2.0", "id": None, "result": {}})


@pytest.mark.parametrize("result", [None, [], 1, "ok"])
def test_result_must_be_an_object(result: object) -> None:
    """MCP results are JSON objects."""
    exc = _invalid({"jsonrpc": "2.0", "id": 5, "result": result})

    assert 5 == exc.request_id


@pytest.mark.parametrize(
    "error",
    [
        None,
        "boom",
        [],
        {"message": "no code"},
        {"code": -1},
        {"code": "-1", "message": "m"},
        {"code": 1.5, "message": "m"},
        {"code": True, "message": "m"},
        {"code": -1, "message": 3},
    ],
)
def test_error_needs_integer_code_and_string_message(error: object) -> None:
    """An error member is an object with an integer code and a string message."""
    exc = _invalid({"jsonrpc": "2.0", "id": 6, "error": error})

    assert 6 == exc.request_id


def test_object_with_neither_method_nor_result_nor_error_is_invalid() -> None:
    """An object that is no message kind at all is -32600."""
    exc = _invalid({"jsonrpc": "2.0", "id": 8})

    assert 8 == exc.request_id


# -- salvaged ids --------------------------------------------------------------------------


@pytest.mark.spec("J-ERR-1")
def test_invalid_message_salvages_readable_string_id() -> None:
    """When a message is invalid but its id is readable, the error carries that id."""
    exc = _invalid({"jsonrpc": "1.0", "id": "abc", "method": "ping"})

    assert "abc" == exc.request_id


@pytest.mark.spec("J-ERR-1")
def test_invalid_message_salvages_readable_integer_id() -> None:
    """Integer ids are salvaged too."""
    exc = _invalid({"id": 12, "method": "ping"})

    assert 12 == exc.request_id


@pytest.mark.spec("J-ERR-1")
@pytest.mark.parametrize("rid", [None, True, 1.5, [1]])
def test_unreadable_id_is_not_salvaged(rid: object) -> None:
    """An id that is not a string or integer cannot be read: the error goes without one."""
    exc = _invalid({"jsonrpc": "1.0", "id": rid, "method": "ping"})

    assert exc.request_id is None


def test_error_response_helper_copies_error_fields() -> None:
    """error_response() turns a protocol error into the ErrorResponse that answers it."""
    exc = RemoteProtocolError("bad", code=ErrorCode.INVALID_PARAMS, data={"k": 1})

    assert ErrorResponse(id=3, code=-32602, message="bad", data={"k": 1}) == error_response(
        3, exc
    )


@pytest.mark.spec("J-ERR-3")
def test_error_codes_are_plain_integers() -> None:
    """A protocol error's code is stored as a plain int, even when given an ErrorCode."""
    exc = RemoteProtocolError("m", code=ErrorCode.PARSE_ERROR)

    assert (int, -32700) == (type(exc.code), exc.code)


@pytest.mark.spec("TM-RPC-CODES")
def test_own_error_codes_are_outside_the_reserved_range() -> None:
    """trio-mcp's own codes, -31001, -31002, -31004 and -31005, lie outside
    -32768..-32000."""
    own = [ErrorCode.RESUMPTION_FAILED, ErrorCode.SERVER_BUSY, ErrorCode.STORE_UNAVAILABLE,
           ErrorCode.RATE_LIMITED]

    assert [-31001, -31002, -31004, -31005] == [int(c) for c in own]
    assert [] == [c for c in own if -32768 <= c <= -32000]


@pytest.mark.spec("TM-RPC-CODES")
def test_a_retired_code_is_never_given_another_meaning() -> None:
    """-31003, no longer sent, is the value of no ErrorCode: a client written against the
    trio-mcp that sent it cannot misread a new error as the old one."""
    assert -31003 in RETIRED_CODES
    assert [] == [code for code in ErrorCode if code in RETIRED_CODES]


#: The codes JSON-RPC 2.0 and MCP define, which may lie in the reserved range.
SPEC_CODES = {-32700, -32600, -32601, -32602, -32603, -32002, -32042, -32020, -32021, -32022}


@pytest.mark.spec("MJ-ERR-8", "TM-RPC-CODES")
def test_every_code_of_our_own_lies_outside_the_reserved_range() -> None:
    """Each ErrorCode the specs do not define lies outside -32768..-32000."""
    own = [code for code in ErrorCode if code not in SPEC_CODES]

    assert {
        ErrorCode.RESUMPTION_FAILED, ErrorCode.SERVER_BUSY, ErrorCode.STORE_UNAVAILABLE,
        ErrorCode.RATE_LIMITED,
    } == set(own)
    assert [] == [code for code in own if -32768 <= code <= -32000]


# -- serialization -------------------------------------------------------------------------


def test_request_to_dict_has_jsonrpc_id_method_params() -> None:
    """A Request serializes with jsonrpc, id, method and params."""
    assert {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"a": 1}} == Request(
        id=1, method="m", params={"a": 1}
    ).to_dict()


def test_request_without_params_omits_params() -> None:
    """params is left out when there are none."""
    assert {"jsonrpc": "2.0", "id": "x", "method": "ping"} == Request(
        id="x", method="ping"
    ).to_dict()


@pytest.mark.spec("J-NOTIF-2")
def test_notification_to_dict_has_no_id() -> None:
    """A Notification serializes without an id member."""
    assert {"jsonrpc": "2.0", "method": "n"} == Notification(method="n").to_dict()


def test_response_to_dict() -> None:
    """A Response serializes with jsonrpc, id and result."""
    assert {"jsonrpc": "2.0", "id": 2, "result": {}} == Response(id=2, result={}).to_dict()


@pytest.mark.spec("J-ERR-1")
def test_error_response_without_id_omits_id() -> None:
    """An error whose request id is unknown has no id member (not "id": null)."""
    expected = {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}

    assert expected == ErrorResponse(id=None, code=-32700, message="Parse error").to_dict()


@pytest.mark.spec("J-ERR-2")
def test_error_response_with_id_and_data() -> None:
    """An error response carries its id, and data when there is some."""
    expected = {"jsonrpc": "2.0", "id": 5, "error": {"code": -1, "message": "m", "data": [0]}}

    assert expected == ErrorResponse(id=5, code=-1, message="m", data=[0]).to_dict()


@pytest.mark.spec("T-GEN-1")
def test_dumps_is_compact_utf8() -> None:
    """dumps() writes compact JSON, non-ASCII as UTF-8 rather than \\u escapes."""
    body = dumps(Request(id="é", method="m", params={"t": "日本"}))

    assert '{"jsonrpc":"2.0","id":"é","method":"m","params":{"t":"日本"}}'.encode() == body


def test_dumps_accepts_plain_mappings() -> None:
    """dumps() also serializes a plain JSON object."""
    assert b'{"a":[1,2]}' == dumps({"a": [1, 2]})


@pytest.mark.spec("T-GEN-1")
def test_dumps_of_lone_surrogate_id_is_still_utf8() -> None:
    """A client may send "\\ud800" as an id; echoing it must still give valid UTF-8 JSON."""
    msg = parse_message(loads_body(b'{"jsonrpc":"2.0","id":"\\ud800","method":"x"}'))

    assert isinstance(msg, Request)

    body = dumps(ErrorResponse(id=msg.id, code=-32601, message="m"))

    assert "\ud800" == json.loads(body.decode("utf-8"))["id"]


_ids = st.one_of(st.integers(min_value=-(2**53), max_value=2**53), st.text(max_size=20))
_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**53), max_value=2**53), st.text()
)
_params = st.dictionaries(st.text(max_size=8), _json_scalars, max_size=4)


@given(rid=_ids, method=st.text(min_size=1, max_size=20), params=st.none() | _params)
def test_request_round_trips_through_dumps_and_parse(
    rid: str | int, method: str, params: dict[str, object] | None
) -> None:
    """parse_message(loads(dumps(request))) gives back the same request."""
    req = Request(id=rid, method=method, params=params)

    assert req == parse_message(loads_body(dumps(req)))


@given(rid=st.none() | _ids, code=st.integers(-(2**31), 2**31), message=st.text())
def test_error_response_round_trips(rid: str | int | None, code: int, message: str) -> None:
    """An ErrorResponse survives dumps and parse unchanged."""
    err = ErrorResponse(id=rid, code=code, message=message)

    assert err == parse_message(loads_body(dumps(err)))


# -- body decoding -------------------------------------------------------------------------


def test_loads_body_decodes_utf8_json() -> None:
    """A UTF-8 JSON body decodes to Python values."""
    assert {"k": "ü"} == loads_body('{"k":"ü"}'.encode())


@pytest.mark.spec("T-GEN-1")
@pytest.mark.parametrize("body", [b"\xff\xfe{}", '{"k":"ü"}'.encode("latin-1"), b"\xc3"])
def test_invalid_utf8_body_is_parse_error(body: bytes) -> None:
    """Messages must be UTF-8: a body that is not is a parse error (-32700)."""
    with pytest.raises(RemoteProtocolError) as info:
        loads_body(body)

    assert ErrorCode.PARSE_ERROR == info.value.code
    assert 400 == info.value.http_status
    assert info.value.request_id is None


@pytest.mark.parametrize(
    "body", [b"", b"{", b'{"a":}', b"[1,]", b"nul", b"{'a':1}", b'{"a":1} x']
)
def test_invalid_json_body_is_parse_error(body: bytes) -> None:
    """A body that is not JSON is a parse error (-32700) with no id."""
    with pytest.raises(RemoteProtocolError) as info:
        loads_body(body)

    assert ErrorCode.PARSE_ERROR == info.value.code
    assert info.value.request_id is None


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_parse_errors(constant: bytes) -> None:
    """NaN and Infinity are Python extensions, not JSON (RFC 8259 §6): parse error."""
    with pytest.raises(RemoteProtocolError) as info:
        loads_body(b'{"jsonrpc":"2.0","method":"m","params":{"x":' + constant + b"}}")

    assert ErrorCode.PARSE_ERROR == info.value.code


def test_deeply_nested_body_is_parse_error_not_crash() -> None:
    """A body nested beyond the recursion limit is a parse error, not a crash."""
    with pytest.raises(RemoteProtocolError) as info:
        loads_body(b"[" * 100_000 + b"]" * 100_000)

    assert ErrorCode.PARSE_ERROR == info.value.code
