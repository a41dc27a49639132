"""One engine per process, built on first use (after a fork, `runtime` builds a new one)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from sqlalchemy import Connection, Dialect, Engine, create_engine, event
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from ..settings import DB_PING_AFTER_IDLE_S

Executor = Session | Connection
"""What a store function that only runs statements (no ORM objects) takes: a session, or the
Core connection of `autocommit_connection`."""


def normalize_url(url: str) -> str:
    """Name the psycopg 3 driver in a plain `postgresql://` URL."""
    if not url:
        raise RuntimeError(
            "DATABASE_URL is not set: run `cortex-workers dev` (embedded servers) or set it"
        )
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def is_disconnect(dialect: Dialect, exc: psycopg.Error, connection: Any, cursor: Any) -> bool:
    """Whether `exc` means the connection is gone (psycopg's `Error` is the driver module's
    `Error` that SQLAlchemy's typing names by protocol)."""
    return dialect.is_disconnect(cast(DBAPIModule.Error, exc), connection, cursor)


STATEMENT_CACHE_LENGTH = 16384
STATEMENT_CACHE_PARAMS = 64
"""psycopg caches the conversion of a statement's text (its placeholders to `$n`) only up to
4096 characters and 50 parameters; over that, every execution parses the text again (about
30 µs for an 8 KB statement). A step's claim and closing statement are longer: the engine
raises the limits (`cache_long_statements`)."""


def cache_long_statements() -> None:
    """Let psycopg cache the conversion of statements up to the store's sizes (module limits
    psycopg reads at each execution; tests/store/test_private_apis.py checks that)."""
    from psycopg import _queries

    _queries.MAX_CACHED_STATEMENT_LENGTH = max(
        _queries.MAX_CACHED_STATEMENT_LENGTH, STATEMENT_CACHE_LENGTH
    )
    _queries.MAX_CACHED_STATEMENT_PARAMS = max(
        _queries.MAX_CACHED_STATEMENT_PARAMS, STATEMENT_CACHE_PARAMS
    )


def make_engine(
    url: str, *, pool_size: int = 10, ping_after_idle_s: float = DB_PING_AFTER_IDLE_S
) -> Engine:
    """An engine whose pool pings a connection that sat idle, so a restarted Postgres costs
    at most one failed transaction per process, not a crash."""
    cache_long_statements()
    engine = create_engine(
        normalize_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args={"connect_timeout": 5},
    )
    _ping_when_idle(engine, ping_after_idle_s)
    return engine


def _ping_when_idle(engine: Engine, after_s: float) -> None:
    """SQLAlchemy's `pool_pre_ping`, but only for connections idle `after_s` or more: under
    load a connection goes back out within milliseconds, and a ping would be a round trip on
    every transaction. A failed ping makes the pool replace the connection (the documented
    pessimistic-disconnect recipe: raise `DisconnectionError` on checkout)."""

    @event.listens_for(engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.pop("idle_since", None)
        if since is None or time.monotonic() - since < after_s:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except psycopg.Error as exc:
            if is_disconnect(engine.dialect, exc, dbapi_connection, None):
                raise DisconnectionError(str(exc)) from exc
            raise


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session inside one transaction: committed on success, rolled back on error."""
    with factory() as session, session.begin():
        yield session


@contextmanager
def _autocommitting(conn: Connection) -> Iterator[None]:
    """psycopg's own switch, set and reset while the connection is idle: cheaper than an
    isolation-level execution option, which SQLAlchemy applies and resets per checkout."""
    raw = conn.connection.dbapi_connection
    assert raw is not None
    raw.autocommit = True
    try:
        yield
    finally:
        raw.autocommit = False  # idle again: the commit or rollback that follows is a no-op


@contextmanager
def autocommit(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose every statement commits on its own: no `BEGIN` and `COMMIT` round
    trips. For reads, and for work that is one atomic statement followed by reads (under
    READ COMMITTED each statement of a transaction reads its own snapshot anyway)."""
    with factory() as session, session.begin(), _autocommitting(session.connection()):
        yield session


@contextmanager
def autocommit_connection(engine: Engine) -> Iterator[Connection]:
    """`autocommit` on a Core connection: for the hot path's hand-built statements, which
    need no ORM session. Skipping the session's bookkeeping saves about 60 µs of CPU per use
    (a third of what the context costs)."""
    with engine.connect() as conn, _autocommitting(conn):
        yield conn
