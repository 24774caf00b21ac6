"""The SSRF guard: checked addresses only, redirects checked again, caps on size and time.

A safety net (``no_outside_connections``) makes any connection to a non-loopback address fail
loudly in these tests, so a broken guard can never send traffic off the machine.
"""

from __future__ import annotations

import ipaddress
import json
import socket

import pytest

from testkit.fakes.http_services import FakeServices
from voxqueue.settings import Settings, ToolSettings
from workers.tool_registry.net import (
    Allowlist,
    BlockedURLError,
    RedirectRefusedError,
    check_url,
    embedded_ipv4,
    is_public,
    resolve_checked,
    safe_get,
    safe_request,
)


@pytest.fixture(scope="module")
def services():
    with FakeServices() as fake:
        yield fake


@pytest.fixture(autouse=True)
def no_outside_connections(monkeypatch):
    """Record every TCP connection; refuse any that is not to loopback."""
    attempts: list[tuple[str, int]] = []
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        host, port = address[0], address[1]
        attempts.append((host, port))
        if not ipaddress.ip_address(host.strip("[]")).is_loopback:
            raise AssertionError(f"test tried to connect outside the machine: {host}")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)
    return attempts


def settings(**tools) -> Settings:
    return Settings(tools=ToolSettings(**tools))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "192.168.1.20",
        "172.16.5.4",
        "169.254.169.254",
        "0.0.0.0",
        "100.100.100.200",
        "224.0.0.1",
        "::1",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "2002:7f00:1::1",
    ],
)
def test_private_and_special_addresses_are_not_public(address):
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700:4700::1111", "8.8.8.8"])
def test_public_addresses_are_public(address):
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://10.0.0.1/admin",
        "http://192.168.0.1/",
        "http://[::1]:80/",
        "http://[fd00::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost:8080/",
        "http://0.0.0.0/",
        "http://2130706433/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
def test_private_targets_are_refused_without_an_allowlist(url, no_outside_connections):
    with pytest.raises(BlockedURLError, match="VOXQUEUE_URL_ALLOWLIST"):
        safe_get(url, settings())
    assert no_outside_connections == []


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1:70/", "javascript:alert(1)"],
)
def test_only_http_and_https(url):
    with pytest.raises((BlockedURLError, ValueError)):
        check_url(url, Allowlist.parse(""))


def test_loopback_is_refused_unless_allow_listed(services, no_outside_connections):
    url = f"{services.url}/web/notes.txt"
    with pytest.raises(BlockedURLError):
        safe_get(url, settings())
    assert no_outside_connections == []
    page = safe_get(url, settings(url_allowlist="127.0.0.1"))
    assert page.ok and page.text() == "plain notes\nline two"


def test_allowlist_takes_hosts_and_cidrs():
    allow = Allowlist.parse("homeassistant.local, 192.168.0.0/16", "127.0.0.1")
    assert allow.allows("homeassistant.local", ipaddress.ip_address("10.1.2.3"))
    assert allow.allows("nas", ipaddress.ip_address("192.168.4.4"))
    assert allow.allows("x", ipaddress.ip_address("127.0.0.1"))
    assert not allow.allows("x", ipaddress.ip_address("127.0.0.2"))
    assert not allow.allows("x", ipaddress.ip_address("10.0.0.1"))


def test_a_name_resolving_to_loopback_is_refused(services):
    with pytest.raises(BlockedURLError, match="localhost"):
        safe_get(f"http://localhost:{services.port}/web/notes.txt", settings())


def test_redirect_to_metadata_is_refused_before_connecting(services, no_outside_connections):
    services.reset()
    for target in (
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[fd00::1]/",
        "http://[::1]/",
    ):
        url = f"{services.url}/web/redirect?to={target}"
        with pytest.raises(BlockedURLError):
            safe_get(url, settings(url_allowlist="127.0.0.1"))
    assert {host for host, _ in no_outside_connections} == {"127.0.0.1"}
    assert len(services.requests_to("/web/redirect")) == 4


