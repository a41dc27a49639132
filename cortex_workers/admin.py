"""Administrative operations shared by the CLI and the dev supervisor."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .settings import get_settings, reset_settings

if TYPE_CHECKING:
    from .devstack import EmbeddedStack


def use_embedded_if_unset(data_dir: Path) -> EmbeddedStack | None:
    """Start (or attach to) the embedded servers when no URLs are configured."""
    settings = get_settings()
    if settings.database_url and settings.redis_url:
        return None
    from .devstack import EmbeddedStack

    stack = EmbeddedStack(data_dir).start()
    if not settings.database_url:
        os.environ["DATABASE_URL"] = stack.database_url
    if not settings.redis_url:
        os.environ["REDIS_URL"] = stack.redis_url
    reset_settings()
    return stack


def use_running_if_unset(data_dir: Path) -> EmbeddedStack | None:
    """Like `use_embedded_if_unset`, but only attaches to embedded servers already running
    (those of `cortex-workers dev --data-dir`): a monitor must not start servers of its own.
    None when the URLs are configured or nothing runs there (the URLs stay unset)."""
    settings = get_settings()
    if settings.database_url and settings.redis_url:
        return None
    from .devstack import EmbeddedStack

    stack = EmbeddedStack(data_dir)
    if not stack.attach():
        return None
    if not settings.database_url:
        os.environ["DATABASE_URL"] = stack.database_url
    if not settings.redis_url:
        os.environ["REDIS_URL"] = stack.redis_url
    reset_settings()
    return stack


def migrate() -> None:
    """Bring the schema to the newest revision."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "store" / "migrations"))
    # configparser interpolates "%": escape it (URL-encoded passwords and socket paths).
    cfg.set_main_option("sqlalchemy.url", get_settings().database_url.replace("%", "%%"))
    command.upgrade(cfg, "head")


def create_key(tenant: str) -> str:
    from .runtime import get_runtime
    from .store import tenants
    from .store.db import transaction

    with transaction(get_runtime().db) as db:
        return tenants.create_api_key(db, tenants.ensure_tenant(db, tenant).id)


def key_is_valid(key: str) -> bool:
    from .runtime import get_runtime
    from .store import tenants
    from .store.db import transaction

    with transaction(get_runtime().db) as db:
        return tenants.tenant_for_key(db, key) is not None


def check_config() -> str | None:
    """Why the configuration cannot work (unknown providers, backup cycles), or None."""
    from pydantic import ValidationError

    from .providers.registry import ConfigError, ProviderRegistry

    try:
        ProviderRegistry(get_settings()).validate()
    except (ConfigError, ValidationError) as exc:
        return str(exc)
    return None
