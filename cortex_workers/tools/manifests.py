"""Plugin manifests: a YAML file read and validated into a `PluginManifest`.

Keys: `name`, `description`, `endpoint: {method: GET|POST, url}`, and optionally `parameters`
(property name -> JSON Schema, or a full object schema), `auth: {type: bearer, token:
"${ENV_VAR}"}`, `allowed_tenants` (globs over tenant names), `timeout` (a duration such as
"10s", "2m", "500ms", or seconds; default 10 s, at most 300 s), `allow_private_host` (default
false), `read_only` (default true) and `idempotent` (default false). See docs/tools.md.

A manifest that cannot be used raises `InvalidManifest`; its message names the field and says
what is wrong, and never quotes a resolved token.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails

from ..messages import JsonObject
from ..settings import env_references, parse_duration, substitute_env
from . import http_guard

HARD_CEILING_S = 300.0
"""No plugin call may run longer than 5 minutes (docs/tools.md)."""
DEFAULT_TIMEOUT_S = 10.0
MAX_MANIFEST_BYTES = 256 * 1024
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class InvalidManifest(Exception):
    """The manifest cannot be loaded; the message is the reason."""


@dataclass(frozen=True, slots=True)
class _Context:
    """What validation reads besides the manifest: the environment `${NAME}` refers to."""

    env: Mapping[str, str]


def read_manifest(path: Path) -> dict[str, Any]:
    """The YAML mapping in `path` (no anchors or aliases, at most `MAX_MANIFEST_BYTES`)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidManifest(f"cannot read file: {exc.strerror or exc}") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise InvalidManifest(f"file is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidManifest(f"file is not UTF-8: {exc}") from None
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text)):
            raise InvalidManifest("YAML anchors/aliases are not supported in manifests")
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidManifest(f"invalid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise InvalidManifest(f"manifest must be a YAML mapping, got {kind}")
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def parse_manifest(data: Mapping[str, Any], *, env: Mapping[str, str]) -> PluginManifest:
    """`data` validated; `${NAME}` in `auth.token` is taken from `env`."""
    try:
        return PluginManifest.model_validate(data, context=_Context(env))
    except ValidationError as exc:
        raise InvalidManifest(_reasons(exc.errors())) from None


def _reasons(errors: list[ErrorDetails]) -> str:
    """Every problem found, missing keys first; never the input values (they may be secret)."""
    missing = [_dotted(error["loc"]) for error in errors if error["type"] == "missing"]
    reasons = [f"missing required key(s): {', '.join(missing)}"] if missing else []
    reasons += [_reason(error) for error in errors if error["type"] != "missing"]
    return "; ".join(reasons)


def _reason(error: ErrorDetails) -> str:
    if error["type"] == "value_error" and "ctx" in error:
        return str(error["ctx"]["error"])  # our own message, which names the field
    where = _dotted(error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def _dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


class _Table(BaseModel):
    """A mapping of the manifest: an unknown key is refused by name, with the allowed ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    _where: ClassVar[str] = ""
    """The table's key in the manifest, prefixed to the unknown-key message."""
    _not_a_mapping: ClassVar[str] = "must be a mapping"

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(f"{cls._where} {cls._not_a_mapping}".strip())
        unknown = sorted(str(key) for key in value if key not in cls.model_fields)
        if unknown:
            allowed = ", ".join(cls.model_fields)
            prefix = f"{cls._where}: " if cls._where else ""
            raise ValueError(f"{prefix}unknown key(s): {', '.join(unknown)} (allowed: {allowed})")
        return value


def _name(value: Any) -> Any:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise ValueError(f"name {value!r} must match {NAME_PATTERN.pattern}")
    return value


def _description(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("description must be a non-empty string")
    return value.strip()


def _method(value: Any) -> Any:
    if not isinstance(value, str) or value.upper() not in ("GET", "POST"):
        raise ValueError(f"endpoint.method must be GET or POST, got {value!r}")
    return value.upper()


def _url(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("endpoint.url is required and must be a string")
    try:
        http_guard.parse_url(value)
    except ValueError as exc:
        raise ValueError(f"endpoint.url: {exc}") from None
    return value


class Endpoint(_Table):
    """Where the plugin's calls go: GET sends the arguments as a query, POST as a JSON body."""

    _where = "endpoint"
    _not_a_mapping = "must be a mapping with method and url"

    method: Annotated[Literal["GET", "POST"], BeforeValidator(_method)]
    url: Annotated[str, BeforeValidator(_url)]


def _auth_type(value: Any) -> Any:
    if value != "bearer":
        raise ValueError(f"auth.type must be 'bearer', got {value!r}")
    return value


def _token(value: Any, info: ValidationInfo) -> SecretStr:
    """The token template with `${NAME}` resolved from the validation context's environment."""
    if not isinstance(value, str):
        raise ValueError('auth.token must be a string such as "${MY_BRIDGE_TOKEN}"')
    env = info.context.env if isinstance(info.context, _Context) else os.environ
    unset = [name for name in env_references(value) if name not in env]
    if unset:
        raise ValueError(f"auth.token: environment variable(s) not set: {', '.join(unset)}")
    token = substitute_env(value, env)
    if not token.strip():
        raise ValueError("auth.token is empty")
    if not token.isprintable():
        raise ValueError("auth.token contains control characters")
    return SecretStr(token)


class BearerAuth(_Table):
    """`Authorization: Bearer <token>` on every call."""

    type: Annotated[Literal["bearer"], BeforeValidator(_auth_type)]
    token: Annotated[SecretStr, BeforeValidator(_token)]
    """Resolved from `${NAME}` references; kept out of reprs and logs."""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: Any) -> Any:  # replaces the generic check: both keys are needed
        if not isinstance(value, dict) or set(value) != {"type", "token"}:
            raise ValueError("auth must be a mapping with exactly the keys type and token")
        return value


def _parameters(value: Any) -> JsonObject:
    """The arguments' JSON Schema: a full object schema, or properties made into one (a
    property is required unless it has a default)."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(f"parameters must be a mapping, got {type(value).__name__}")
    _check_json(value, "parameters")
    if value.get("type") == "object":
        schema: JsonObject = json.loads(json.dumps(value))  # a private deep copy
    else:
        for prop, sub in value.items():
            if not isinstance(sub, dict):
                raise ValueError(f"parameters.{prop} must be a mapping (a JSON Schema)")
        schema = {
            "type": "object",
            "properties": json.loads(json.dumps(value)),
            "required": [prop for prop, sub in value.items() if "default" not in sub],
            "additionalProperties": False,
        }
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"invalid parameters schema: {exc.message} (at {exc.json_path})") from None
    return schema


def _check_json(value: Any, where: str) -> None:
    """Refuse YAML values JSON cannot carry (dates, binary, non-string keys)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} must be a string")
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value} is not a valid JSON number")
    elif not (value is None or isinstance(value, str | int | float | bool)):
        raise ValueError(f"{where}: {type(value).__name__} values are not valid JSON")


def _tenants(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise ValueError("allowed_tenants must be a list of non-empty glob strings")
    if not value:
        raise ValueError("allowed_tenants is empty (omit it to allow every tenant)")
    return tuple(value)


def _timeout(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        try:
            seconds = parse_duration(value)
        except ValueError:
            raise ValueError(
                f"timeout {value!r} is not a duration such as '10s', '2m' or '500ms'"
            ) from None
    else:
        raise ValueError(f"timeout must be a duration such as '10s', got {value!r}")
    if not seconds > 0:
        raise ValueError(f"timeout must be positive, got {value!r}")
    if seconds > HARD_CEILING_S:
        raise ValueError(
            f"timeout {value!r} ({seconds:g}s) exceeds the hard ceiling of 5 minutes (300s)"
        )
    return seconds


def _flag(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"{info.field_name} must be true or false, got {value!r}")
    return value


Flag = Annotated[bool, BeforeValidator(_flag)]


class PluginManifest(_Table):
    """One plugin tool, as its manifest declares it."""

    @model_validator(mode="before")
    @classmethod
    def _no_session_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "allowed_sessions" in data:
            raise ValueError(
                "allowed_sessions is no longer accepted: session names are chosen by tenants; "
                "restrict the tool with allowed_tenants (globs over tenant names)"
            )
        return data

    name: Annotated[str, BeforeValidator(_name)]
    description: Annotated[str, BeforeValidator(_description)]
    endpoint: Endpoint
    parameters: Annotated[JsonObject, BeforeValidator(_parameters)] = Field(
        default=None, validate_default=True
    )
    """The arguments' JSON Schema (always an object schema)."""
    auth: BearerAuth | None = None
    allowed_tenants: Annotated[tuple[str, ...] | None, BeforeValidator(_tenants)] = None
    """Globs of the tenant names (or ids) that may call the tool; None: every tenant."""
    timeout: Annotated[float, BeforeValidator(_timeout)] = DEFAULT_TIMEOUT_S
    """Seconds a call may take (at most `HARD_CEILING_S`)."""
    allow_private_host: Flag = False
    """Whether the endpoint may be a loopback, private or CGNAT address (docs/tools.md)."""
    read_only: Flag = True
    idempotent: Flag = False
    """The endpoint recognises a repeated `Idempotency-Key`: a takeover may re-send a call
    that may already have happened (otherwise it ends "outcome unknown")."""

    @model_validator(mode="after")
    def _host_allowed(self) -> PluginManifest:
        host = http_guard.parse_url(self.endpoint.url).raw_host.decode("ascii")
        try:
            http_guard.check_literal_host(host, allow_private=self.allow_private_host)
        except http_guard.BlockedAddress as exc:
            raise ValueError(f"endpoint.url: {exc}") from None
        return self