def test_redirects_are_followed_within_the_allowlist(services):
    url = f"{services.url}/web/redirect?to=/web/notes.txt"
    page = safe_get(url, settings(url_allowlist="127.0.0.1"))
    assert page.ok and page.url.endswith("/web/notes.txt")


def test_redirect_loops_stop_after_five(services):
    services.reset()
    with pytest.raises(ConnectionError, match="too many redirects"):
        safe_get(f"{services.url}/web/redirect-loop", settings(url_allowlist="127.0.0.1"))
    assert len(services.requests_to("/web/redirect-loop")) == 6


def test_dns_rebinding_cannot_swap_the_checked_address(services, monkeypatch):
    """The name is resolved once; the connection goes to that checked address."""
    calls: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.test":
            calls.append(host)
            # First answer: allowed. Any later answer would point elsewhere (127.0.0.2 has no
            # server, so using it would fail the request).
            address = "127.0.0.1" if len(calls) == 1 else "127.0.0.2"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    page = safe_get(
        f"http://rebind.test:{services.port}/web/host", settings(url_allowlist="127.0.0.1")
    )
    assert page.json() == {"host": f"rebind.test:{services.port}"}
    assert calls == ["rebind.test"]


def test_rebinding_to_a_private_address_is_refused(monkeypatch):
    def private(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(socket, "getaddrinfo", private)
    with pytest.raises(BlockedURLError, match=r"10\.0\.0\.7"):
        resolve_checked("evil.test", 80, Allowlist.parse("127.0.0.1"))


def test_a_name_with_any_private_address_is_refused(monkeypatch):
    def mixed(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", mixed)
    with pytest.raises(BlockedURLError):
        resolve_checked("mixed.test", 80, Allowlist.parse(""))


def test_body_is_capped_in_size(services):
    page = safe_get(
        f"{services.url}/web/big.txt", settings(url_allowlist="127.0.0.1", fetch_max_bytes=50_000)
    )
    assert page.truncated and len(page.content) == 50_000
    with pytest.raises(ValueError):
        page.json()


def test_exchange_is_capped_in_time(services):
    with pytest.raises(TimeoutError, match=r"0\.5 s"):
        safe_get(
            f"{services.url}/web/slow?s=3", settings(url_allowlist="127.0.0.1", fetch_timeout_s=0.5)
        )


def test_per_call_allow_entries(services):
    page = safe_request("GET", f"{services.url}/web/notes.txt", settings(), allow=["127.0.0.1"])
    assert page.ok


def test_unresolvable_host_is_a_connection_error():
    with pytest.raises(ConnectionError, match="cannot resolve"):
        resolve_checked("no-such-host.invalid", 80, Allowlist.parse(""))


# -- IPv6 addresses that carry an IPv4 one (issue 21) ----------------------------------------
@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::a9fe:a9fe",  # NAT64 well-known prefix: 169.254.169.254
        "64:ff9b::7f00:1",  # 127.0.0.1
        "64:ff9b::a00:1",  # 10.0.0.1
        "64:ff9b:1::a9fe:a9fe",  # NAT64 local-use, a /96 sub-prefix
        "64:ff9b:1:a9fe:a9:fe00::",  # NAT64 local-use, a /48 sub-prefix (RFC 6052 layout)
        "::a9fe:a9fe",  # IPv4-compatible
        "::7f00:1",
        "::ffff:0:a9fe:a9fe",  # IPv4-translated (SIIT)
        "2002:a9fe:a9fe::1",  # 6to4
        "2001:0:a9fe:a9fe::5601:5601",  # Teredo, metadata server and client
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo with public ends: never
    ],
)
def test_ipv6_carrying_a_private_ipv4_is_not_public(address):
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    ["64:ff9b::808:808", "64:ff9b:1:808:8:808:808:808", "::ffff:808:808", "2002:808:808::1"],
)
def test_ipv6_carrying_a_public_ipv4_is_public(address):
    assert is_public(ipaddress.ip_address(address))


