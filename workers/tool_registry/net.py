"""HTTP for tools, guarded against server-side request forgery.

Every connection goes to an address checked after resolution: loopback, private, link-local
(cloud metadata at 169.254.169.254), unique-local, multicast and reserved addresses are refused
unless ``VOXQUEUE_URL_ALLOWLIST`` names the host or a network containing the address. The
request is sent to the checked address itself (the name is not resolved a second time, so DNS
rebinding cannot swap it), with the original Host header and TLS server name. An IPv6 address
that carries an IPv4 one (mapped, compatible, 6to4, Teredo, NAT64) is judged by that IPv4
address. Redirects are followed by hand, at most five, each target checked again before any
connection; credentials (Authorization, Cookie, API-key headers) are not sent on to another
origin, and a service that is sent credentials can refuse redirects altogether
(``follow_redirects=False``). Only http and https; the body is capped in bytes and the whole
exchange in time. This module judges addresses only: which URL a model may choose (none that
could carry what it read away) is :mod:`workers.tool_registry.egress`'s, before the request.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpx

from voxqueue.observability.redaction import is_secret_name, redact_text
from voxqueue.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}
USER_AGENT = "voxqueue/0.1 (voice assistant tools)"


class BlockedURLError(PermissionError):
    """The URL's scheme or address is not one a tool may reach."""


class RedirectRefusedError(ConnectionError):
    """A redirect answered a request that was made with ``follow_redirects=False``."""

    def __init__(self, url: str, status: int, location: str, hint: str = "") -> None:
        super().__init__(
            f"{host_of(url) or 'the service'} answered HTTP {status}, a redirect to "
            f"{redact_text(location)}; "
            "redirects are not followed for a service that is sent credentials"
            + (f" ({hint})" if hint else "")
        )
        self.url, self.status, self.location = url, status, location


class ResponseTooLarge(ValueError):
    """Raised by :meth:`FetchResult.json` when the body was cut at the byte cap."""


@dataclass(frozen=True)
class Allowlist:
    """Hosts (by name) and networks that may be reached even when private."""

    hosts: frozenset[str]
    networks: tuple[Network, ...]

    @classmethod
    def parse(cls, *entries: str) -> Allowlist:
        """From comma-separated entries: host names, IP addresses or CIDRs."""
        hosts: set[str] = set()
        networks: list[Network] = []
        for raw in entries:
            for item in raw.split(","):
                entry = item.strip().strip("[]").lower()
                if not entry:
                    continue
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    hosts.add(entry.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, host: str, address: IPAddress) -> bool:
        if host.lower().rstrip(".") in self.hosts:
            return True
        return any(address.version == n.version and address in n for n in self.networks)


