"""Migrations build the whole schema from an empty database, match the models, and reverse."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, pool
from sqlalchemy.engine import make_url
from support import Stack

import cortex_workers
from cortex_workers.store.db import normalize_url
from cortex_workers.store.models import Base

pytestmark = pytest.mark.servers

MIGRATIONS = Path(cortex_workers.__file__).parent / "store" / "migrations"
TABLES = {
    "tenants",
    "api_keys",
    "sessions",
    "turns",
    "steps",
    "messages",
    "tool_calls",
    "decisions",
    "proposals",
    "webhooks",
    "webhook_events",
    "webhook_deliveries",
    "webhook_attempts",
    "jobs",
    "batches",
    "budget_counters",
    "budget_reservations",
    "agent_tasks",
    "workers",
    "whiteboards",
    "whiteboard_blockers",
    "whiteboard_entries",
    "schedules",
    "checkpoints",
    "timeline_events",
    "openai_responses",
    "openai_conversations",
    "tool_intents",
    "parked_calls",
}


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
def empty_database(stack: Stack) -> Iterator[str]:
    """A new, empty database on the test server; dropped afterwards."""
    server = make_url(normalize_url(stack.database_url))
    name = f"cortex_migrations_{secrets.token_hex(4)}"
    with psycopg.connect(_libpq(normalize_url(stack.database_url)), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq(normalize_url(stack.database_url)), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _tables(url: str) -> set[str]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _differences(url: str) -> list[object]:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def _current(url: str) -> str | None:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def test_the_models_define_the_tables_the_design_names() -> None:
    assert set(Base.metadata.tables) == TABLES


def test_migrations_run_up_from_empty_match_the_models_and_run_down_and_up_again(
    empty_database: str,
) -> None:
    url = empty_database
    cfg = _config(url)
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    assert _tables(url) == set()
    # the comparison is live: against the empty database it wants every table
    added = {d[1].name for d in _differences(url) if isinstance(d, tuple) and d[0] == "add_table"}
    assert added == TABLES

    command.upgrade(cfg, "head")
    assert _tables(url) == TABLES | {"alembic_version"}
    assert _current(url) == head
    differences = _differences(url)
    assert differences == [], "models and migrations differ:\n" + "\n".join(map(str, differences))

    command.downgrade(cfg, "base")
    assert _tables(url) <= {"alembic_version"}
    assert _current(url) is None

    command.upgrade(cfg, "head")
    assert _tables(url) == TABLES | {"alembic_version"}
    assert _current(url) == head
    assert _differences(url) == []


def test_upgrading_an_up_to_date_database_changes_nothing(empty_database: str) -> None:
    cfg = _config(empty_database)
    command.upgrade(cfg, "head")
    first = _current(empty_database)
    command.upgrade(cfg, "head")
    assert _current(empty_database) == first
    assert _tables(empty_database) == TABLES | {"alembic_version"}


def test_a_percent_in_the_url_survives_the_config() -> None:
    url = "postgresql+psycopg://u:p%40ss@h/db"
    assert _config(url).get_main_option("sqlalchemy.url") == url
