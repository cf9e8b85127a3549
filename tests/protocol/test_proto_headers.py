# Unit tests for trio_mcp.protocol._headers: case-insensitive lookup, Accept and Content-Type
# checks, and the Origin / Host policy against DNS rebinding.

from __future__ import annotations

import pytest

from trio_mcp.protocol import ErrorCode, Headers, OriginPolicy, RemoteProtocolError
from trio_mcp.protocol._headers import (
    accepts,
    check_content_type,
    check_get_accept,
    check_post_accept,
    is_loopback_host,
)

BOTH = "application/json, text/event-stream"


def _headers(**values: str) -> Headers:
    return Headers([(k.replace("_", "-").encode(), v.encode()) for k, v in values.items()])


def _refusal(policy: OriginPolicy, headers: Headers) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        policy.check(headers)
    return info.value


LOOPBACK_POLICY = OriginPolicy.for_bind(["127.0.0.1"])


# -- Headers -------------------------------------------------------------------------------


def test_header_lookup_ignores_case() -> None:
    """Header names compare case-insensitively (RFC 9110 §5.1)."""
    headers = Headers([(b"MCP-Session-Id", b"abc")])

    assert "abc" == headers.get("mcp-session-id")
    assert "abc" == headers.get("Mcp-Session-ID")


def test_absent_header_is_none() -> None:
    """A header that is not there reads as None."""
    assert Headers([]).get("accept") is None


def test_repeated_header_values_are_joined() -> None:
    """Several lines of one header read as one comma-separated value."""
    headers = Headers([(b"accept", b"application/json"), (b"Accept", b"text/event-stream")])

    assert "application/json, text/event-stream" == headers.get("accept")
    assert ["application/json", "text/event-stream"] == headers.get_all("ACCEPT")


# -- accepts() -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        "application/json",
        "Application/JSON",
        "application/*",
        "*/*",
        "text/html, application/json;q=0.5",
        "application/json; charset=utf-8",
    ],
)
def test_accepts_exact_case_insensitive_and_wildcards(accept: str) -> None:
    """An exact type, its main-type wildcard or */* admits the media type."""
    assert accepts(accept, "application/json")


@pytest.mark.parametrize("accept", [None, "", "text/html", "text/*", "application/xml"])
def test_accepts_refuses_unlisted_types(accept: str | None) -> None:
    """No matching range (or no header at all) does not admit the type."""
    assert not accepts(accept, "application/json")


@pytest.mark.parametrize(
    "accept", ["application/json;q=0", "application/json; q=0.0", "*/*;q=0", "application/*;q=0"]
)
def test_accepts_q_zero_refuses(accept: str) -> None:
    """q=0 means 'not acceptable'."""
    assert not accepts(accept, "application/json")


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;q=0, */*",
        "*/*, application/json;q=0",
        "application/json;q=0, application/*",
    ],
)
def test_more_specific_q_zero_overrides_wildcard(accept: str) -> None:
    """RFC 9110 §12.5.1: the most specific range decides, so json;q=0 beats */*."""
    assert not accepts(accept, "application/json")


def test_more_specific_range_can_admit_despite_wildcard_q_zero() -> None:
    """*/*;q=0 with an explicit application/json admits JSON."""
    assert accepts("*/*;q=0, application/json", "application/json")


def test_accepts_unparseable_q_refuses() -> None:
    """A q value that is not a number is taken as 0."""
    assert not accepts("application/json;q=abc", "application/json")


@pytest.mark.spec("T-POST-2")
@pytest.mark.parametrize(
    "accept",
    [
        BOTH,
        "text/event-stream, application/json",
        "application/json;q=0.9, text/event-stream;q=0.1",
        "*/*",
        "application/*, text/*",
    ],
)
def test_post_accept_with_both_types_passes(accept: str) -> None:
    """A POST's Accept that admits both application/json and text/event-stream passes."""
    check_post_accept(accept)


@pytest.mark.spec("T-POST-2", "TM-HTTP-ACCEPT")
@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "application/json",
        "text/event-stream",
        "application/json, text/event-stream;q=0",
        "text/html",
    ],
)
def test_post_accept_missing_a_type_is_406(accept: str | None) -> None:
    """A POST whose Accept lacks either type is refused with 406 Not Acceptable."""
    with pytest.raises(RemoteProtocolError) as info:
        check_post_accept(accept)

    assert 406 == info.value.http_status
    assert ErrorCode.INVALID_REQUEST == info.value.code


@pytest.mark.spec("T-GET-2")
@pytest.mark.parametrize("accept", ["text/event-stream", "text/*", "*/*", BOTH])
def test_get_accept_with_event_stream_passes(accept: str) -> None:
    """A GET's Accept that admits text/event-stream passes."""
    check_get_accept(accept)


