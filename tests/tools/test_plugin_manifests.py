"""A manifest is validated as a whole: every problem is named with its field, nested keys
included, and a resolved token never appears in a reason."""

from __future__ import annotations

from typing import Any

import pytest

from cortex_workers.tools.manifests import InvalidManifest, PluginManifest, parse_manifest

ENDPOINT = {"method": "get", "url": "http://bridge.internal/x"}


def _reason(data: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(InvalidManifest) as caught:
        parse_manifest(data, env=env or {})
    return str(caught.value)


def test_a_valid_manifest_is_a_typed_value_with_its_defaults() -> None:
    manifest = parse_manifest(
        {"name": "t", "description": " d ", "endpoint": ENDPOINT, "timeout": "1m30s"}, env={}
    )
    assert isinstance(manifest, PluginManifest)
    assert (manifest.name, manifest.description, manifest.endpoint.method) == ("t", "d", "GET")
    assert manifest.timeout == 90.0 and manifest.read_only and not manifest.allow_private_host
    assert manifest.auth is None and manifest.allowed_tenants is None
    assert manifest.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_every_problem_of_a_manifest_is_reported_at_once() -> None:
    reason = _reason(
        {
            "name": "a b",
            "description": "",
            "endpoint": {"method": "PUT", "url": "ftp://x"},
            "timeout": "10m",
        }
    )
    assert reason.split("; ") == [
        "name 'a b' must match ^[A-Za-z0-9_-]{1,64}$",
        "description must be a non-empty string",
        "endpoint.method must be GET or POST, got 'PUT'",
        "endpoint.url: URL scheme must be http or https, got 'ftp'",
        "timeout '10m' (600s) exceeds the hard ceiling of 5 minutes (300s)",
    ]


def test_missing_keys_are_named_with_their_table() -> None:
    assert _reason(
        {"name": "t", "description": "d", "endpoint": {"url": "http://b.internal/"}}
    ) == ("missing required key(s): endpoint.method")
    assert _reason({"name": "t"}) == "missing required key(s): description, endpoint"


def test_unknown_keys_are_listed_with_the_allowed_ones() -> None:
    assert _reason({"name": "t", "description": "d", "endpoint": dict(ENDPOINT, retries=3)}) == (
        "endpoint: unknown key(s): retries (allowed: method, url)"
    )


def test_a_quoted_number_of_seconds_is_a_timeout() -> None:
    data = {"name": "t", "description": "d", "endpoint": ENDPOINT, "timeout": "45"}
    assert parse_manifest(data, env={}).timeout == 45.0


def test_the_token_is_resolved_but_never_shown() -> None:
    data = {
        "name": "t",
        "description": "d",
        "endpoint": ENDPOINT,
        "auth": {"type": "bearer", "token": "${TOKEN}"},
    }
    manifest = parse_manifest(data, env={"TOKEN": "s3cr3t"})
    assert manifest.auth is not None and manifest.auth.token.get_secret_value() == "s3cr3t"
    assert "s3cr3t" not in repr(manifest)
    reason = _reason(dict(data, read_only="no"), env={"TOKEN": "s3cr3t"})
    assert reason == "read_only must be true or false, got 'no'"
    assert _reason(data) == "auth.token: environment variable(s) not set: TOKEN"
