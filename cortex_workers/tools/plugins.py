"""Operator plugin tools: YAML manifests bridged to internal HTTP services (RFC 005 §6.5).

`load_plugins(directory)` reads the `*.yaml`/`*.yml` files directly in `directory` (never
its subdirectories, so `examples/` stays inert) and turns each valid manifest into a
`Tool` whose `fn` calls the manifest's endpoint through `http_guard`. It is meant to run
only at startup or on SIGHUP; there is deliberately no other way to add a plugin. A bad
manifest never raises: it comes back as a `RejectedPlugin` with a precise reason (and a
logged warning), and the rest load normally.

Manifest keys: `name`, `description`, `parameters` (property name -> JSON Schema, or a
full object schema), `endpoint: {method: GET|POST, url}`, and optionally
`auth: {type: bearer, token: "${ENV_VAR}"}`, `allowed_sessions` (globs), `timeout`
("10s", "2m", "500ms" or seconds; default 10 s, at most 300 s), `allow_private_host`
(default false) and `read_only` (default true).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from cortex_workers.tools import http_guard
from cortex_workers.tools.registry import Tool
from cortex_workers.tools.results import UpstreamError

logger = logging.getLogger(__name__)

HARD_CEILING_S = 300.0
"""No plugin call may run longer than 5 minutes (RFC 005 §6.1)."""
DEFAULT_TIMEOUT_S = 10.0
MAX_MANIFEST_BYTES = 256 * 1024

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DURATION_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_REQUIRED = ("name", "description", "endpoint")
_OPTIONAL = ("parameters", "auth", "allowed_sessions", "timeout", "allow_private_host", "read_only")
_REASON_BODY_CHARS = 200


@dataclass(frozen=True)
class RejectedPlugin:
    """A manifest that was not loaded, and why (`name` when the manifest declared one)."""

    path: str
    name: str | None
    reason: str


class _Invalid(Exception):
    """Internal: the manifest is invalid; the message is the rejection reason."""


class PluginBridge:
    """The `fn` of a plugin tool: sends the validated arguments to the endpoint.

    GET sends them as query parameters (objects and arrays of objects JSON-encoded),
    POST as a JSON body. Returns the parsed JSON answer, or `{"text": body}` when it is
    not JSON. A non-2xx answer raises `UpstreamError(status, reason)`; a 3xx is not
    followed. Network problems raise what `http_guard.guarded_request` raises
    (`BlockedAddress`, `TimeoutError`, `ConnectionError`, `ResponseTooLarge`).
    """

    __slots__ = ("name", "method", "url", "timeout_s", "allow_private", "_token")

    def __init__(
        self,
        name: str,
        method: str,
        url: str,
        timeout_s: float,
        allow_private: bool,
        token: str | None = None,
    ) -> None:
        self.name, self.method, self.url = name, method, url
        self.timeout_s, self.allow_private = timeout_s, allow_private
        self._token = token or None  # not a field: never in reprs, asdict() or equality

    def __repr__(self) -> str:
        return f"PluginBridge(name={self.name!r}, method={self.method!r}, url={self.url!r})"

    def __call__(self, /, **arguments: Any) -> Any:  # an argument may be called 'self'
        headers = {"Accept": "application/json", "User-Agent": "cortex-workers-plugin"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        get = self.method == "GET"
        try:
            response = http_guard.guarded_request(
                self.method,
                self.url,
                params=_query(arguments) if get else None,
                json=None if get else arguments,
                headers=headers,
                timeout_s=self.timeout_s,
                allow_private=self.allow_private,
                resolver=socket.getaddrinfo,  # looked up per call, so tests can stub it
            )
        except Exception as exc:
            if self._token is not None and self._token in str(exc):
                raise ConnectionError(self._scrub(f"{type(exc).__name__}: {exc}")) from None
            raise
        if not 200 <= response.status < 300:
            raise UpstreamError(response.status, self._scrub(_reason(response)))
        return _decode(response)

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token is not None else text


def load_plugins(
    directory: Path, *, env: Mapping[str, str] = os.environ
) -> tuple[list[Tool], list[RejectedPlugin]]:
    """Tools from the manifests directly in `directory`, and the manifests rejected.

    Files are read in name order; of two manifests declaring the same tool name the
    first loads and the second is rejected. `${NAME}` in `auth.token` is taken from
    `env`. A missing directory yields ([], []). Never raises.
    """
    try:
        files = sorted(
            p
            for p in directory.iterdir()
            if p.suffix in (".yaml", ".yml") and not p.name.startswith(".") and p.is_file()
        )
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        reason = f"cannot list plugin directory: {exc.strerror or exc}"
        logger.warning("plugin directory %s unreadable: %s", directory, reason)
        return [], [RejectedPlugin(str(directory), None, reason)]
    tools: list[Tool] = []
    rejected: list[RejectedPlugin] = []
    defined_by: dict[str, str] = {}
    for path in files:
        name: str | None = None
        try:
            manifest = _read(path)
            raw_name = manifest.get("name")
            name = raw_name if isinstance(raw_name, str) else None
            tool = _build(manifest, env)
            if tool.name in defined_by:
                raise _Invalid(
                    f"duplicate tool name {tool.name!r}: already defined by {defined_by[tool.name]}"
                )
        except _Invalid as exc:
            reason = str(exc)
        except Exception as exc:  # a bug here must not stop the other plugins loading
            reason = f"unexpected error: {type(exc).__name__}: {exc}"
        else:
            defined_by[tool.name] = path.name
            tools.append(tool)
            logger.info("plugin tool %s loaded from %s", tool.name, path)
            continue
        logger.warning("plugin %s rejected: %s", path, reason)
        rejected.append(RejectedPlugin(str(path), name, reason))
    return tools, rejected


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _Invalid(f"cannot read file: {exc.strerror or exc}") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise _Invalid(f"file is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Invalid(f"file is not UTF-8: {exc}") from None
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text)):
            raise _Invalid("YAML anchors/aliases are not supported in manifests")
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _Invalid(f"invalid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise _Invalid(f"manifest must be a YAML mapping, got {kind}")
    return data


def _yaml_problem(exc: Any) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _build(manifest: dict[str, Any], env: Mapping[str, str]) -> Tool:
    unknown = sorted(str(key) for key in manifest if key not in _REQUIRED + _OPTIONAL)
    if unknown:
        allowed = ", ".join(_REQUIRED + _OPTIONAL)
        raise _Invalid(f"unknown key(s): {', '.join(unknown)} (allowed: {allowed})")
    missing = [key for key in _REQUIRED if key not in manifest]
    if missing:
        raise _Invalid(f"missing required key(s): {', '.join(missing)}")
    name = manifest["name"]
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise _Invalid(f"name {name!r} must match {_NAME_RE.pattern}")
    description = manifest["description"]
    if not isinstance(description, str) or not description.strip():
        raise _Invalid("description must be a non-empty string")
    parameters = _parameters(manifest.get("parameters"))
    method, url = _endpoint(manifest["endpoint"])
    token = _token(manifest.get("auth"), env)
    sessions = _sessions(manifest.get("allowed_sessions"))
    timeout_s = _timeout(manifest.get("timeout", DEFAULT_TIMEOUT_S))
    allow_private = _flag(manifest, "allow_private_host", False)
    read_only = _flag(manifest, "read_only", True)
    host = http_guard.parse_url(url).raw_host.decode("ascii")
    try:
        http_guard.check_literal_host(host, allow_private=allow_private)
    except http_guard.BlockedAddress as exc:
        raise _Invalid(f"endpoint.url: {exc}") from None
    bridge = PluginBridge(name, method, url, timeout_s, allow_private, token)
    return Tool(
        name=name,
        description=description.strip(),
        parameters=parameters,
        fn=bridge,
        timeout_s=timeout_s,
        read_only=read_only,
        max_timeout_s=HARD_CEILING_S,
        allowed_sessions=sessions,
        source="plugin",
    )


def _parameters(value: Any) -> dict[str, Any]:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise _Invalid(f"parameters must be a mapping, got {type(value).__name__}")
    _check_json(value, "parameters")
    if value.get("type") == "object":
        schema: dict[str, Any] = json.loads(json.dumps(value))  # a private deep copy
    else:
        for prop, sub in value.items():
            if not isinstance(sub, dict):
                raise _Invalid(f"parameters.{prop} must be a mapping (a JSON Schema)")
        schema = {
            "type": "object",
            "properties": json.loads(json.dumps(value)),
            "required": [prop for prop, sub in value.items() if "default" not in sub],
            "additionalProperties": False,
        }
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise _Invalid(f"invalid parameters schema: {exc.message} (at {exc.json_path})") from None
    return schema


def _check_json(value: Any, where: str) -> None:
    """Refuse YAML values JSON cannot carry (dates, binary, non-string keys)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Invalid(f"{where}: key {key!r} must be a string")
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise _Invalid(f"{where}: {value} is not a valid JSON number")
    elif not (value is None or isinstance(value, str | int | float | bool)):
        raise _Invalid(f"{where}: {type(value).__name__} values are not valid JSON")


