"""The SSRF guard refuses forbidden addresses before connecting and pins what it checked."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from cortex_workers.tools.http_guard import (
    BlockedAddress,
    ResponseTooLarge,
    check_address,
    guarded_request,
    parse_url,
)

ALWAYS_BLOCKED = {
    "169.254.169.254": "metadata",
    "fd00:ec2::254": "metadata",
    "100.100.100.200": "metadata",
    "169.254.10.1": "link-local",
    "fe80::1": "link-local",
    "0.0.0.0": "unspecified",
    "::": "unspecified",
    "224.0.0.1": "multicast",
    "ff02::1": "multicast",
    "240.0.0.1": "reserved",
    "255.255.255.255": "reserved",
    "192.0.2.10": "reserved",
    "::ffff:169.254.169.254": "metadata",
    "::ffff:169.254.1.1": "link-local",
}
PRIVATE = {
    "127.0.0.1": "loopback",
    "127.200.0.1": "loopback",
    "::1": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "172.31.255.254": "private",
    "192.168.1.1": "private",
    "fc00::1": "private",
    "fd12:3456::1": "private",
    "100.64.0.1": "shared",
    "100.127.255.254": "shared",
    "::ffff:127.0.0.1": "loopback",
    "::ffff:10.0.0.1": "private",
    "::ffff:192.168.0.1": "private",
}
PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Bridge(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[Seen] = []
        self.release = threading.Event()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    server: Bridge

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.server.seen.append(Seen(self.command, self.path, dict(self.headers), body))
        if self.path == "/redirect":
            self._answer(302, b"", {"Location": "/ok"})
        elif self.path == "/slow":
            self.server.release.wait(30)
            self._answer(200, b"{}")
        elif self.path == "/big":
            self._answer(200, b"x" * 5000, {"Content-Type": "text/plain"})
        else:
            self._answer(200, json.dumps({"host": self.headers.get("Host")}).encode())

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _serve(server: Bridge) -> Iterator[Bridge]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    yield from _serve(Bridge())


class Resolver:
    """A getaddrinfo stand-in: answer number i is used for call i (the last one repeats)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, host: str, port: int, *_: Any) -> list[tuple[Any, ...]]:
        self.calls.append(host)
        ips = self.answers[min(len(self.calls), len(self.answers)) - 1]
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (ip, port, 0, 0))
            if ":" in ip
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
            for ip in ips
        ]


