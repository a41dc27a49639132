"""Alembic environment: the URL comes from settings (DATABASE_URL) unless given in the config."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from cortex_workers.settings import get_settings
from cortex_workers.store.db import normalize_url
from cortex_workers.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or get_settings().database_url
    engine = create_engine(normalize_url(url), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            # Two processes migrating at once (dev restarts, compose) take turns.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7242001)")
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
