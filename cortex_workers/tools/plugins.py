"""Operator plugin tools: YAML manifests bridged to internal HTTP services (docs/tools.md).

`load_plugins(directory)` reads the `*.yaml`/`*.yml` files directly in `directory` (never
its subdirectories, so `examples/` stays inert) and turns each valid manifest
(`manifests.PluginManifest`) into a `Tool` whose `fn` calls the manifest's endpoint through
`http_guard`. It is meant to run only at startup or on SIGHUP; there is deliberately no other
way to add a plugin. A bad manifest never raises: it comes back as a `RejectedPlugin` with a
precise reason (and a logged warning), and the rest load normally.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortex_workers.tools import http_guard
from cortex_workers.tools.idempotency import HEADER as IDEMPOTENCY_HEADER
from cortex_workers.tools.manifests import (
    HARD_CEILING_S,
    InvalidManifest,
    PluginManifest,
    parse_manifest,
    read_manifest,
)
from cortex_workers.tools.registry import Tool
from cortex_workers.tools.results import UpstreamError, current_call

from ..messages import JsonObject

logger = logging.getLogger(__name__)

_REASON_BODY_CHARS = 200


@dataclass(frozen=True)
class RejectedPlugin:
    """A manifest that was not loaded, and why (`name` when the manifest declared one)."""

    path: str
    name: str | None
    reason: str


class PluginBridge:
    """The `fn` of a plugin tool: sends the validated arguments to the endpoint.

    Every call carries its `Idempotency-Key` (docs/mcp.md, "Exactly once").
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
        call = current_call.get()
        if call is not None and call.idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = call.idempotency_key
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
            data = read_manifest(path)
            raw_name = data.get("name")
            name = raw_name if isinstance(raw_name, str) else None
            tool = plugin_tool(parse_manifest(data, env=env))
            if tool.name in defined_by:
                raise InvalidManifest(
                    f"duplicate tool name {tool.name!r}: already defined by {defined_by[tool.name]}"
                )
        except InvalidManifest as exc:
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


def plugin_tool(manifest: PluginManifest) -> Tool:
    """The tool a valid manifest declares; its `fn` is a `PluginBridge` to the endpoint."""
    token = manifest.auth.token.get_secret_value() if manifest.auth is not None else None
    bridge = PluginBridge(
        manifest.name,
        manifest.endpoint.method,
        manifest.endpoint.url,
        manifest.timeout,
        manifest.allow_private_host,
        token,
    )
    return Tool(
        name=manifest.name,
        description=manifest.description,
        parameters=manifest.parameters,
        fn=bridge,
        timeout_s=manifest.timeout,
        read_only=manifest.read_only,
        idempotent=manifest.idempotent,
        max_timeout_s=HARD_CEILING_S,
        allowed_tenants=manifest.allowed_tenants,
        source="plugin",
    )


def _query(arguments: JsonObject) -> dict[str, str | list[str]]:
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
