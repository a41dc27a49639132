"""`[mcp.servers.<name>]`: MCP servers whose tools the model may use (docs/mcp.md), part of
`settings.Settings`.

A server is reached over streamable HTTP (`url`) or started as a local process speaking
stdio (`command` and `args`). `${NAME}` in `headers`, `url`, `args` and `env` is taken from
the environment (in the config file as everywhere; here too for `CORTEX_MCP` in JSON).
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
Severity = Literal["ok", "info", "warning", "error"]
"""`vocabulary.ToolSeverity`'s values (settings sit below the vocabulary)."""


def _env(text: str) -> str:
    return _ENV_REF.sub(lambda m: os.environ.get(m.group(1), ""), text)


class McpToolSettings(BaseModel):
    """`[mcp.servers.<name>.tools.<tool>]`: how one of the server's tools is treated."""

    model_config = ConfigDict(extra="forbid")
    severity: Severity | None = None
    """How a UI colours its results (None: as any tool's)."""
    require_confirmation: bool = False
    """A call becomes a proposal an operator confirms (as `propose_action`'s), and runs after."""
    read_only: bool | None = None
    """Overrides the server's `readOnlyHint` (a tool with effects is recorded as an intent)."""
    idempotent: bool | None = None
    """Overrides the server's `idempotentHint`: the server recognises a repeated idempotency
    key in `_meta`, so a takeover may send a call again."""


class McpServerSettings(BaseModel):
    """One MCP server: where it is, and which of its tools the model may see."""

    model_config = ConfigDict(extra="forbid")
    url: str | None = None
    """Streamable HTTP endpoint, e.g. https://tools.internal/mcp."""
    command: str | None = None
    """A local server speaking stdio: one process per worker process, restarted if it dies."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment of the stdio process."""
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    """Sent with every HTTP request (e.g. Authorization = "Bearer ${TOOLS_TOKEN}")."""
    allowed_tools: list[str] | None = None
    """The server's tools the model may see (None: all)."""
    tool_prefix: str | None = None
    """Prefix of the tools' names here (None: `<name>_`; "" for none)."""
    timeout: float = Field(default=30.0, gt=0, le=300)
    """Seconds a call (or a discovery) may take."""
    task_timeout: float = Field(default=3600.0, gt=0)
    """Seconds a call the server answers with a task (the Tasks extension) may wait for that
    task; past it, or past the task's own time to live, the call ends with an error result."""
    allow_private: bool = False
    """Whether `url` may be a loopback, private or CGNAT address (the plugins' SSRF guard)."""
    tools: dict[str, McpToolSettings] = Field(default_factory=dict)
    refresh_s: float | None = Field(default=None, gt=0)
    """How often this server's tool list is read again (None: `[mcp] refresh_s`); a server
    that sends `notifications/tools/list_changed` is read again at once besides."""

    @field_validator("url", "command")
    @classmethod
    def _substituted(cls, value: str | None) -> str | None:
        return None if value is None else (_env(value) or None)

    @field_validator("args")
    @classmethod
    def _args(cls, value: list[str]) -> list[str]:
        return [_env(v) for v in value]

    @field_validator("env")
    @classmethod
    def _env_values(cls, value: dict[str, str]) -> dict[str, str]:
        return {k: _env(v) for k, v in value.items()}

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        return {k: SecretStr(_env(v.get_secret_value())) for k, v in value.items()}

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.url is None) == (self.command is None):
            raise ValueError("an MCP server needs either `url` or `command` (not both)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be http:// or https://, got {self.url!r}")
        return self


class McpSettings(BaseModel):
    """`[mcp]`: the servers, and how often their tool lists are read again."""

    model_config = ConfigDict(extra="forbid")
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    refresh_s: float = Field(default=300.0, gt=0)
    """How often each process reads every server's tool list again (an unavailable server's
    tools come back at the next refresh after it is up)."""

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in value:
            if not _SERVER_NAME.fullmatch(name):
                raise ValueError(f"MCP server name {name!r} must match {_SERVER_NAME.pattern}")
        return value
