"""Plugin manifests become guarded HTTP tools; bad manifests are rejected with a reason."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from cortex_workers.tools.http_guard import BlockedAddress
from cortex_workers.tools.plugins import RejectedPlugin, load_plugins
from cortex_workers.tools.registry import Tool, ToolRegistry
from cortex_workers.tools.results import UpstreamError

TOKEN = "s3cr3t-bridge-token-4f9a"
ENV = {"BRIDGE_TOKEN": TOKEN}
EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "plugins" / "examples"


class Bridge(ThreadingHTTPServer):
    """An internal bridge stand-in on 127.0.0.1 that records what it receives."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Bridge

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        self.server.requests.append(
            {
                "method": self.command,
                "path": url.path,
                "query": parse_qs(url.query),
                "headers": dict(self.headers),
                "body": body,
            }
        )
        auth = self.headers.get("Authorization", "")
        if url.path == "/redirect":
            self._answer(302, b"", location=f"{self.server.base}/elsewhere")
        elif url.path == "/unavailable":
            self._answer(503, b"")
        elif url.path == "/unauthorized":  # a careless bridge that echoes the credential
            self._answer(401, f"token rejected: {auth}".encode(), content_type="text/plain")
        elif url.path == "/slow":
            self.server.release.wait(30)
            self._answer(200, b"{}")
        elif url.path == "/text":
            self._answer(200, b"all quiet", content_type="text/plain")
        else:
            self._answer(200, json.dumps({"ok": True, "path": url.path}).encode())

    def _answer(
        self,
        status: int,
        body: bytes,
        *,
        location: str = "",
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    server = Bridge()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def no_connect(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Any connection attempt is recorded and fails."""
    attempts: list[object] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """socket.getaddrinfo stubbed: every name resolves to 127.0.0.1; names are recorded."""
    names: list[str] = []

    def resolve(host: str, port: int, *_: Any, **__: Any) -> list[tuple[Any, ...]]:
        names.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return names


def _manifest(url: str, *, method: str = "POST", extra: str = "", name: str = "jira_search") -> str:
    return f"""
name: {name}
description: |
  Search Jira tickets matching a JQL query.
parameters:
  query:
    type: string
    description: "JQL expression"
  limit:
    type: integer
    minimum: 1
    maximum: 20
    default: 10
endpoint:
  method: {method}
  url: {url}
auth:
  type: bearer
  token: "${{BRIDGE_TOKEN}}"
{extra}
"""


def _load_one(tmp_path: Path, text: str, env: dict[str, str] = ENV) -> Tool:
    (tmp_path / "plugin.yaml").write_text(text)
    tools, rejected = load_plugins(tmp_path, env=env)
    assert rejected == [] and len(tools) == 1
    return tools[0]


def _reject_one(tmp_path: Path, text: str, env: dict[str, str] = ENV) -> RejectedPlugin:
    (tmp_path / "plugin.yaml").write_text(text)
    tools, rejected = load_plugins(tmp_path, env=env)
    assert tools == [] and len(rejected) == 1
    return rejected[0]


def test_a_post_plugin_sends_the_token_and_json_arguments_and_returns_the_answer(
    tmp_path: Path, bridge: Bridge
) -> None:
    url = f"{bridge.base}/jira/search"
    tool = _load_one(tmp_path, _manifest(url, extra="allow_private_host: true"))
    assert tool.fn(query="project = OPS", limit=5) == {"ok": True, "path": "/jira/search"}
    [seen] = bridge.requests
    assert seen["method"] == "POST" and seen["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(seen["body"]) == {"query": "project = OPS", "limit": 5}


def test_a_get_plugin_sends_the_arguments_as_query_parameters(
    tmp_path: Path, bridge: Bridge
) -> None:
    url = f"{bridge.base}/deploys"
    tool = _load_one(tmp_path, _manifest(url, method="GET", extra="allow_private_host: true"))
    assert tool.fn(query="status = Open", limit=3) == {"ok": True, "path": "/deploys"}
    [seen] = bridge.requests
    assert seen["method"] == "GET" and seen["body"] == b""
    assert seen["query"] == {"query": ["status = Open"], "limit": ["3"]}
    assert seen["headers"]["Authorization"] == f"Bearer {TOKEN}"


def test_an_argument_named_self_is_passed_through(tmp_path: Path, bridge: Bridge) -> None:
    text = f"""
name: odd
description: An argument called self.
parameters:
  self: {{type: string}}
endpoint: {{method: POST, url: "{bridge.base}/odd"}}
allow_private_host: true
"""
    tool = _load_one(tmp_path, text)
    assert tool.fn(self="me") == {"ok": True, "path": "/odd"}
    assert json.loads(bridge.requests[0]["body"]) == {"self": "me"}


def test_a_non_json_answer_comes_back_as_text(tmp_path: Path, bridge: Bridge) -> None:
    tool = _load_one(tmp_path, _manifest(f"{bridge.base}/text", extra="allow_private_host: true"))
    assert tool.fn(query="x") == {"text": "all quiet"}


def test_manifest_fields_become_the_tool_definition(tmp_path: Path) -> None:
    extra = 'allowed_tenants: ["ops", "sre-*"]\ntimeout: 2m\nread_only: false'
    tool = _load_one(tmp_path, _manifest("http://bridge.internal:8080/jira", extra=extra))
    assert tool.name == "jira_search" and tool.source == "plugin"
    assert tool.description == "Search Jira tickets matching a JQL query."
    assert tool.allowed_tenants == ("ops", "sre-*")
    assert tool.timeout_s == 120.0 and tool.max_timeout_s == 300.0 and tool.read_only is False
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "JQL expression"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 10},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    ToolRegistry().register(tool)  # the registry accepts it as is


def test_defaults_are_ten_seconds_read_only_and_every_session(tmp_path: Path) -> None:
    tool = _load_one(tmp_path, _manifest("https://bridge.internal/jira"))
    assert tool.timeout_s == 10.0 and tool.read_only is True and tool.allowed_tenants is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("500ms", 0.5), ("10s", 10.0), ("1m30s", 90.0), ("5m", 300.0), ("45", 45.0), ("2.5", 2.5)],
)
def test_timeouts_accept_durations_and_numbers(tmp_path: Path, value: str, seconds: float) -> None:
    tool = _load_one(tmp_path, _manifest("http://bridge.internal/x", extra=f"timeout: {value}"))
    assert tool.timeout_s == seconds


def test_a_full_object_schema_is_accepted_as_given(tmp_path: Path) -> None:
    text = """
name: lookup
description: Look something up.
parameters:
  type: object
  properties:
    key: {type: string}
    verbose: {type: boolean}
  required: [key]
endpoint: {method: GET, url: "http://bridge.internal/lookup"}
"""
    tool = _load_one(tmp_path, text)
    assert tool.parameters == {
        "type": "object",
        "properties": {"key": {"type": "string"}, "verbose": {"type": "boolean"}},
        "required": ["key"],
    }


def test_a_private_host_is_blocked_before_connecting_unless_the_manifest_allows_it(
    tmp_path: Path, lookups: list[str], no_connect: list[object]
) -> None:
    tool = _load_one(tmp_path, _manifest("http://localhost:9/x"))
    with pytest.raises(BlockedAddress, match="allow_private_host: true") as caught:
        tool.fn(query="x")
    assert "loopback" in str(caught.value) and TOKEN not in str(caught.value)
    assert lookups == ["localhost"] and no_connect == []


@pytest.mark.parametrize(
    ("url", "allow_private", "why"),
    [
        ("http://169.254.169.254/latest/meta-data", False, "cloud metadata"),
        ("http://169.254.169.254/latest/meta-data", True, "cloud metadata"),
        ("http://10.0.0.1/x", False, "private address"),
        ("http://127.0.0.1:9/x", False, "loopback"),
    ],
)
def test_ip_literal_endpoints_that_are_blocked_are_rejected_at_load(
    tmp_path: Path, no_connect: list[object], url: str, allow_private: bool, why: str
) -> None:
    extra = f"allow_private_host: {str(allow_private).lower()}"
    rejected = _reject_one(tmp_path, _manifest(url, extra=extra))
    assert rejected.name == "jira_search" and why in rejected.reason
    assert rejected.reason.startswith("endpoint.url: refusing to connect")
    assert no_connect == []


def test_a_redirect_is_not_followed(tmp_path: Path, bridge: Bridge) -> None:
    url = f"{bridge.base}/redirect"
    tool = _load_one(tmp_path, _manifest(url, extra="allow_private_host: true"))
    with pytest.raises(UpstreamError) as caught:
        tool.fn(query="x")
    assert caught.value.status == 302 and "not followed" in caught.value.reason
    assert [seen["path"] for seen in bridge.requests] == ["/redirect"]


def test_a_5xx_answer_raises_upstream_error(tmp_path: Path, bridge: Bridge) -> None:
    url = f"{bridge.base}/unavailable"
    tool = _load_one(tmp_path, _manifest(url, extra="allow_private_host: true"))
    with pytest.raises(UpstreamError) as caught:
        tool.fn(query="x")
    assert caught.value.status == 503 and caught.value.reason == "Service Unavailable"


def test_a_4xx_answer_raises_upstream_error_without_the_token(
    tmp_path: Path, bridge: Bridge
) -> None:
    url = f"{bridge.base}/unauthorized"
    tool = _load_one(tmp_path, _manifest(url, extra="allow_private_host: true"))
    with pytest.raises(UpstreamError) as caught:
        tool.fn(query="x")
    assert caught.value.status == 401
    assert caught.value.reason == "Unauthorized: token rejected: Bearer ***"
    assert TOKEN not in str(caught.value)


def test_environment_proxies_are_ignored(
    tmp_path: Path, bridge: Bridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    tool = _load_one(tmp_path, _manifest(f"{bridge.base}/x", extra="allow_private_host: true"))
    assert tool.fn(query="x") == {"ok": True, "path": "/x"}


def test_a_bridge_slower_than_the_manifest_timeout_raises_timeout_error(
    tmp_path: Path, bridge: Bridge
) -> None:
    extra = "allow_private_host: true\ntimeout: 200ms"
    tool = _load_one(tmp_path, _manifest(f"{bridge.base}/slow", extra=extra))
    with pytest.raises(TimeoutError) as caught:
        tool.fn(query="x")
    assert TOKEN not in str(caught.value)


MALFORMED = {
    "bad YAML": ("name: [unclosed\n", "invalid YAML: "),
    "not a mapping": ("- one\n- two\n", "manifest must be a YAML mapping, got list"),
    "empty file": ("", "manifest must be a YAML mapping, got empty"),
    "missing endpoint": (
        "name: x\ndescription: y\n",
        "missing required key(s): endpoint",
    ),
    "bad URL scheme": (
        _manifest("ftp://bridge.internal/x"),
        "endpoint.url: URL scheme must be http or https, got 'ftp'",
    ),
    "credentials in URL": (
        _manifest("http://user:pw@bridge.internal/x"),
        "endpoint.url: URL must not contain credentials",
    ),
    "bad method": (
        _manifest("http://bridge.internal/x", method="DELETE"),
        "endpoint.method must be GET or POST, got 'DELETE'",
    ),
    "unset variable": (
        _manifest("http://bridge.internal/x").replace("BRIDGE_TOKEN", "UNSET_TOKEN"),
        "auth.token: environment variable(s) not set: UNSET_TOKEN",
    ),
    "timeout above 5 minutes": (
        _manifest("http://bridge.internal/x", extra="timeout: 6m"),
        "timeout '6m' (360s) exceeds the hard ceiling of 5 minutes (300s)",
    ),
    "unparseable timeout": (
        _manifest("http://bridge.internal/x", extra="timeout: soon"),
        "timeout 'soon' is not a duration",
    ),
    "bad tool name": (
        _manifest("http://bridge.internal/x", name="'jira search!'"),
        "name 'jira search!' must match ^[A-Za-z0-9_-]{1,64}$",
    ),
    "unknown key": (
        _manifest("http://bridge.internal/x", extra="retries: 3"),
        "unknown key(s): retries",
    ),
    "invalid parameter schema": (
        _manifest("http://bridge.internal/x").replace("minimum: 1", "minimum: one"),
        "invalid parameters schema: 'one' is not of type 'number'",
    ),
    "parameter not a schema": (
        _manifest("http://bridge.internal/x").replace(
            'query:\n    type: string\n    description: "JQL expression"', "query: text"
        ),
        "parameters.query must be a mapping (a JSON Schema)",
    ),
    "non-JSON default": (
        _manifest("http://bridge.internal/x").replace("default: 10", "default: 2024-01-01"),
        "parameters.limit.default: date values are not valid JSON",
    ),
    "tenants not a list": (
        _manifest("http://bridge.internal/x", extra="allowed_tenants: ops"),
        "allowed_tenants must be a list of non-empty glob strings",
    ),
    "session names as authorization": (
        _manifest("http://bridge.internal/x", extra='allowed_sessions: ["production"]'),
        "allowed_sessions is no longer accepted: session names are chosen by tenants",
    ),
    "flag not a boolean": (
        _manifest("http://bridge.internal/x", extra="read_only: sometimes"),
        "read_only must be true or false, got 'sometimes'",
    ),
    "YAML aliases": (
        "name: &n x\ndescription: *n\nendpoint: {method: GET, url: 'http://b.internal/'}\n",
        "YAML anchors/aliases are not supported",
    ),
}


@pytest.mark.parametrize(("text", "reason"), MALFORMED.values(), ids=list(MALFORMED))
def test_malformed_manifests_are_rejected_with_a_precise_reason(
    tmp_path: Path, text: str, reason: str
) -> None:
    rejected = _reject_one(tmp_path, text)
    assert reason in rejected.reason
    assert rejected.path == str(tmp_path / "plugin.yaml")


def test_a_rejection_names_the_plugin_when_the_manifest_declares_one(tmp_path: Path) -> None:
    rejected = _reject_one(tmp_path, _manifest("http://bridge.internal/x", extra="retries: 3"))
    assert rejected.name == "jira_search"
    assert _reject_one(tmp_path, "name: [unclosed\n").name is None


def test_a_duplicate_tool_name_loads_the_first_file_and_rejects_the_second(
    tmp_path: Path,
) -> None:
    for file in ("a.yaml", "b.yml"):
        (tmp_path / file).write_text(_manifest("http://bridge.internal/x"))
    tools, rejected = load_plugins(tmp_path, env=ENV)
    assert [t.name for t in tools] == ["jira_search"]
    assert rejected == [
        RejectedPlugin(
            str(tmp_path / "b.yml"),
            "jira_search",
            "duplicate tool name 'jira_search': already defined by a.yaml",
        )
    ]


def test_one_bad_manifest_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("name: [unclosed\n")
    (tmp_path / "b.yaml").write_text(_manifest("http://bridge.internal/x"))
    (tmp_path / "notes.txt").write_text("not a manifest")
    tools, rejected = load_plugins(tmp_path, env=ENV)
    assert [t.name for t in tools] == ["jira_search"]
    assert [Path(r.path).name for r in rejected] == ["a.yaml"]


def test_a_missing_directory_loads_nothing(tmp_path: Path) -> None:
    assert load_plugins(tmp_path / "absent", env=ENV) == ([], [])


def test_the_examples_directory_is_not_loaded(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    assert load_plugins(tmp_path, env={}) == ([], [])
    assert load_plugins(EXAMPLES.parent, env={}) == ([], [])


def test_the_examples_load_once_copied_up_one_level(tmp_path: Path) -> None:
    for example in sorted(EXAMPLES.glob("*.yaml")):
        shutil.copy(example, tmp_path)
    env = {"OBSERVE_BRIDGE_TOKEN": "t1", "DEPLOYS_BRIDGE_TOKEN": "t2"}
    tools, rejected = load_plugins(tmp_path, env=env)
    assert rejected == []
    assert [t.name for t in tools] == ["get_logs", "get_recent_deploys"]
    assert all(t.allowed_tenants == ("ops", "sre-*") for t in tools)
    assert tools[0].parameters["required"] == ["product", "time_range"]
    assert tools[1].parameters["required"] == ["product", "time_range"]


def test_the_token_never_appears_in_reprs_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tool = _load_one(tmp_path, _manifest("http://bridge.internal/x"))
    assert TOKEN not in repr(tool) and TOKEN not in repr(tool.fn) and TOKEN not in str(tool)
    assert TOKEN not in str(dataclasses.asdict(tool))
    literal = _manifest("http://bridge.internal/x", extra="retries: 3").replace(
        "${BRIDGE_TOKEN}", TOKEN
    )
    with caplog.at_level(logging.DEBUG, logger="cortex_workers.tools.plugins"):
        rejected = _reject_one(tmp_path, literal)
        _load_one(tmp_path, _manifest("http://bridge.internal/x"))
    assert TOKEN not in rejected.reason and caplog.records
    assert all(TOKEN not in record.getMessage() for record in caplog.records)