@pytest.mark.spec("T-GET-2", "TM-HTTP-ACCEPT")
@pytest.mark.parametrize("accept", [None, "application/json", "text/event-stream;q=0"])
def test_get_accept_without_event_stream_is_406(accept: str | None) -> None:
    """A GET whose Accept does not admit text/event-stream gets 406."""
    with pytest.raises(RemoteProtocolError) as info:
        check_get_accept(accept)

    assert 406 == info.value.http_status


# -- Content-Type --------------------------------------------------------------------------


@pytest.mark.spec("T-GEN-1")
@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/Json",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        'application/json; charset="utf-8"',
        "application/json; charset=utf8",
    ],
)
def test_json_content_type_in_utf8_passes(content_type: str) -> None:
    """application/json, with a UTF-8 charset if one is named, is accepted."""
    check_content_type(content_type)


@pytest.mark.spec("T-GEN-1", "TM-HTTP-CTYPE")
@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "text/plain",
        "application/xml",
        "application/json-seq",
        "application/json; charset=latin-1",
        "application/json; charset=utf-16",
    ],
)
def test_other_content_type_is_415(content_type: str | None) -> None:
    """Anything but JSON in UTF-8 (or no Content-Type) gets 415 Unsupported Media Type."""
    with pytest.raises(RemoteProtocolError) as info:
        check_content_type(content_type)

    assert 415 == info.value.http_status


# -- loopback names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST:8000",
        "127.0.0.1",
        "127.0.0.1:3000",
        "127.1.2.3:80",
        "127.255.255.254",
        "::1",
        "[::1]",
        "[::1]:8080",
    ],
)
def test_loopback_hosts_are_recognised(host: str) -> None:
    """localhost, all of 127.0.0.0/8 and ::1 name the loopback interface, port or not."""
    assert is_loopback_host(host)


@pytest.mark.spec("T-SEC-1")
@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "0.0.0.0",
        "10.0.0.1",
        "128.0.0.1",
        "127.0.0.1.nip.io",
        "127.evil.example",
        "localhost.evil.example",
        "[::2]:80",
        "",
    ],
)
def test_other_hosts_are_not_loopback(host: str) -> None:
    """Other addresses and DNS names are not loopback, even one that starts with "127."."""
    assert not is_loopback_host(host)


# -- Origin --------------------------------------------------------------------------------


@pytest.mark.spec("T-SEC-2", "TM-SEC-ORIGIN")
def test_absent_origin_passes() -> None:
    """Non-browser clients send no Origin; an absent Origin is not rejected."""
    LOOPBACK_POLICY.check(_headers(host="127.0.0.1:8000"))


@pytest.mark.spec("T-SEC-1", "TM-SEC-ORIGIN")
@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost",
        "http://localhost:3000",
        "https://localhost:8443",
        "http://127.0.0.1:5173",
        "http://127.3.4.5",
        "http://[::1]:8080",
        "HTTP://LOCALHOST:1",
    ],
)
def test_loopback_origins_pass(origin: str) -> None:
    """Pages served from this machine's loopback may call a local server."""
    LOOPBACK_POLICY.check(_headers(host="localhost:8000", origin=origin))


@pytest.mark.spec("T-SEC-2", "TM-SEC-ORIGIN")
@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "http://127.0.0.1.nip.io:8000",
        "http://localhost.evil.example",
        "http://10.0.0.1",
        "file://localhost",
        "ws://localhost:8000",
    ],
)
def test_foreign_origin_is_403(origin: str) -> None:
    """A present Origin that is not allowed gets 403 Forbidden, whose message says where
    the allowed origins come from."""
    exc = _refusal(LOOPBACK_POLICY, _headers(host="127.0.0.1", origin=origin))

    assert 403 == exc.http_status
    assert ErrorCode.INVALID_REQUEST == exc.code
    assert "accepted are loopback ones and ServerConfig.allowed_origins (--allow-origin)" in (
        str(exc)
    )


@pytest.mark.spec("T-SEC-2", "TM-SEC-ORIGIN")
def test_null_origin_is_403() -> None:
    """The opaque origin "null" (sandboxed frames, file: pages) is not trusted."""
    exc = _refusal(LOOPBACK_POLICY, _headers(host="127.0.0.1", origin="null"))

    assert 403 == exc.http_status


@pytest.mark.spec("T-SEC-2", "TM-SEC-ORIGIN")
@pytest.mark.parametrize(
    "origin", ["", "localhost", "http://", "http://localhost:port", "http://[::1", "://x"]
)
def test_malformed_origin_is_403(origin: str) -> None:
    """An Origin that does not parse as scheme://host[:port] is refused with 403."""
    exc = _refusal(LOOPBACK_POLICY, _headers(host="127.0.0.1", origin=origin))

    assert 403 == exc.http_status