#: Prefixes whose last 32 bits are an IPv4 address: NAT64's well-known prefix (RFC 6052),
#: IPv4-compatible (deprecated) and IPv4-translated (SIIT) addresses.
_IPV4_IN_LAST_32 = tuple(
    ipaddress.IPv6Network(n) for n in ("64:ff9b::/96", "::/96", "::ffff:0:0:0/96")
)
#: NAT64's local-use prefix (RFC 8215): the operator's own sub-prefix, /48 to /96, sets where
#: the IPv4 address sits, so every RFC 6052 place is checked.
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def _rfc6052(address: ipaddress.IPv6Address, prefix_len: int) -> ipaddress.IPv4Address:
    """The IPv4 address that a NAT64 prefix of ``prefix_len`` bits embeds (bits 64-71 skipped)."""
    n = int(address)
    if prefix_len == 96:
        return ipaddress.IPv4Address(n & 0xFFFFFFFF)
    without_u = ((n >> 64) << 56) | (n & ((1 << 56) - 1))
    return ipaddress.IPv4Address((without_u >> (88 - prefix_len)) & 0xFFFFFFFF)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for (mapped, compatible, translated, 6to4,
    Teredo server and client, NAT64); empty for a plain IPv6 address."""
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    if address in _NAT64_LOCAL:
        return [_rfc6052(address, n) for n in (48, 56, 64, 96)]
    if any(address in net for net in _IPV4_IN_LAST_32):
        return [_rfc6052(address, 96)]
    return []


def is_public(address: IPAddress) -> bool:
    """True for a globally routable unicast address; an IPv6 address that carries IPv4 ones
    is public when they all are (Teredo's prefix is never)."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner:
            return address.teredo is None and all(is_public(v4) for v4 in inner)
    return address.is_global and not address.is_multicast


def resolve_checked(host: str, port: int, allow: Allowlist) -> IPAddress:
    """The address to connect to for ``host``: every address it resolves to must be allowed."""
    literal = host.strip("[]")
    try:
        addresses: list[IPAddress] = [ipaddress.ip_address(literal)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(literal, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ConnectionError(f"cannot resolve host {host!r}: {exc}") from None
        addresses = []
        for info in infos:
            found = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if found not in addresses:
                addresses.append(found)
    if not addresses:
        raise ConnectionError(f"host {host!r} has no address")
    for address in addresses:
        if not is_public(address) and not allow.allows(literal, address):
            raise BlockedURLError(
                f"refusing to connect to {host} ({address}): private, loopback, link-local "
                "and metadata addresses are blocked (allow it in VOXQUEUE_URL_ALLOWLIST)"
            )
    return addresses[0]


def check_url(url: str, allow: Allowlist) -> tuple[httpx.URL, IPAddress]:
    """Parse ``url``, refuse schemes other than http(s), and resolve and check its host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise BlockedURLError(
            f"only http and https URLs are allowed, not {parsed.scheme or 'no'} scheme ({url!r})"
        )
    if not parsed.host:
        raise ValueError(f"invalid URL {url!r}: no host")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed, resolve_checked(parsed.host, port, allow)


@dataclass(frozen=True)
class FetchResult:
    """A response read within the caps."""

    url: str
    status: int
    headers: httpx.Headers
    content: bytes
    truncated: bool

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        encoding = "utf-8"
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                encoding = value.strip("\"' ")
        try:
            return self.content.decode(encoding, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        if self.truncated:
            raise ResponseTooLarge(f"the answer from {self.url} is larger than the size cap")
        return json.loads(self.content)


def safe_request(
    method: str,
    url: str,
    settings: Settings,
    *,
    params: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    json_body: Any = None,
    content: bytes | str | None = None,
    allow: Iterable[str] = (),
    max_bytes: int | None = None,
    timeout_s: float | None = None,
    max_redirects: int = MAX_REDIRECTS,
    follow_redirects: bool = True,
) -> FetchResult:
    """Send one request (and its redirects) to checked addresses only; read at most
    ``max_bytes`` (``tools.fetch_max_bytes``) within ``timeout_s`` (``tools.fetch_timeout_s``)
    overall.

    ``allow`` adds allow-list entries for this call, e.g. the host of a configured service.
    A redirect to another origin drops the credential headers; with ``follow_redirects=False``
    a redirect raises :class:`RedirectRefusedError` instead (for services sent credentials).
    """
    allowlist = Allowlist.parse(settings.tools.url_allowlist, *allow)
    cap = settings.tools.fetch_max_bytes if max_bytes is None else max_bytes
    budget = settings.tools.fetch_timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + budget
    try:
        current = str(httpx.URL(url, params=params)) if params else url
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"invalid URL {url!r}: {exc}") from None
    verb = method.upper()
    body_json, body = json_body, content
    base_headers = {"User-Agent": USER_AGENT, **(headers or {})}
    with httpx.Client(trust_env=False, follow_redirects=False) as client:
        for _hop in range(max_redirects + 1):
            parsed, address = check_url(current, allowlist)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer from {parsed.host} within {budget:g} s")
            pinned = parsed.copy_with(host=str(address))
            hop_headers = {**base_headers, "Host": _host_header(parsed)}
            request = client.build_request(
                verb,
                pinned,
                headers=hop_headers,
                json=body_json,
                content=body,
                timeout=httpx.Timeout(remaining),
                extensions={"sni_hostname": parsed.host} if parsed.scheme == "https" else None,
            )
            try:
                response = client.send(request, stream=True)
            except httpx.TimeoutException:
                raise TimeoutError(f"no answer from {parsed.host} within {budget:g} s") from None
            except httpx.HTTPError as exc:
                raise ConnectionError(f"could not reach {parsed.host}: {exc}") from None
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    if not follow_redirects:
                        raise RedirectRefusedError(str(parsed), response.status_code, location)
                    current = urljoin(str(parsed), location)
                    if _origin(current) != _origin(str(parsed)):
                        base_headers = without_credentials(base_headers)
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and verb not in ("GET", "HEAD")
                    ):
                        verb, body_json, body = "GET", None, None
                    continue
                data, truncated = _read_capped(response, cap, deadline, parsed.host, budget)
                return FetchResult(
                    str(parsed), response.status_code, response.headers, data, truncated
                )
            finally:
                response.close()
    raise ConnectionError(f"too many redirects (more than {max_redirects}) from {url}")


def safe_get(url: str, settings: Settings, **kwargs: Any) -> FetchResult:
    """:func:`safe_request` with GET."""
    return safe_request("GET", url, settings, **kwargs)


def without_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` less those that carry credentials (Authorization, Cookie, API keys...)."""
    return {k: v for k, v in headers.items() if not is_secret_name(k)}


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of ``url``; None when it is not a valid URL."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    return parsed.scheme, parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)


def _host_header(url: httpx.URL) -> str:
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{host}:{url.port}" if url.port else host


def _read_capped(
    response: httpx.Response, cap: int, deadline: float, host: str, budget: float
) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of the body, before the deadline."""
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{host} took longer than {budget:g} s to send its answer")
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                return b"".join(chunks)[:cap], True
    except httpx.TimeoutException:
        raise TimeoutError(f"{host} took longer than {budget:g} s to send its answer") from None
    except httpx.HTTPError as exc:
        raise ConnectionError(f"the answer from {host} broke off: {exc}") from None
    return b"".join(chunks), False


def host_of(url: str) -> str:
    """The host of a configured service URL, to allow-list it for that service's calls."""
    try:
        return httpx.URL(url).host
    except (httpx.InvalidURL, TypeError):
        return ""