@pytest.fixture
def no_connect(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Any connection attempt is recorded and fails the call."""
    attempts: list[object] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def _get(url: str, **kw: Any) -> Any:
    options: dict[str, Any] = {"timeout_s": 5.0, "allow_private": False}
    options.update(kw)
    return guarded_request("GET", url, **options)


@pytest.mark.parametrize(("address", "category"), sorted(ALWAYS_BLOCKED.items()))
def test_always_blocked_addresses_are_refused_even_with_allow_private(
    address: str, category: str
) -> None:
    for allow_private in (False, True):
        reason = check_address(ip_address(address), allow_private=allow_private)
        assert reason is not None and category in reason


@pytest.mark.parametrize(("address", "category"), sorted(PRIVATE.items()))
def test_private_and_loopback_addresses_are_refused_unless_allowed(
    address: str, category: str
) -> None:
    reason = check_address(ip_address(address), allow_private=False)
    assert reason is not None and category in reason
    assert check_address(ip_address(address), allow_private=True) is None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert check_address(ip_address(address), allow_private=False) is None


def test_ipv4_mapped_ipv6_is_judged_as_its_ipv4_address() -> None:
    reason = check_address(ip_address("::ffff:169.254.169.254"), allow_private=True)
    assert reason is not None and "169.254.169.254" in reason


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/x",
        "http://[::ffff:127.0.0.1]:9/x",
        "https://[fe80::1]/x",
    ],
)
def test_ip_literals_are_refused_without_lookup_or_connection(
    url: str, no_connect: list[object]
) -> None:
    resolver = Resolver(["8.8.8.8"])
    with pytest.raises(BlockedAddress):
        _get(url, resolver=resolver)
    assert resolver.calls == [] and no_connect == []


def test_localhost_is_refused_after_one_lookup_and_no_connection(
    no_connect: list[object],
) -> None:
    resolver = Resolver(["127.0.0.1"])
    with pytest.raises(BlockedAddress) as caught:
        _get("http://localhost:9/x", resolver=resolver)
    assert resolver.calls == ["localhost"] and no_connect == []
    message = str(caught.value)
    assert "localhost" in message and "127.0.0.1" in message and "loopback" in message
    assert "allow_private_host: true" in message


def test_metadata_refusal_says_no_setting_permits_it(no_connect: list[object]) -> None:
    with pytest.raises(BlockedAddress) as caught:
        _get("http://169.254.169.254/latest/meta-data", allow_private=True)
    message = str(caught.value)
    assert "cloud metadata" in message and "never allowed" in message
    assert "allow_private_host: true" in message and no_connect == []


def test_hostname_resolving_to_a_private_address_is_refused(no_connect: list[object]) -> None:
    with pytest.raises(BlockedAddress, match="10.20.30.40"):
        _get("http://bridge.example/x", resolver=Resolver(["10.20.30.40"]))
    assert no_connect == []


def test_hostname_resolving_to_a_public_and_a_private_address_is_refused(
    no_connect: list[object],
) -> None:
    resolver = Resolver(["93.184.216.34", "192.168.7.7"])
    with pytest.raises(BlockedAddress, match="192.168.7.7"):
        _get("https://mixed.example/x", resolver=resolver)
    assert resolver.calls == ["mixed.example"] and no_connect == []


def test_connection_is_pinned_to_the_checked_address_with_the_original_host_header(
    bridge: Bridge,
) -> None:
    # A rebinding resolver: only the first answer is allowed; later ones point elsewhere.
    resolver = Resolver(["127.0.0.1"], ["169.254.169.254"])
    url = f"http://bridge.test:{bridge.port}/ok"
    response = _get(url, resolver=resolver, allow_private=True)
    assert response.status == 200
    assert json.loads(response.body) == {"host": f"bridge.test:{bridge.port}"}
    assert resolver.calls == ["bridge.test"]


def test_the_next_checked_address_is_tried_when_connecting_to_the_first_fails(
    bridge: Bridge,
) -> None:
    resolver = Resolver(["::1", "127.0.0.1"])  # the bridge listens on IPv4 only
    response = _get(f"http://two.test:{bridge.port}/ok", resolver=resolver, allow_private=True)
    assert response.status == 200 and resolver.calls == ["two.test"]


def test_redirects_are_returned_not_followed(bridge: Bridge) -> None:
    response = _get(f"http://127.0.0.1:{bridge.port}/redirect", allow_private=True)
    assert response.status == 302 and response.headers["location"] == "/ok"
    assert [seen.path for seen in bridge.seen] == ["/redirect"]


def test_environment_proxies_are_ignored(bridge: Bridge, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    response = _get(f"http://127.0.0.1:{bridge.port}/ok", allow_private=True)
    assert response.status == 200 and len(bridge.seen) == 1


def test_a_slow_answer_raises_timeout_error(bridge: Bridge) -> None:
    with pytest.raises(TimeoutError, match="did not answer within 0.2s"):
        _get(f"http://127.0.0.1:{bridge.port}/slow", allow_private=True, timeout_s=0.2)


def test_a_body_over_the_cap_is_refused(bridge: Bridge) -> None:
    with pytest.raises(ResponseTooLarge, match="exceeds 1000 bytes"):
        _get(f"http://127.0.0.1:{bridge.port}/big", allow_private=True, max_body=1000)


def test_an_unresolvable_host_raises_connection_error(no_connect: list[object]) -> None:
    def fail(*_: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(ConnectionError, match="cannot resolve nowhere.test"):
        _get("http://nowhere.test/x", resolver=fail)
    assert no_connect == []


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://bridge.test/x", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("http:///x", "no host"),
        ("http://user:secret@bridge.test/x", "credentials"),
        ("http://bridge.test:99999/x", "out of range"),
    ],
)
def test_unusable_urls_are_refused(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_url(url)


# --- HTTPS: SNI and certificate verification use the original hostname ---------------


def _certificate(directory: Path, hostname: str) -> tuple[Path, Path]:
    cert, key = directory / f"{hostname}.pem", directory / f"{hostname}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        + ["-nodes", "-days", "2", "-subj", f"/CN={hostname}"]
        + ["-addext", f"subjectAltName=DNS:{hostname}", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_bridge(tmp_path: Path) -> Iterator[tuple[Bridge, Path, list[str]]]:
    """An HTTPS bridge whose certificate names bridge.test; records the SNI names it sees."""
    cert, key = _certificate(tmp_path, "bridge.test")
    server_names: list[str] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def record_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        server_names.append(str(name))

    context.sni_callback = record_sni
    server = Bridge()
    server.socket = context.wrap_socket(server.socket, server_side=True)
    for running in _serve(server):
        yield running, cert, server_names


def test_https_sends_the_original_hostname_for_sni_and_verifies_it(
    tls_bridge: tuple[Bridge, Path, list[str]],
) -> None:
    server, cert, server_names = tls_bridge
    resolver = Resolver(["127.0.0.1"])
    response = _get(
        f"https://bridge.test:{server.port}/ok",
        resolver=resolver,
        allow_private=True,
        ssl_context=ssl.create_default_context(cafile=str(cert)),
    )
    assert response.status == 200
    assert json.loads(response.body) == {"host": f"bridge.test:{server.port}"}
    assert server_names == ["bridge.test"] and resolver.calls == ["bridge.test"]


def test_https_refuses_a_certificate_for_another_hostname(
    tls_bridge: tuple[Bridge, Path, list[str]], tmp_path: Path
) -> None:
    server, cert, _ = tls_bridge
    with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED|certificate"):
        _get(
            f"https://other.test:{server.port}/ok",
            resolver=Resolver(["127.0.0.1"]),
            allow_private=True,
            ssl_context=ssl.create_default_context(cafile=str(cert)),
        )
    assert server.seen == []