def _endpoint(value: Any) -> tuple[str, str]:
    if not isinstance(value, dict):
        raise _Invalid("endpoint must be a mapping with method and url")
    extra = sorted(str(key) for key in value if key not in ("method", "url"))
    if extra:
        raise _Invalid(f"endpoint: unknown key(s): {', '.join(extra)} (allowed: method, url)")
    method = value.get("method")
    if not isinstance(method, str) or method.upper() not in ("GET", "POST"):
        raise _Invalid(f"endpoint.method must be GET or POST, got {method!r}")
    url = value.get("url")
    if not isinstance(url, str):
        raise _Invalid("endpoint.url is required and must be a string")
    try:
        http_guard.parse_url(url)
    except ValueError as exc:
        raise _Invalid(f"endpoint.url: {exc}") from None
    return method.upper(), url


def _token(value: Any, env: Mapping[str, str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"type", "token"}:
        raise _Invalid("auth must be a mapping with exactly the keys type and token")
    if value["type"] != "bearer":
        raise _Invalid(f"auth.type must be 'bearer', got {value['type']!r}")
    template = value["token"]
    if not isinstance(template, str):
        raise _Invalid('auth.token must be a string such as "${MY_BRIDGE_TOKEN}"')
    unset = [var for var in _ENV_RE.findall(template) if var not in env]
    if unset:
        raise _Invalid(f"auth.token: environment variable(s) not set: {', '.join(unset)}")
    token = _ENV_RE.sub(lambda match: env[match.group(1)], template)
    if not token.strip():
        raise _Invalid("auth.token is empty")
    if not token.isprintable():
        raise _Invalid("auth.token contains control characters")
    return token


def _sessions(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise _Invalid("allowed_sessions must be a list of non-empty glob strings")
    if not value:
        raise _Invalid("allowed_sessions is empty (omit it to allow every session)")
    return tuple(value)


def _timeout(value: Any) -> float:
    if isinstance(value, bool):
        raise _Invalid(f"timeout must be a duration such as '10s', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (text := value.strip().replace(" ", "")):
        parts = _DURATION_RE.findall(text)
        if "".join(number + unit for number, unit in parts) != text:
            raise _Invalid(f"timeout {value!r} is not a duration such as '10s', '2m' or '500ms'")
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    else:
        raise _Invalid(f"timeout must be a duration such as '10s', got {value!r}")
    if not seconds > 0:
        raise _Invalid(f"timeout must be positive, got {value!r}")
    if seconds > HARD_CEILING_S:
        raise _Invalid(
            f"timeout {value!r} ({seconds:g}s) exceeds the hard ceiling of 5 minutes (300s)"
        )
    return seconds


def _flag(manifest: dict[str, Any], key: str, default: bool) -> bool:
    value = manifest.get(key, default)
    if not isinstance(value, bool):
        raise _Invalid(f"{key} must be true or false, got {value!r}")
    return value


def _query(arguments: dict[str, Any]) -> dict[str, str | list[str]]:
    """Arguments as query parameters: scalars as text, lists repeated, objects as JSON."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
        return json.dumps(value, separators=(",", ":"))

    query: dict[str, str | list[str]] = {}
    for key, value in arguments.items():
        if value is None:
            continue
        query[key] = [text(v) for v in value] if isinstance(value, list) else text(value)
    return query


def _reason(response: http_guard.GuardedResponse) -> str:
    reason = response.reason or "error"
    if 300 <= response.status < 400:
        location = response.headers.get("location")
        target = f" to {location}" if location else ""
        return f"{reason} (redirect{target} not followed)"
    body = " ".join(response.body.decode("utf-8", "replace").split())
    if len(body) > _REASON_BODY_CHARS:
        body = body[:_REASON_BODY_CHARS] + "..."
    return f"{reason}: {body}" if body else reason


def _decode(response: http_guard.GuardedResponse) -> Any:
    content_type = response.headers.get("content-type", "").lower()
    if "json" in content_type or response.body.lstrip()[:1] in (b"{", b"["):
        try:
            return json.loads(response.body)
        except ValueError:
            pass
    return {"text": response.body.decode("utf-8", "replace")}
