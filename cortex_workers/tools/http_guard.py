"""SSRF guard for plugin HTTP calls (docs/tools.md, "Plugin manifests").

`guarded_request` resolves the target host once, refuses the call if ANY resolved
address is blocked (before a single connection is made), then connects to a checked
address *pinned by IP* (the first; the next only if connecting fails), so a DNS answer
that changes between check and connect (DNS rebinding) cannot redirect the call.
Redirects are never followed, proxies from the environment are ignored and the response
body is capped.

Mechanism (why httpx rather than `http.client` with a hand-made socket): httpx lets us
keep every part of TLS and HTTP/1.1 in a well-kept library while pinning cleanly:

- the request URL carries the checked IP, so httpcore connects to exactly that address
  (an IP literal: no name lookup happens after the check);
- the original `Host` header is set explicitly (httpx only adds one when absent);
- the `sni_hostname` request extension makes httpcore pass the original hostname as
  `server_hostname` to `SSLContext.wrap_socket`, which is used both for SNI and for
  certificate hostname verification (`check_hostname` stays on);
- `trust_env=False` disables HTTP(S)_PROXY/ALL_PROXY/NO_PROXY and netrc;
  `follow_redirects=False` returns a 3xx as is.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from ipaddress import IPv4Address, IPv6Address
from typing import Any, NamedTuple

import httpx

MAX_BODY_BYTES = 1 << 20
"""Largest response body accepted (1 MiB); a longer one raises `ResponseTooLarge`."""

Resolver = Callable[[str, int, int, int], Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]]
"""`socket.getaddrinfo`-compatible: called as `resolver(host, port, family, type)`."""

IPAddress = IPv4Address | IPv6Address

_METADATA = ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
_PRIVATE = (
    ("10.0.0.0/8", "private address"),
    ("172.16.0.0/12", "private address"),
    ("192.168.0.0/16", "private address"),
    ("fc00::/7", "private (unique local) address"),
    ("100.64.0.0/10", "shared (CGNAT) address"),
)
_NAT64 = "64:ff9b::/96"


class BlockedAddress(Exception):
    """A plugin call refused because the target host resolves to a forbidden address."""

    def __init__(self, host: str, address: IPAddress, reason: str, *, overridable: bool) -> None:
        if overridable:
            hint = "set allow_private_host: true in the plugin manifest to permit private and "
            hint += "loopback hosts"
        else:
            hint = "this is never allowed (allow_private_host: true permits only private and "
            hint += "loopback hosts)"
        super().__init__(f"refusing to connect to {host} ({address}): {reason}; {hint}")
        self.host = host
        self.address = address
        self.reason = reason


class ResponseTooLarge(Exception):
    """The response body exceeded the cap."""


class GuardedResponse(NamedTuple):
    """What the upstream answered; a 3xx is returned as is (redirects are not followed)."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes


def check_address(ip: IPAddress, *, allow_private: bool) -> str | None:
    """Why `ip` must not be contacted, or None if it may be.

    Always refused: cloud metadata, unspecified, link-local, multicast, reserved and other
    special-purpose (non-global) addresses. Refused unless `allow_private`: loopback,
    private (RFC 1918, fc00::/7) and shared/CGNAT (100.64.0.0/10) addresses. An IPv6 address
    embedding an IPv4 one (IPv4-mapped, NAT64 64:ff9b::/96, 6to4) is judged by the latter.
    """
    if isinstance(ip, IPv6Address):
        ip = IPv6Address(int(ip))  # drop any %scope so comparisons are exact
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            reason = check_address(embedded, allow_private=allow_private)
            return None if reason is None else f"{reason} (as IPv4 {embedded})"
    if ip in {ipaddress.ip_address(a) for a in _METADATA}:
        return "cloud metadata address"
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_multicast:
        return "multicast address"
    if ip.is_loopback:
        return None if allow_private else "loopback address"
    for network, label in _PRIVATE:
        if ip in ipaddress.ip_network(network):
            return None if allow_private else label
    if ip.is_reserved or not ip.is_global:
        return "reserved or special-purpose address"
    return None


def _embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in ipaddress.ip_network(_NAT64):
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def parse_url(url: str) -> httpx.URL:
    """`url` parsed; ValueError unless it is an absolute http(s) URL with a host.

    Credentials in the URL are refused (they would leak into error messages).
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"URL scheme must be http or https, got {parsed.scheme or 'none'!r}")
    if not parsed.raw_host:
        raise ValueError(f"URL {url!r} has no host")
    if parsed.userinfo:
        raise ValueError("URL must not contain credentials; use the manifest's auth section")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise ValueError(f"URL port {parsed.port} is out of range")
    return parsed


def check_literal_host(host: str, *, allow_private: bool) -> None:
    """BlockedAddress if `host` is an IP literal that may not be contacted (no DNS lookup)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return
    resolve_checked(host, 0, allow_private=allow_private)


