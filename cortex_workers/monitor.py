"""Flower, the Celery monitor: its credentials and the environment it runs with.

Flower reads every `FLOWER_<OPTION>` variable as an option, so the basic-auth credentials reach
it as `FLOWER_BASIC_AUTH=user:password` (never on its command line, where `ps` would show
them). Its `/metrics` and `/healthcheck` answer without them: `cortex-workers flower` binds the
loopback interface unless told otherwise. See docs/operations.md, "Monitoring with Flower".
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BASIC_AUTH_ENV = "FLOWER_BASIC_AUTH"
USER_ENV, PASSWORD_ENV = "FLOWER_USER", "FLOWER_PASSWORD"
"""Read by Compose (and accepted here); Flower itself knows no such options and refuses them."""
DEFAULT_USER = "admin"
AUTH_FILE = "flower-auth"
"""In the data directory of `cortex-workers dev`: the credentials as `user:password`."""
DEFAULT_PORT = 5555


@dataclass(frozen=True, slots=True)
class FlowerAuth:
    """Flower's basic-auth credentials."""

    user: str
    password: str
    generated: bool = False
    """Made up for this run (nothing configured them): print them."""

    def __str__(self) -> str:
        return f"{self.user}:{self.password}"


def parse_auth(value: str) -> FlowerAuth:
    """`user:password`; raises ValueError saying what is wrong."""
    user, sep, password = value.strip().partition(":")
    if not sep or not user or not password:
        raise ValueError(f"{BASIC_AUTH_ENV} must be user:password (both non-empty)")
    return FlowerAuth(user, password)


def flower_auth(env: Mapping[str, str] = os.environ, *, saved: Path | None = None) -> FlowerAuth:
    """The credentials in force: `FLOWER_BASIC_AUTH`, else `FLOWER_USER` (default admin) with
    `FLOWER_PASSWORD`, else those `saved` in a file by an earlier run, else new ones."""
    if env.get(BASIC_AUTH_ENV, "").strip():
        return parse_auth(env[BASIC_AUTH_ENV])
    password = env.get(PASSWORD_ENV, "").strip()
    if password:
        return FlowerAuth(env.get(USER_ENV, "").strip() or DEFAULT_USER, password)
    if saved is not None and saved.exists():
        try:
            return parse_auth(saved.read_text())
        except ValueError:
            pass  # damaged: make new ones
    return FlowerAuth(DEFAULT_USER, secrets.token_urlsafe(18), generated=True)


def save_auth(auth: FlowerAuth, path: Path) -> None:
    """Writes `user:password` to `path`, readable by its owner only."""
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(f"{auth}\n")


def flower_env(auth: FlowerAuth, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`env` as Flower should see it: the credentials in `FLOWER_BASIC_AUTH`; without the
    Compose-only `FLOWER_USER` and `FLOWER_PASSWORD`, which Flower would reject, and without
    `PROMETHEUS_MULTIPROC_DIR`: Flower's own metrics are its `/metrics`, not the stack's."""
    dropped = (USER_ENV, PASSWORD_ENV, "PROMETHEUS_MULTIPROC_DIR")
    out = {k: v for k, v in env.items() if k not in dropped}
    out[BASIC_AUTH_ENV] = str(auth)
    return out