@pytest.mark.spec("T-SEC-2", "TM-SEC-ORIGIN")
def test_explicit_allowed_origin_passes_and_others_do_not() -> None:
    """Configured origins are allowed exactly; similar-looking ones are not."""
    policy = OriginPolicy.for_bind(["0.0.0.0"], ["https://app.example"])

    policy.check(_headers(host="srv.example", origin="https://app.example"))
    assert 403 == _refusal(policy, _headers(origin="https://app.example:444")).http_status
    assert 403 == _refusal(policy, _headers(origin="http://app.example")).http_status


@pytest.mark.spec("TM-SEC-ORIGIN")
def test_star_allows_any_origin() -> None:
    """allowed_origins containing "*" accepts every Origin."""
    policy = OriginPolicy(allowed_origins=frozenset({"*"}))

    policy.check(_headers(origin="https://anything.example"))
    policy.check(_headers(origin="null"))


@pytest.mark.spec("T-SEC-2", "TM-SEC-ORIGIN")
def test_loopback_origins_can_be_switched_off() -> None:
    """With allow_loopback_origins off, even a loopback Origin needs listing."""
    policy = OriginPolicy(allow_loopback_origins=False)

    assert 403 == _refusal(policy, _headers(origin="http://localhost:3000")).http_status


# -- Host ----------------------------------------------------------------------------------


def test_loopback_bind_restricts_host_names() -> None:
    """A loopback-only bind gets a Host allow-list of the loopback names."""
    assert frozenset({"localhost", "127.0.0.1", "::1"}) == LOOPBACK_POLICY.allowed_hosts
    other = OriginPolicy.for_bind(["localhost", "::1"])
    assert LOOPBACK_POLICY.allowed_hosts == other.allowed_hosts


@pytest.mark.spec("TM-SEC-HOST")
@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8000", "127.0.0.1:8000", "127.0.0.2:8000", "[::1]:8000", "::1"],
)
def test_loopback_host_passes_on_loopback_bind(host: str) -> None:
    """Loopback Host values (any port, all of 127.0.0.0/8, bracketed IPv6) pass."""
    LOOPBACK_POLICY.check(_headers(host=host))


@pytest.mark.spec("TM-SEC-HOST")
@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8000",
        "127.0.0.1.nip.io:8000",
        "127.attacker.example",
        "localhost.evil.example",
        "[::2]:8000",
        "10.0.0.5",
    ],
)
def test_foreign_host_on_loopback_bind_is_421(host: str) -> None:
    """A loopback server answers a foreign Host (DNS rebinding) with 421, naming the Host
    names it answers."""
    exc = _refusal(LOOPBACK_POLICY, _headers(host=host))

    assert 421 == exc.http_status
    assert "a server bound to loopback answers only 127.0.0.1, ::1, localhost." in str(exc)
    assert ErrorCode.INVALID_REQUEST == exc.code


@pytest.mark.spec("TM-SEC-HOST")
def test_missing_host_on_loopback_bind_is_421() -> None:
    """No Host header at all is not a loopback name either."""
    assert 421 == _refusal(LOOPBACK_POLICY, _headers()).http_status


@pytest.mark.spec("TM-SEC-HOST")
@pytest.mark.parametrize("bind", [["0.0.0.0"], ["192.168.1.5"], ["127.0.0.1", "0.0.0.0"], []])
def test_non_loopback_bind_has_no_host_check(bind: list[str]) -> None:
    """A server reachable from elsewhere cannot know its names: any Host passes."""
    policy = OriginPolicy.for_bind(bind)

    assert policy.allowed_hosts is None
    policy.check(_headers(host="whatever.example:9"))
    policy.check(_headers())


@pytest.mark.spec("TM-SEC-HOST")
def test_explicit_host_list_without_loopback_ip_refuses_127_aliases() -> None:
    """The 127.x alias applies only when 127.0.0.1 itself is allowed."""
    policy = OriginPolicy(allowed_hosts=frozenset({"mcp.internal"}))

    policy.check(_headers(host="MCP.internal:443"))
    assert 421 == _refusal(policy, _headers(host="127.0.0.2")).http_status


@pytest.mark.spec("T-SEC-2")
def test_origin_is_checked_before_host() -> None:
    """A request with a bad Origin and a bad Host is refused for the Origin (403)."""
    exc = _refusal(LOOPBACK_POLICY, _headers(host="evil.example", origin="https://evil.example"))

    assert 403 == exc.http_status