def test_embedded_ipv4_reads_every_nat64_layout():
    wanted = ipaddress.IPv4Address("169.254.169.254")
    assert embedded_ipv4(ipaddress.IPv6Address("64:ff9b::a9fe:a9fe")) == [wanted]
    assert wanted in embedded_ipv4(ipaddress.IPv6Address("64:ff9b:1:a9fe:a9:fe00::"))
    assert embedded_ipv4(ipaddress.IPv6Address("2606:4700:4700::1111")) == []


@pytest.mark.parametrize("target", ["64:ff9b::a9fe:a9fe", "::ffff:0:a9fe:a9fe", "::a9fe:a9fe"])
def test_a_name_resolving_to_nat64_metadata_is_refused_before_connecting(
    target, monkeypatch, no_outside_connections
):
    def nat64(host, port, *args, **kwargs):
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (target, port, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", nat64)
    with pytest.raises(BlockedURLError, match="VOXQUEUE_URL_ALLOWLIST"):
        safe_get("http://metadata.test/latest/meta-data/", settings())
    with pytest.raises(BlockedURLError):
        safe_get(f"http://[{target}]/latest/meta-data/", settings())
    assert no_outside_connections == []


# -- credentials and redirects (issue 21) --------------------------------------------------------
CREDENTIALS = {
    "Authorization": "Bearer tool-secret-123",
    "Cookie": "sid=cookie-secret",
    "X-Api-Key": "key-secret",
    "Proxy-Authorization": "Basic cHJveHk6c2VjcmV0",
}


@pytest.fixture(scope="module")
def elsewhere():
    """A second server: the same address, another port, so another origin."""
    with FakeServices() as fake:
        yield fake


def test_credentials_are_not_sent_to_another_origin(services, elsewhere):
    services.reset()
    elsewhere.reset()
    page = safe_get(
        f"{services.url}/web/redirect?to={elsewhere.url}/web/host",
        settings(url_allowlist="127.0.0.1"),
        headers={**CREDENTIALS, "Accept": "application/json"},
    )
    assert page.ok
    (first,) = services.requests_to("/web/redirect")
    assert first["headers"]["Authorization"] == CREDENTIALS["Authorization"]
    (moved,) = elsewhere.requests_to("/web/host")
    assert moved["headers"]["Accept"] == "application/json"
    for name in CREDENTIALS:
        assert name not in moved["headers"], name
    assert "secret" not in json.dumps(moved)


def test_credentials_stay_on_a_same_origin_redirect(services):
    services.reset()
    safe_get(
        f"{services.url}/web/redirect?to=/web/host",
        settings(url_allowlist="127.0.0.1"),
        headers=CREDENTIALS,
    )
    (moved,) = services.requests_to("/web/host")
    assert moved["headers"]["Authorization"] == CREDENTIALS["Authorization"]


def test_userinfo_credentials_are_not_sent_to_another_origin(services, elsewhere):
    services.reset()
    elsewhere.reset()
    start = f"http://user:pw-secret@127.0.0.1:{services.port}"
    safe_get(
        f"{start}/web/redirect?to={elsewhere.url}/web/host", settings(url_allowlist="127.0.0.1")
    )
    (first,) = services.requests_to("/web/redirect")
    assert first["headers"]["Authorization"].startswith("Basic ")  # httpx sends the userinfo
    (moved,) = elsewhere.requests_to("/web/host")
    assert "Authorization" not in moved["headers"]


def test_a_redirect_is_an_error_when_redirects_are_refused(services, elsewhere):
    services.reset()
    elsewhere.reset()
    with pytest.raises(RedirectRefusedError, match=r"HTTP 307.*not followed") as caught:
        safe_request(
            "POST",
            f"{services.url}/moved/{elsewhere.port}/hook?token=abc",
            settings(url_allowlist="127.0.0.1"),
            headers=CREDENTIALS,
            json_body={"secret": "body"},
            follow_redirects=False,
        )
    assert isinstance(caught.value, ConnectionError)
    assert caught.value.status == 307
    assert "abc" not in str(caught.value)  # the query string is not repeated
    assert elsewhere.requests == []
    assert len(services.requests_to("/moved/")) == 1