def resolve_checked(
    host: str, port: int, *, allow_private: bool, resolver: Resolver = socket.getaddrinfo
) -> list[IPAddress]:
    """Resolve `host` once and return its addresses; BlockedAddress if any is blocked.

    An IP literal is used as is (no lookup). ConnectionError if the name does not resolve.
    """
    try:
        addresses: list[IPAddress] = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = resolver(host, port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise ConnectionError(f"cannot resolve {host}: {exc}") from None
        addresses = []
        for info in infos:
            ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if ip not in addresses:
                addresses.append(ip)
        if not addresses:
            raise ConnectionError(f"cannot resolve {host}: no addresses") from None
    for ip in addresses:
        reason = check_address(ip, allow_private=allow_private)
        if reason is not None:
            overridable = check_address(ip, allow_private=True) is None
            raise BlockedAddress(host, ip, reason, overridable=overridable)
    return addresses


def guarded_request(
    method: str,
    url: str,
    *,
    json: Any = None,
    content: bytes | None = None,
    params: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float,
    allow_private: bool,
    resolver: Resolver = socket.getaddrinfo,
    ssl_context: ssl.SSLContext | None = None,
    max_body: int = MAX_BODY_BYTES,
) -> GuardedResponse:
    """Send one HTTP request to `url` through the SSRF guard and return the answer.

    Raises ValueError (bad URL or timeout), BlockedAddress (before any connection),
    ConnectionError (resolution or transport failure), TimeoutError (a network phase took
    longer than `timeout_s`, or the whole exchange did) and ResponseTooLarge (body over
    `max_body` bytes after decoding). `ssl_context` defaults to one trusting SSL_CERT_FILE /
    SSL_CERT_DIR when set, else the certifi bundle.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    target = parse_url(url)
    host = target.raw_host.decode("ascii")
    port = target.port or (443 if target.scheme == "https" else 80)
    addresses = resolve_checked(host, port, allow_private=allow_private, resolver=resolver)
    sent_headers = dict(headers or {})
    sent_headers["Host"] = target.netloc.decode("ascii")
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    what = f"{method} {target.scheme}://{target.netloc.decode('ascii')}{target.path}"
    deadline = time.monotonic() + timeout_s
    context = ssl_context if ssl_context is not None else _default_ssl_context()
    with httpx.Client(
        trust_env=False, follow_redirects=False, verify=context, timeout=timeout_s
    ) as client:
        requests = [
            client.build_request(
                method,
                target.copy_with(host=str(ip)),  # pinned: connect to the checked address
                json=json,
                content=content,
                params=params,
                headers=sent_headers,
                extensions=extensions,
            )
            for ip in addresses
        ]
        try:
            response = _send_first_reachable(client, requests)
            try:
                body = _read_capped(response, max_body, deadline, what)
            finally:
                response.close()
        except httpx.TimeoutException:
            raise TimeoutError(f"{what} did not answer within {timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise ConnectionError(f"{what} failed: {type(exc).__name__}: {exc}") from None
    return GuardedResponse(response.status_code, response.reason_phrase, response.headers, body)


def _send_first_reachable(client: httpx.Client, requests: list[httpx.Request]) -> httpx.Response:
    """Send to the checked addresses in resolver order, moving on only if a connect fails."""
    for request in requests[:-1]:
        try:
            return client.send(request, stream=True)
        except httpx.ConnectError:
            continue
    return client.send(requests[-1], stream=True)


def _read_capped(response: httpx.Response, cap: int, deadline: float, what: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():  # decoded, so a compressed bomb is capped too
        size += len(chunk)
        if size > cap:
            raise ResponseTooLarge(f"{what}: response body exceeds {cap} bytes")
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not finish answering within the deadline")
    return b"".join(chunks)


def _default_ssl_context() -> ssl.SSLContext:
    # trust_env=False also makes httpx ignore SSL_CERT_FILE/SSL_CERT_DIR; honour them here
    # so operators can trust an internal CA for their bridges.
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile or None, capath=capath or None)
    import certifi  # an httpx dependency

    return ssl.create_default_context(cafile=certifi.where())
